//! Bearer tokens: `POST /api/tokens` (NIP-98 only); resolving `Authorization: Bearer <token>`
//! for HTTP calls and the WebSocket upgrade lives in [`crate::http::request`].
//!
//! A token is `buzz_` + base64url(32 random bytes), shown to its holder once. Only its sha256 (hex)
//! crosses the bus or reaches storage, and neither the token nor the header is ever logged.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use buzz_bus::{IssuedToken, Scope, WriteData, WriteRequest};
use buzz_core::http_json::JsonObject;
use buzz_core::ChannelId;
use rand::RngCore as _;

use buzz_http_auth::ApiError;

use crate::http::extract::{Nip98Signed, Signed};
use crate::http::request::{hash, TOKEN_PREFIX};
use crate::state::AppState;

/// A fresh token: `buzz_` + base64url (no padding) of 32 random bytes.
#[must_use]
pub fn generate() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::invalid_request(message)
}

fn parse_scope(s: &str) -> Option<Scope> {
    Scope::ALL.into_iter().find(|scope| serde_json::to_value(scope).is_ok_and(|v| v == s))
}

/// A channel id as the contract spells it: lowercase, hyphenated, non-nil.
fn parse_channel(s: &str) -> Option<ChannelId> {
    ChannelId::parse(s).ok()
}

/// `POST /api/tokens`: NIP-98 only (a bearer token cannot mint tokens). `201` with the token,
/// which is never shown again.
pub async fn issue(
    State(state): State<Arc<AppState>>,
    Nip98Signed(Signed { community, actor, body }): Nip98Signed,
) -> Result<Response, ApiError> {
    let req =
        JsonObject::parse(&body, &["scopes", "channel_ids", "expires_in"]).map_err(ApiError::invalid_body)?;
    let scopes = req
        .opt_strings("scopes")
        .map_err(ApiError::invalid_body)?
        .ok_or_else(|| ApiError::invalid_body("missing field scopes".into()))?
        .into_iter()
        .map(|s| parse_scope(s).ok_or_else(|| bad_request(format!("unknown scope {s:?} in scopes"))))
        .collect::<Result<Vec<_>, _>>()?;
    let expires_in = req.opt_u64("expires_in").map_err(ApiError::invalid_body)?;
    let channel_ids = req
        .opt_strings("channel_ids")
        .map_err(ApiError::invalid_body)?
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
    let Some(WriteData::Token(IssuedToken { scopes, channel_ids, expires_at })) = reply?.data else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            buzz_core::refusal::INTERNAL,
        ));
    };
    let body = serde_json::json!({
        "token": token,
        "scopes": scopes,
        "channel_ids": channel_ids,
        "expires_at": expires_at,
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
        let id = uuid::Uuid::new_v4();
        assert_eq!(parse_channel(&id.to_string()), Some(ChannelId(id)));
        assert_eq!(parse_channel(&id.to_string().to_uppercase()), None);
        assert_eq!(parse_channel(&id.simple().to_string()), None);
    }
}
