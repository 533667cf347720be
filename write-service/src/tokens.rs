//! `POST /api/tokens`: store a token grant (by hash) bound to the signer.
//!
//! Rules (docs/design.md, "Tokens"): the signer must be a community member; only owners and admins
//! may grant `members:write`; scopes are non-empty and unique; `expires_in` is 1 s to 1 year
//! (absent = 1 year, so every token expires); a channel restriction is a non-empty list of unique
//! non-nil UUIDs and only ever narrows what the signer may do, so it is stored without checking
//! that the channels exist (which would reveal private channels).

use std::collections::HashSet;

use buzz_bus::{Actor, IssuedToken, Scope, WriteData, WriteOk};
use buzz_core::{ChannelId, CommunityId, TokenHash};
use sqlx::PgPool;

use crate::error::{WriteError, WriteResult};
use crate::rules::Refusal;

/// Longest and default lifetime of a token.
pub const MAX_EXPIRES_IN: u64 = 365 * 24 * 60 * 60;
/// Most channels one token may be restricted to.
pub const MAX_CHANNEL_IDS: usize = 100;

/// Checks a grant; returns the lifetime in seconds.
fn validate(
    scopes: &[Scope],
    channel_ids: Option<&[ChannelId]>,
    expires_in: Option<u64>,
) -> Result<u64, Refusal> {
    if scopes.is_empty() {
        return Err(Refusal::NoScopes);
    }
    let mut seen = HashSet::new();
    if !scopes.iter().all(|s| seen.insert(*s)) {
        return Err(Refusal::RepeatedScope);
    }
    if let Some(ids) = channel_ids {
        if ids.is_empty() {
            return Err(Refusal::NoChannelIds);
        }
        if ids.len() > MAX_CHANNEL_IDS {
            return Err(Refusal::TooManyChannelIds(MAX_CHANNEL_IDS));
        }
        let mut seen = HashSet::new();
        if !ids.iter().all(|id| !id.is_nil() && seen.insert(*id)) {
            return Err(Refusal::BadChannelIds);
        }
    }
    match expires_in {
        None => Ok(MAX_EXPIRES_IN),
        Some(0) => Err(Refusal::ExpiresInZero),
        Some(s) if s > MAX_EXPIRES_IN => Err(Refusal::ExpiresInTooLong(MAX_EXPIRES_IN)),
        Some(s) => Ok(s),
    }
}

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
    let expires_in = validate(scopes, channel_ids, expires_in)?;
    // Only a signed (NIP-98) session mints tokens; the gateway never forwards a bearer actor here,
    // and a restricted actor could not widen itself anyway.
    if actor.channel_ids.is_some() || !Scope::ALL.iter().all(|s| actor.has_scope(*s)) {
        return Err(Refusal::UnsignedTokenRequest.into());
    }
    let mut tx = pool.begin().await?;
    let role = buzz_store::access::community_role(&mut tx, community, &actor.pubkey).await?;
    let Some(role) = role else {
        return Err(Refusal::NotCommunityMember.into());
    };
    if scopes.contains(&Scope::MembersWrite) && !role.is_admin() {
        return Err(Refusal::MembersWriteGrant.into());
    }
    let names: Vec<&str> = scopes.iter().map(|s| scope_name(*s)).collect();
    let secs = i64::try_from(expires_in).map_err(|_| Refusal::ExpiresInRange)?;
    let expires_at: i64 = sqlx::query_scalar(
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
    .map_err(|e| {
        if buzz_store::is_unique_violation(&e) {
            Refusal::TokenIssued.into()
        } else {
            WriteError::Storage(e)
        }
    })?;
    tx.commit().await.map_err(WriteError::Commit)?;
    let data = WriteData::Token(IssuedToken {
        scopes: scopes.to_vec(),
        channel_ids: channel_ids.map(<[ChannelId]>::to_vec),
        expires_at,
    });
    Ok(WriteOk { duplicate: false, message: String::new(), data: Some(data) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_must_be_present_and_unique() {
        assert!(validate(&[], None, None).is_err());
        assert!(validate(&[Scope::MessagesRead, Scope::MessagesRead], None, None).is_err());
        assert_eq!(validate(&[Scope::MessagesRead], None, None), Ok(MAX_EXPIRES_IN));
    }

    #[test]
    fn expiry_is_positive_and_at_most_a_year() {
        let s = [Scope::MessagesRead];
        assert!(validate(&s, None, Some(0)).is_err());
        assert!(validate(&s, None, Some(MAX_EXPIRES_IN + 1)).is_err());
        assert_eq!(validate(&s, None, Some(1)), Ok(1));
    }

    #[test]
    fn channel_restrictions_are_non_empty_unique_and_non_nil() {
        let s = [Scope::MessagesRead];
        let a = ChannelId::from_u128(1);
        assert!(validate(&s, Some(&[]), None).is_err());
        assert!(validate(&s, Some(&[a, a]), None).is_err());
        assert!(validate(&s, Some(&[ChannelId::nil()]), None).is_err());
        assert!(validate(&s, Some(&[a]), None).is_ok());
    }
}
