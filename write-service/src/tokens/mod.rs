//! `POST /api/tokens`: store a token grant (by hash) bound to the signer, under `rules::tokens`;
//! its statement is `sql.rs`.

pub mod sql;

use buzz_bus::{Actor, IssuedToken, Scope, WriteData, WriteOk};
use buzz_core::{ChannelId, CommunityId, TokenHash};
use sqlx::PgPool;

use crate::error::{WriteError, WriteResult};
use crate::rules::tokens;

fn scope_name(s: Scope) -> &'static str {
    match s {
        Scope::MessagesRead => "messages:read",
        Scope::MessagesWrite => "messages:write",
        Scope::ChannelsWrite => "channels:write",
        Scope::MembersWrite => "members:write",
    }
}

/// Mints a bearer token for `actor` with `scopes`, optionally limited to channels and a lifetime.
#[tracing::instrument(
    name = "db.transaction",
    skip_all,
    fields(db.system = "postgresql", db.operation = "issue", otel.kind = "client")
)]
pub async fn issue(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    token_hash: &TokenHash,
    scopes: &[Scope],
    channel_ids: Option<&[ChannelId]>,
    expires_in: Option<u64>,
) -> WriteResult<WriteOk> {
    let expires_in = tokens::validate(scopes, channel_ids, expires_in)?;
    tokens::signed(actor)?;
    let mut tx = pool.begin().await?;
    let role = buzz_store::access::community_role(&mut tx, community, &actor.pubkey).await?;
    let secs = tokens::grant(role, scopes, expires_in)?;
    let names: Vec<&str> = scopes.iter().map(|s| scope_name(*s)).collect();
    let row = sql::Grant { community, token_hash, pubkey: &actor.pubkey, scopes: &names, channel_ids, secs };
    let expires_at = sql::insert(&mut tx, &row).await?;
    let expires_at = tokens::issued(expires_at)?;
    tx.commit().await.map_err(WriteError::Commit)?;
    let data = WriteData::Token(IssuedToken {
        scopes: scopes.to_vec(),
        channel_ids: channel_ids.map(<[ChannelId]>::to_vec),
        expires_at,
    });
    Ok(WriteOk { duplicate: false, message: String::new(), data: Some(data) })
}
