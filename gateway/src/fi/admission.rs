//! NIP-FI admission: FI evidence (`Nostr-Federated-Identity: Bearer <JWS>`) at the WebSocket
//! upgrade (its `nostr_pubkey` bound at NIP-42 AUTH, or to the upgrade's bearer token) and on
//! tenant HTTP (bound to the NIP-98 signer or the token's key) and the contract's denials.
//!
//! `effective_required` is `BUZZ_NIP_FI_MODE` over the leased stored flag; `off` never looks at
//! the lease's FI fields. Evidence that is presented is always verified (also where it is not
//! required), so a forged header is never silently ignored; valid evidence makes the socket
//! FI-admitted, which keeps it open through revalidation until min(connect + max lifetime, exp).

use std::time::Duration;

use axum::http::HeaderMap;
use buzz_bus::{Actor, CommunityLease};
use buzz_fi::evidence::{self, EvidenceError};
use buzz_fi::Mode;
use tokio::time::Instant;

use crate::fi::denial::Denial;
use crate::hosts::HostCache;

/// The evidence header.
pub const EVIDENCE_HEADER: &str = evidence::HEADER;

/// What admission reads of the gateway: the FI settings (`BUZZ_NIP_FI_*`), the issuer trust
/// registry and the host leases.
#[derive(Clone, Copy)]
pub struct Gate<'a> {
    /// The gateway's NIP-FI settings.
    pub settings: &'a buzz_fi::FiSettings,
    /// The issuer trust registry (`BUZZ_NIP_FI_ISSUERS`).
    pub trust: &'a buzz_fi::Registry,
    /// Host → community leases.
    pub hosts: &'a HostCache,
}

/// A socket admitted with valid evidence: the key AUTH must prove, and when it must close.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The Nostr key the evidence names; NIP-42 AUTH must be by this key.
    pub nostr_pubkey: buzz_core::Pubkey,
    /// When the socket closes: the evidence's expiry or the maximum connection lifetime, whichever is first.
    pub deadline: Instant,
}

/// The verified evidence of this request, `None` when there is none (and `off` ignores it).
fn verified(
    gate: Gate<'_>,
    community: &CommunityLease,
    host: &str,
    headers: &HeaderMap,
) -> Result<Option<evidence::Evidence>, Denial> {
    if gate.settings.mode == Mode::Off {
        return Ok(None);
    }
    let Some(raw) = headers.get(EVIDENCE_HEADER) else { return Ok(None) };
    let jws = raw.to_str().ok().and_then(evidence::bearer_value).ok_or(Denial::EvidenceRejected)?;
    match evidence::verify(gate.trust, jws, &community.fi_issuers, host, unix_now()) {
        Ok(ev) => Ok(Some(ev)),
        Err(EvidenceError::Rejected(why)) => {
            tracing::info!(community = %community.community_id, why, "fi evidence rejected");
            Err(Denial::EvidenceRejected)
        }
        Err(EvidenceError::Unavailable) => Err(Denial::AuthorizationUnavailable),
    }
}

/// Admission at the WebSocket upgrade. `initial`: the actor of a bearer token on the upgrade,
/// which must be the evidence's key. `Ok(None)`: a non-FI socket (allowed only while not required).
pub fn admit_upgrade(
    gate: Gate<'_>,
    community: &CommunityLease,
    host: &str,
    headers: &HeaderMap,
    initial: Option<&Actor>,
) -> Result<Option<Admission>, Denial> {
    let required = gate.settings.mode.effective_required(community.requires_nip_fi);
    let Some(ev) = verified(gate, community, host, headers)? else {
        return if required { Err(Denial::AuthRequired) } else { Ok(None) };
    };
    if initial.is_some_and(|a| a.pubkey != ev.nostr_pubkey) {
        return Err(Denial::EvidenceRejected);
    }
    let now = unix_now();
    let until_exp = Duration::from_secs(ev.exp.saturating_sub(now));
    let lifetime = gate.settings.max_connection_lifetime.min(until_exp);
    Ok(Some(Admission { nostr_pubkey: ev.nostr_pubkey, deadline: Instant::now() + lifetime }))
}

fn unix_now() -> u64 {
    u64::try_from(buzz_core::unix_now()).unwrap_or(0)
}

/// Whether `method path` is a protected HTTP route (`deny_protected` refuses these outright):
/// `/query`, `/api/*`, and NIP-86 management (`POST /`), which changes what `/api/members` does.
/// `GET /` (the WebSocket upgrade, NIP-11) is not: sockets need FI evidence there instead.
#[must_use]
pub fn is_protected(method: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or(path);
    path == "/query"
        || path.starts_with("/query/")
        || path.starts_with("/api/")
        || (method == "POST" && path == "/")
}

/// Before authenticating a tenant HTTP request: `deny_protected` refuses protected routes.
pub fn refuse_protected(gate: Gate<'_>, method: &str, path: &str) -> Result<(), Denial> {
    if gate.settings.mode == Mode::DenyProtected && is_protected(method, path) {
        return Err(Denial::AuthorizationDenied);
    }
    Ok(())
}

/// After authenticating a tenant HTTP request as `actor`: the evidence must be valid and name
/// the actor's key when the community requires FI (and whenever it is presented).
pub async fn admit_http(
    gate: Gate<'_>,
    host: &str,
    headers: &HeaderMap,
    actor: &mut Actor,
) -> Result<(), Denial> {
    if gate.settings.mode == Mode::Off {
        return Ok(());
    }
    let community = gate.hosts.lookup(host).await.map_err(|_| Denial::AuthorizationUnavailable)?;
    let Some(community) = community else {
        return Err(Denial::UnknownHost);
    };
    let required = gate.settings.mode.effective_required(community.requires_nip_fi);
    match verified(gate, &community, host, headers)? {
        Some(ev) if ev.nostr_pubkey == actor.pubkey => {
            actor.fi_admitted = true;
            Ok(())
        }
        Some(_) => Err(Denial::EvidenceRejected),
        None if required => Err(Denial::AuthRequired),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::is_protected;

    #[test]
    fn query_api_and_nip86_management_are_protected_and_the_relay_url_is_not() {
        for (method, path) in
            [("POST", "/query"), ("POST", "/query?count=1"), ("GET", "/api/channels"), ("POST", "/")]
        {
            assert!(is_protected(method, path), "{method} {path}");
        }
        for (method, path) in [("GET", "/"), ("GET", "/info"), ("GET", "/queryx"), ("POST", "/x")] {
            assert!(!is_protected(method, path), "{method} {path}");
        }
    }
}
