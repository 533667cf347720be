//! NIP-FI admission at the WebSocket upgrade: when the community's effective requirement
//! (`BUZZ_NIP_FI_MODE` over the leased stored flag) is true, a socket needs FI evidence.
//!
//! Verifying evidence (`Nostr-Federated-Identity: Bearer <JWS>`) is not built yet, so every
//! presented evidence is rejected: a community that requires FI admits no socket (fail closed).

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use buzz_bus::CommunityLease;
use buzz_fi::FiSettings;

/// The evidence header.
pub const EVIDENCE_HEADER: &str = "nostr-federated-identity";

/// `None` when the upgrade may proceed; otherwise the contract's denial.
pub fn deny_upgrade(
    settings: &FiSettings,
    community: &CommunityLease,
    headers: &HeaderMap,
) -> Option<Response> {
    if !settings.mode.effective_required(community.requires_nip_fi) {
        return None;
    }
    if headers.get(EVIDENCE_HEADER).is_none() {
        let body =
            serde_json::json!({ "error": "auth-required: authentication required", "code": "auth_required" });
        let mut res = (StatusCode::UNAUTHORIZED, Json(body)).into_response();
        res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Nostr"));
        return Some(res);
    }
    let body = serde_json::json!({ "error": "restricted: evidence rejected", "code": "evidence_rejected" });
    Some((StatusCode::FORBIDDEN, Json(body)).into_response())
}
