//! The statement of a token grant.

use buzz_core::{ChannelId, CommunityId, Pubkey, TokenHash};
use sqlx::PgConnection;

/// A token grant to store.
pub struct Grant<'a> {
    /// The community it is for.
    pub community: CommunityId,
    /// The token's hash (the token itself is never stored).
    pub token_hash: &'a TokenHash,
    /// The signer it is bound to.
    pub pubkey: &'a Pubkey,
    /// Its scopes' names.
    pub scopes: &'a [&'a str],
    /// The channels it is restricted to, if any.
    pub channel_ids: Option<&'a [ChannelId]>,
    /// Its lifetime in seconds.
    pub secs: i64,
}

/// Stores `grant`; returns when it expires (unix seconds), or `None` when its hash is already
/// stored (a unique violation, nothing written).
pub async fn insert(conn: &mut PgConnection, grant: &Grant<'_>) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO tokens (community_id, token_hash, pubkey, scopes, channel_ids, expires_at) \
         VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::bigint)) \
         RETURNING extract(epoch FROM expires_at)::bigint",
    )
    .bind(grant.community)
    .bind(grant.token_hash)
    .bind(grant.pubkey)
    .bind(grant.scopes)
    .bind(grant.channel_ids.map(<[ChannelId]>::to_vec))
    .bind(grant.secs)
    .fetch_one(conn)
    .await
    .map(Some)
    .or_else(|e| if buzz_store::is_unique_violation(&e) { Ok(None) } else { Err(e) })
}
