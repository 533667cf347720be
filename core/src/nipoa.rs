//! NIP-OA agent authorisation: `["auth", <owner pubkey>, <conditions>, <sig>]`, where `sig` is the
//! owner's BIP-340 signature over `sha256("nostr:agent-auth:" + <agent pubkey> + ":" + <conditions>)`
//! and `conditions` are `kind=N`, `created_at<T`, `created_at>T` clauses joined by `&`.

use sha2::{Digest, Sha256};

use crate::event::{verify_schnorr, Event};
use crate::ids::Pubkey;

/// The prefix of the signed grant string.
pub const PREFIX: &str = "nostr:agent-auth:";

/// A parsed `auth` tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentAuth {
    /// Public key of the owner who delegated.
    pub owner: Pubkey,
    /// The conditions string the delegation is limited to.
    pub conditions: String,
    /// The owner's signature over the delegation.
    pub sig: String,
}

/// The `auth` tag of an event: `Ok(None)` without one; more than one, or a malformed one, is an
/// error (text after `invalid: `).
pub fn auth_tag(event: &Event) -> Result<Option<AgentAuth>, String> {
    let mut tags = event.tags_named("auth");
    let Some(tag) = tags.next() else { return Ok(None) };
    if tags.next().is_some() {
        return Err("more than one auth tag".into());
    }
    match tag {
        [_, owner, conditions, sig] if crate::hex::is_lower_hex(sig, 128) => match Pubkey::parse(owner) {
            Ok(owner) => Ok(Some(AgentAuth { owner, conditions: conditions.clone(), sig: sig.clone() })),
            Err(_) => Err("malformed auth tag".into()),
        },
        _ => Err("malformed auth tag".into()),
    }
}

/// The digest the owner signs: sha256 of `<prefix><agent>:<conditions>`. The prefix is a parameter
/// so the construction can be checked against NIP-26's published vector, which differs only there.
#[must_use]
pub fn grant_digest(prefix: &str, agent: &str, conditions: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(prefix.as_bytes());
    h.update(agent.as_bytes());
    h.update(b":");
    h.update(conditions.as_bytes());
    h.finalize().into()
}

/// Verifies the owner's signature over the grant for `agent` (signature only; see [`allows`]).
#[must_use]
pub fn verify(agent: &Pubkey, auth: &AgentAuth) -> bool {
    verify_with_prefix(PREFIX, agent.as_str(), auth)
}

fn verify_with_prefix(prefix: &str, agent: &str, auth: &AgentAuth) -> bool {
    let Ok(sig) = hex::decode(&auth.sig) else { return false };
    let Ok(sig) = <[u8; 64]>::try_from(sig) else { return false };
    verify_schnorr(&auth.owner.to_bytes(), &grant_digest(prefix, agent, &auth.conditions), &sig)
}

/// Checks `conditions` against an event's kind and creation time. Every clause must hold; several
/// `kind=` clauses mean any of those kinds; `kind: None` (an AUTH, which publishes nothing) skips
/// the kind clauses. An empty string allows everything. An unknown or malformed clause is an error
/// (text after `invalid: `).
pub fn allows(conditions: &str, kind: Option<u32>, created_at: i64) -> Result<bool, String> {
    if conditions.is_empty() {
        return Ok(true);
    }
    let mut kinds = Vec::new();
    let mut ok = true;
    for clause in conditions.split('&') {
        if let Some(k) = clause.strip_prefix("kind=") {
            kinds.push(k.parse::<u32>().map_err(|_| format!("bad auth condition {clause:?}"))?);
        } else if let Some(t) = clause.strip_prefix("created_at<") {
            ok &= created_at < t.parse::<i64>().map_err(|_| format!("bad auth condition {clause:?}"))?;
        } else if let Some(t) = clause.strip_prefix("created_at>") {
            ok &= created_at > t.parse::<i64>().map_err(|_| format!("bad auth condition {clause:?}"))?;
        } else {
            return Err(format!("unknown auth condition {clause:?}"));
        }
    }
    Ok(ok && (kinds.is_empty() || kind.is_none_or(|k| kinds.contains(&k))))
}

