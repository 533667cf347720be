//! `POST /api/tokens`: store a token grant (by hash) bound to the signer.

use buzz_bus::{Actor, BusError, ErrorCode, Scope, WriteOk};
use sqlx::PgPool;
use uuid::Uuid;

pub async fn issue(
    _pool: &PgPool,
    _community: Uuid,
    _actor: &Actor,
    _token_hash: &str,
    _scopes: &[Scope],
    _channel_ids: Option<&[Uuid]>,
    _expires_in: Option<u64>,
) -> Result<WriteOk, BusError> {
    Err(BusError::new(ErrorCode::Unsupported, "tokens are not available yet"))
}
