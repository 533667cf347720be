//! `POST /api/tokens`: a token grant (stored by hash) bound to the signer.
//!
//! Rules (docs/design.md, "Tokens"): the signer must be a community member; only owners and admins
//! may grant `members:write`; scopes are non-empty and unique; `expires_in` is 1 s to 1 year
//! (absent = 1 year, so every token expires); a channel restriction is a non-empty list of unique
//! non-nil UUIDs and only ever narrows what the signer may do, so it is stored without checking
//! that the channels exist (which would reveal private channels).

use std::collections::HashSet;

use buzz_bus::{Actor, Scope};
use buzz_core::ChannelId;
use buzz_store::Role;

use super::Refusal;

/// Longest and default lifetime of a token.
pub const MAX_EXPIRES_IN: u64 = 365 * 24 * 60 * 60;
/// Most channels one token may be restricted to.
pub const MAX_CHANNEL_IDS: usize = 100;

/// Checks a grant without I/O; returns the lifetime in seconds.
pub fn validate(
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

/// Only a signed (NIP-98) session mints tokens; the gateway never forwards a bearer actor here,
/// and a restricted actor could not widen itself anyway.
pub fn signed(actor: &Actor) -> Result<(), Refusal> {
    if actor.channel_ids.is_some() || !Scope::ALL.iter().all(|s| actor.has_scope(*s)) {
        return Err(Refusal::UnsignedTokenRequest);
    }
    Ok(())
}

/// The signer's community role (`None`: no member) may grant `scopes`; then the lifetime as the
/// database takes it.
pub fn grant(role: Option<Role>, scopes: &[Scope], expires_in: u64) -> Result<i64, Refusal> {
    let role = role.ok_or(Refusal::NotCommunityMember)?;
    if scopes.contains(&Scope::MembersWrite) && !role.is_admin() {
        return Err(Refusal::MembersWriteGrant);
    }
    i64::try_from(expires_in).map_err(|_| Refusal::ExpiresInRange)
}

/// The grant was stored (`None`: its hash was already there).
pub fn issued(expires_at: Option<i64>) -> Result<i64, Refusal> {
    expires_at.ok_or(Refusal::TokenIssued)
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

    #[test]
    fn a_member_grants_members_write_only_as_an_owner_or_admin() {
        let all = [Scope::MessagesRead, Scope::MembersWrite];
        assert_eq!(grant(None, &[Scope::MessagesRead], 1), Err(Refusal::NotCommunityMember));
        assert_eq!(grant(Some(Role::Member), &all, 1), Err(Refusal::MembersWriteGrant));
        assert_eq!(grant(Some(Role::Admin), &all, 1), Ok(1));
        assert_eq!(grant(Some(Role::Member), &[Scope::MessagesRead], u64::MAX), Err(Refusal::ExpiresInRange));
    }

    #[test]
    fn only_an_unrestricted_signed_session_mints_tokens() {
        let actor = Actor::session(buzz_core::Keys::generate().pubkey());
        assert_eq!(signed(&actor), Ok(()));
        let narrowed = Actor { channel_ids: Some(vec![ChannelId::from_u128(1)]), ..actor.clone() };
        assert_eq!(signed(&narrowed), Err(Refusal::UnsignedTokenRequest));
        let bearer = Actor { scopes: vec![Scope::MessagesRead], ..actor };
        assert_eq!(signed(&bearer), Err(Refusal::UnsignedTokenRequest));
    }
}
