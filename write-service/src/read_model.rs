//! The chat read model's writes: read markers (and, on message insert, mentions).

use buzz_bus::{Actor, BusError, ErrorCode, WriteOk};
use sqlx::PgPool;
use uuid::Uuid;

pub async fn mark_read(
    _pool: &PgPool,
    _community: Uuid,
    _actor: &Actor,
    _channel: Uuid,
    _up_to: &str,
) -> Result<WriteOk, BusError> {
    Err(BusError::new(ErrorCode::Unsupported, "read markers are not available yet"))
}
