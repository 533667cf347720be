//! The chat read model's reads: channel summaries and mentions.

use buzz_bus::{BusError, ChatReply, ChatRequest, ErrorCode};
use sqlx::PgPool;

pub async fn handle(_pool: &PgPool, _req: ChatRequest) -> ChatReply {
    Err(BusError::new(ErrorCode::Unsupported, "the chat read model is not available yet"))
}
