//! Bearer tokens: `POST /api/tokens` (NIP-98 only); resolving `Authorization: Bearer <token>`
//! for HTTP calls and the WebSocket upgrade lives in [`crate::request`] (re-exported here).
//!
//! A token is `buzz_` + base64url(32 random bytes), shown to its holder once. Only its sha256 (hex)
//! crosses the bus or reaches storage, and neither the token nor the header is ever logged.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use buzz_bus::{Scope, WriteRequest};
use buzz_core::http_json::JsonObject;
use rand::RngCore as _;
use uuid::Uuid;

pub use crate::request::{bearer, hash, resolve, resolve_for_host, TOKEN_PREFIX};
use crate::request::{community_for, http_actor, invalid_body, ApiError};
use crate::AppState;

/// A fresh token: `buzz_` + base64url (no padding) of 32 random bytes.
#[must_use]
pub fn generate() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
}

fn parse_scope(s: &str) -> Option<Scope> {
    Scope::ALL.into_iter().find(|scope| serde_json::to_value(scope).is_ok_and(|v| v == s))
}

/// A channel id as the contract spells it: lowercase, hyphenated.
fn parse_channel(s: &str) -> Option<Uuid> {
    let u = Uuid::parse_str(s).ok()?;
    (u.hyphenated().to_string() == s).then_some(u)
}

/// `POST /api/tokens`: NIP-98 only (a bearer token cannot mint tokens). `201` with the token,
/// which is never shown again.
pub async fn issue(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (host, community) = community_for(&state, &headers).await?;
    if bearer(&headers).is_some() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "restricted",
            "tokens are issued only to NIP-98 signed requests",
        ));
    }
    let actor = http_actor(&state, &headers, &host, "POST", "/api/tokens", &body).await?;
    let req = JsonObject::parse(&body, &["scopes", "channel_ids", "expires_in"]).map_err(invalid_body)?;
    let scopes = req
        .opt_strings("scopes")
        .map_err(invalid_body)?
        .ok_or_else(|| invalid_body("missing field scopes".into()))?
        .into_iter()
        .map(|s| parse_scope(s).ok_or_else(|| bad_request(format!("unknown scope {s:?} in scopes"))))
        .collect::<Result<Vec<_>, _>>()?;
    let expires_in = req.opt_u64("expires_in").map_err(invalid_body)?;
    let channel_ids = req
        .opt_strings("channel_ids")
        .map_err(invalid_body)?
        .map(|ids| {
            ids.iter()
                .map(|s| parse_channel(s).ok_or_else(|| bad_request("channel_ids must be lowercase UUIDs")))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let token = generate();
    let write = WriteRequest::IssueToken {
        community_id: community.community_id,
        actor,
        token_hash: hash(&token),
        scopes,
        channel_ids,
        expires_in,
    };
    // Not retried: a second attempt after a stalled first one that committed would answer
    // `conflict: token already issued` for a token that exists (docs/design.md, "Stalls").
    let reply: buzz_bus::WriteReply =
        buzz_bus::rpc::request(&state.nats, state.subjects.write(), &write, state.settings.bus_timeout)
            .await?;
    let data = reply?.data.unwrap_or_default();
    let body = serde_json::json!({
        "token": token,
        "scopes": data["scopes"],
        "channel_ids": data["channel_ids"],
        "expires_at": data["expires_at"],
    });
    let mut res = (StatusCode::CREATED, Json(body)).into_response();
    res.headers_mut().insert(header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_url_safe_and_distinct() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 43);
        assert!(a[TOKEN_PREFIX.len()..].bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_eq!(hash(&a).len(), 64);
        assert_ne!(hash(&a), hash(&b));
    }

    #[test]
    fn scopes_and_channels_parse_strictly() {
        assert_eq!(parse_scope("members:write"), Some(Scope::MembersWrite));
        assert_eq!(parse_scope("admin"), None);
        let id = Uuid::new_v4();
        assert_eq!(parse_channel(&id.to_string()), Some(id));
        assert_eq!(parse_channel(&id.to_string().to_uppercase()), None);
        assert_eq!(parse_channel(&id.simple().to_string()), None);
    }
}
