//! Bearer token resolution for gateways.

use buzz_bus::{Actor, BusError, Scope, TokenReply};
use buzz_core::{ChannelId, CommunityId, TokenHash};
use sqlx::PgPool;

fn parse_scope(s: &str) -> Option<Scope> {
    match s {
        "messages:read" => Some(Scope::MessagesRead),
        "messages:write" => Some(Scope::MessagesWrite),
        "channels:write" => Some(Scope::ChannelsWrite),
        "members:write" => Some(Scope::MembersWrite),
        _ => None,
    }
}

/// The actor a token authenticates as, or `token: None` when the token is unknown, expired, or
/// its signer is no longer a community member. A membership that was removed and granted again
/// does not revive tokens minted before the removal (`added_at` is newer than the token).
pub async fn resolve(
    pool: &PgPool,
    community: CommunityId,
    token_hash: &TokenHash,
) -> Result<TokenReply, BusError> {
    let none = TokenReply { token: None };
    // (pubkey, scopes, channel restriction, expiry in unix seconds)
    type Grant = (buzz_core::Pubkey, Vec<String>, Option<Vec<ChannelId>>, i64);
    let row: Option<Grant> = sqlx::query_as(
        "SELECT t.pubkey, t.scopes, t.channel_ids, floor(extract(epoch FROM t.expires_at))::bigint FROM tokens t \
         JOIN community_members m ON m.community_id = t.community_id AND m.pubkey = t.pubkey \
         WHERE t.community_id = $1 AND t.token_hash = $2 AND t.expires_at > now() \
           AND m.added_at <= t.created_at",
    )
    .bind(community)
    .bind(token_hash)
    .fetch_optional(pool)
    .await
    .map_err(crate::error::sql_error)?;
    let Some((pubkey, scopes, channel_ids, expires_at)) = row else { return Ok(none) };
    let scopes = scopes.iter().filter_map(|s| parse_scope(s)).collect();
    let actor = Actor {
        pubkey,
        scopes,
        channel_ids,
        fi_admitted: false,
        agent_of: None,
        expires_at: Some(expires_at),
    };
    Ok(TokenReply { token: Some(actor) })
}
