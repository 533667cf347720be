//! What every tenant HTTP request goes through: host binding and authentication (NIP-98, or
//! `Authorization: Bearer <token>` resolved to its actor). Handlers get them through the request
//! extractors (`extract.rs`, which builds on this module); the WebSocket upgrade uses [`bearer`]
//! and [`resolve`]. A token is never logged; only its sha256 crosses the bus.

use axum::http::{header, HeaderMap, StatusCode};
use buzz_bus::{Actor, CommunityLease};
use buzz_core::{CommunityId, TokenHash};
use buzz_http_auth::ApiError;
use sha2::Digest as _;

use crate::state::AppState;

/// The community of this request's Host; unknown or empty hosts fail closed with 404.
pub async fn community_for(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(String, CommunityLease), ApiError> {
    let not_found =
        || ApiError::new(StatusCode::NOT_FOUND, "unknown_host", "no community is configured for this host");
    let raw = headers.get(header::HOST).and_then(|v| v.to_str().ok()).ok_or_else(not_found)?;
    let host = buzz_core::host::normalize_host(raw).ok_or_else(not_found)?;
    // A failed policy lookup fails closed. Unless FI is off, it is the contract's FI denial
    // `restricted: authorization unavailable` (503): the community's FI policy cannot be known.
    let lease = state.hosts.lookup(&host).await.map_err(|e| {
        if state.settings.nip_fi.mode == buzz_fi::Mode::Off {
            ApiError::from(e)
        } else {
            ApiError::from(crate::fi::denial::Denial::AuthorizationUnavailable)
        }
    })?;
    match lease {
        Some(c) => Ok((host, c)),
        None => Err(not_found()),
    }
}

/// The URL forms a NIP-98 `u` tag may take for this host and path: https always, http for
/// loopback dev hosts. The root (NIP-86's relay URL) may also be named without its slash and
/// with the WebSocket scheme, as clients name the relay.
fn signed_urls(host: &str, path: &str) -> Vec<String> {
    let loopback = buzz_core::host::is_loopback_host(host);
    let schemes: &[&str] = match (path == "/", loopback) {
        (false, false) => &["https"],
        (false, true) => &["https", "http"],
        (true, false) => &["https", "wss"],
        (true, true) => &["https", "http", "wss", "ws"],
    };
    let paths: &[&str] = if path == "/" { &["/", ""] } else { &[path] };
    schemes.iter().flat_map(|s| paths.iter().map(move |p| format!("{s}://{host}{p}"))).collect()
}

/// Authenticates a tenant HTTP request and returns who is acting: `Authorization: Bearer <token>`
/// as the token's actor (its scopes and channel restriction), else NIP-98 with every scope.
/// `path_and_query` is what the signed `u` must name after the host. Every `/api/*` route
/// authenticates through here.
pub async fn http_actor(
    state: &AppState,
    headers: &HeaderMap,
    host: &str,
    method: &str,
    path_and_query: &str,
    body: &[u8],
) -> Result<Actor, ApiError> {
    crate::fi::admission::refuse_protected(state.fi_gate(), method, path_and_query)?;
    let mut actor = if let Some(token) = bearer(headers) {
        resolve_for_host(state, host, token).await?
    } else {
        let urls = signed_urls(host, path_and_query);
        Actor::session(buzz_http_auth::authenticate(headers, method, &urls, body, &state.guard).await?)
    };
    crate::fi::admission::admit_http(state.fi_gate(), host, headers, &mut actor).await?;
    Ok(actor)
}

/// Prefix of every token this relay issues.
pub const TOKEN_PREFIX: &str = "buzz_";

/// sha256 of the token, lowercase hex: the only form that is stored.
#[must_use]
pub fn hash(token: &str) -> TokenHash {
    TokenHash::from_bytes(&sha2::Sha256::digest(token.as_bytes()).into())
}

/// The token of `Authorization: Bearer <token>`, if the request carries that scheme.
#[must_use]
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

fn invalid_token() -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "invalid_token", "invalid or expired token")
}

/// The actor `token` authenticates as in `community`; unknown, expired or revoked is 401.
pub async fn resolve(state: &AppState, community: CommunityId, token: &str) -> Result<Actor, ApiError> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() > 128 {
        return Err(invalid_token());
    }
    state.access.token(community, hash(token)).await?.ok_or_else(invalid_token)
}

/// [`resolve`] for an HTTP request whose (normalised) host is known.
pub async fn resolve_for_host(state: &AppState, host: &str, token: &str) -> Result<Actor, ApiError> {
    let community = state.hosts.lookup(host).await?.ok_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "unknown_host", "no community is configured for this host")
    })?;
    resolve(state, community.community_id, token).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_is_read_case_insensitively_and_nostr_is_not_bearer() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, "bearer buzz_abc".parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(bearer(&h), Some("buzz_abc"));
        h.insert(header::AUTHORIZATION, "Nostr eyJ9".parse().unwrap_or_else(|_| unreachable!()));
        assert_eq!(bearer(&h), None);
    }
}
