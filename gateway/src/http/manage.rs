//! NIP-86 community management: `POST /` of a community's host with `Content-Type:
//! application/nostr+json+rpc`, NIP-98 signed with a `payload` tag, answered `{"result", "error"}`
//! with the status of what happened (401 unauthenticated, 403 not the owner or an admin or
//! `deny_protected`, 400 a bad call, 429 over the signer's per-minute limit). The call is parsed here ([`buzz_core::nip86`]) and decided by the write-service over
//! `<p>.v1.manage`, under the membership rules of `/api/members`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use buzz_bus::manage::{ManageReply, ManageRequest};
use buzz_core::nip86;
use buzz_http_auth::ApiError;
use serde_json::{json, Value};

use crate::state::AppState;

/// A JSON-RPC-shaped answer: `{"result": ..., "error": null}` or `{"result": null, "error": ...}`.
fn answer(status: StatusCode, result: Value, error: Option<&str>) -> Response {
    (status, Json(json!({ "result": result, "error": error }))).into_response()
}

fn refused(e: &ApiError) -> Response {
    answer(e.status, Value::Null, Some(&e.message))
}

/// True when the request is a NIP-86 call (its `Content-Type`); other `POST /` are 415.
fn is_rpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(nip86::CONTENT_TYPE))
}

/// NIP-86 requires the NIP-98 `payload` tag, whatever the body (checked before the signature is
/// verified and spent: a request without it is refused as unauthenticated).
fn has_payload_tag(headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| buzz_core::nip98::decode_header(v).ok())
        .is_some_and(|event| event.tag_value("payload").is_some())
}

/// `POST /`: one NIP-86 call.
pub async fn rpc(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Bytes) -> Response {
    if !is_rpc(&headers) {
        let e = format!("POST / takes Content-Type: {}", nip86::CONTENT_TYPE);
        return answer(StatusCode::UNSUPPORTED_MEDIA_TYPE, Value::Null, Some(&e));
    }
    let (host, community) = match crate::http::request::community_for(&state, &headers).await {
        Ok(t) => t,
        Err(e) => return refused(&e),
    };
    // `deny_protected` refuses management outright, as it refuses `/api/members`.
    if let Err(denial) = crate::fi::admission::refuse_protected(state.fi_gate(), "POST", "/") {
        return refused(&ApiError::from(denial));
    }
    if crate::http::request::bearer(&headers).is_some() {
        return answer(StatusCode::UNAUTHORIZED, Value::Null, Some("NIP-86 takes NIP-98 authorization only"));
    }
    if headers.contains_key(header::AUTHORIZATION) && !has_payload_tag(&headers) {
        return answer(StatusCode::UNAUTHORIZED, Value::Null, Some("NIP-86 requires the NIP-98 payload tag"));
    }
    let actor = match crate::http::request::http_actor(&state, &headers, &host, "POST", "/", &body).await {
        Ok(a) => a,
        Err(e) => return refused(&e),
    };
    // Each signer's calls in this community, across gateways (the write limit's sliding window;
    // Redis trouble lets the call through, as for writes). Refused calls count too: each one
    // costs a transaction.
    if let Err(reason) = state.manage_rate.check(community.community_id, &actor.pubkey).await {
        return answer(StatusCode::TOO_MANY_REQUESTS, Value::Null, Some(&reason));
    }
    let call = match nip86::parse(&body) {
        Ok(c) => c,
        Err(e) => return answer(StatusCode::BAD_REQUEST, Value::Null, Some(&e)),
    };
    let req = ManageRequest { community_id: community.community_id, actor, call };
    // Not retried on another replica, like member changes: a change is not idempotent in its answer.
    let reply: Result<ManageReply, _> =
        buzz_bus::rpc::request(&state.nats, state.subjects.manage(), &req, state.settings.bus_timeout).await;
    match reply.and_then(|r| r) {
        Ok(result) => answer(StatusCode::OK, result, None),
        Err(e) => refused(&ApiError::from(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nip86_content_type_is_a_call() {
        let mut h = HeaderMap::new();
        assert!(!is_rpc(&h));
        h.insert(header::CONTENT_TYPE, "application/json".parse().unwrap_or_else(|_| unreachable!()));
        assert!(!is_rpc(&h));
        let v = "application/nostr+json+rpc; charset=utf-8";
        h.insert(header::CONTENT_TYPE, v.parse().unwrap_or_else(|_| unreachable!()));
        assert!(is_rpc(&h));
    }
}
