//! `POST /api/tokens`: store a token grant (by hash) bound to the signer, under `rules::tokens`.

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
    let expires_at: Option<i64> = sqlx::query_scalar(
        "INSERT INTO tokens (community_id, token_hash, pubkey, scopes, channel_ids, expires_at) \
         VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::bigint)) \
         RETURNING extract(epoch FROM expires_at)::bigint",
    )
    .bind(community)
    .bind(token_hash)
    .bind(&actor.pubkey)
    .bind(&names)
    .bind(channel_ids.map(<[ChannelId]>::to_vec))
    .bind(secs)
    .fetch_one(&mut *tx)
    .await
    .map(Some)
    .or_else(|e| if buzz_store::is_unique_violation(&e) { Ok(None) } else { Err(e) })?;
    let expires_at = tokens::issued(expires_at)?;
    tx.commit().await.map_err(WriteError::Commit)?;
    let data = WriteData::Token(IssuedToken {
        scopes: scopes.to_vec(),
        channel_ids: channel_ids.map(<[ChannelId]>::to_vec),
        expires_at,
    });
    Ok(WriteOk { duplicate: false, message: String::new(), data: Some(data) })
}