/// Signs a grant for `agent` with the owner's keys: the `auth` tag to put on the agent's events.
#[must_use]
pub fn grant(owner: &crate::keys::Keys, agent: &str, conditions: &str) -> Vec<String> {
    let sig = owner.sign_digest(&grant_digest(PREFIX, agent, conditions));
    vec!["auth".into(), owner.public_hex(), conditions.into(), sig]
}

/// Checks an event's `auth` tag, if any: the owner's grant must verify for the event's author and
/// allow its kind and time. Returns the owner for a valid tag. `kind: None` for AUTH events.
pub fn check_event(event: &Event, kind: Option<u32>) -> Result<Option<Pubkey>, String> {
    let Some(auth) = auth_tag(event)? else { return Ok(None) };
    if !verify(&event.pubkey, &auth) {
        return Err("unverified auth tag".into());
    }
    if !allows(&auth.conditions, kind, event.created_at)? {
        return Err("auth tag conditions do not allow this event".into());
    }
    Ok(Some(auth.owner))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// NIP-26's published example: the same construction with the `nostr:delegation:` prefix.
    #[test]
    fn the_construction_verifies_the_published_nip26_vector() {
        let auth = AgentAuth {
            owner: Pubkey::parse("8e0d3d3eb2881ec137a11debe736a9086715a8c8beeeda615780064d68bc25dd").unwrap(),
            conditions: "kind=1&created_at>1674834236&created_at<1677426236".into(),
            sig: "6f44d7fe4f1c09f3954640fb58bd12bae8bb8ff4120853c4693106c82e920e2b898f1f9ba9bd65449a987c39c0423426ab7b53910c0c6abfb41b30bc16e5f524".into(),
        };
        let agent = "477318cfb5427b9cfc66a9fa376150c1ddbc62115ae27cef72417eb959691396";
        assert!(verify_with_prefix("nostr:delegation:", agent, &auth));
        // Under the NIP-OA prefix the same signature is not a grant.
        assert!(!verify(&Pubkey::parse(agent).unwrap(), &auth));
        // Tampered conditions or another agent fail.
        let widened = AgentAuth { conditions: "kind=1".into(), ..auth.clone() };
        assert!(!verify_with_prefix("nostr:delegation:", agent, &widened));
        assert!(!verify_with_prefix("nostr:delegation:", &"1".repeat(64), &auth));
    }

    #[test]
    fn a_signed_grant_verifies_for_its_agent_only() {
        let owner = crate::keys::Keys::generate();
        let agent = crate::keys::Keys::generate();
        let tag = grant(&owner, &agent.public_hex(), "kind=9&created_at<9999999999");
        let ev = agent.sign_new(9, vec![tag], "");
        let auth = auth_tag(&ev).unwrap().unwrap();
        assert!(verify(&agent.pubkey(), &auth));
        assert!(!verify(&owner.pubkey(), &auth));
    }

    #[test]
    fn conditions_are_all_checked_and_unknown_clauses_are_invalid() {
        assert_eq!(allows("", Some(5), 0), Ok(true));
        assert_eq!(allows("kind=9", Some(9), 0), Ok(true));
        assert_eq!(allows("kind=9", Some(1), 0), Ok(false));
        assert_eq!(allows("kind=9&kind=45010", Some(45010), 0), Ok(true));
        assert_eq!(allows("created_at<100&created_at>10", Some(1), 50), Ok(true));
        assert_eq!(allows("created_at<100&created_at>10", Some(1), 100), Ok(false));
        assert_eq!(allows("created_at<100&created_at>10", Some(1), 10), Ok(false));
        assert_eq!(allows("kind=9", None, 0), Ok(true));
        assert!(allows("kind=x", Some(1), 0).is_err());
        assert!(allows("pubkey=abc", Some(1), 0).is_err());
    }

    #[test]
    fn more_than_one_auth_tag_or_a_malformed_one_is_invalid() {
        let owner = crate::keys::Keys::generate();
        let agent = crate::keys::Keys::generate();
        let tag = grant(&owner, &agent.public_hex(), "");
        let two = agent.sign_new(9, vec![tag.clone(), tag], "");
        assert_eq!(auth_tag(&two), Err("more than one auth tag".into()));
        let short = agent.sign_new(9, vec![vec!["auth".into(), owner.public_hex()]], "");
        assert!(auth_tag(&short).is_err());
        assert_eq!(auth_tag(&agent.sign_new(9, vec![], "")), Ok(None));
    }
}
