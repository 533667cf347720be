//! Tenant HTTP: host binding, NIP-11, the WebSocket upgrade, the members API, probes.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, State, WebSocketUpgrade};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use buzz_bus::{Actor, BusError, CommunityLease, Role, WriteOk, WriteReply, WriteRequest};
use serde::Deserialize;

use crate::AppState;

pub fn router(state: Arc<AppState>) -> Router {
    let ready_nats = state.nats.clone();
    Router::new()
        .route("/", get(root))
        .route("/api/members", post(put_member))
        .route("/api/members/{pubkey}", delete(remove_member))
        .route("/api/tokens", post(crate::tokens::issue))
        .with_state(state.clone())
        .merge(crate::chat_api::router(state.clone()))
        .merge(crate::query_api::router(state))
        .merge(buzz_telemetry::admin_router(move || {
            let nats = ready_nats.clone();
            async move { nats.connection_state() == async_nats::connection::State::Connected }
        }))
}

/// The one error type of the tenant HTTP surface: `{"error","code"}` with a safe message.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(serde_json::json!({ "error": self.message, "code": self.code })))
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Nostr"));
        }
        res
    }
}

impl From<BusError> for ApiError {
    fn from(e: BusError) -> Self {
        let status = StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self { status, code: e.code.as_str(), message: e.message }
    }
}

impl From<buzz_http_auth::HttpAuthError> for ApiError {
    fn from(e: buzz_http_auth::HttpAuthError) -> Self {
        Self { status: e.status(), code: e.code(), message: e.to_string() }
    }
}

/// The community of this request's Host; unknown or empty hosts fail closed with 404.
pub async fn community_for(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<(String, CommunityLease), ApiError> {
    let not_found =
        || ApiError::new(StatusCode::NOT_FOUND, "unknown_host", "no community is configured for this host");
    let raw = headers.get(header::HOST).and_then(|v| v.to_str().ok()).ok_or_else(not_found)?;
    let host = buzz_core::host::normalize_host(raw).ok_or_else(not_found)?;
    match state.hosts.lookup(&host).await? {
        Some(c) => Ok((host, c)),
        None => Err(not_found()),
    }
}

async fn root(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let (host, community) = community_for(&state, &headers).await?;
    // `Authorization: Bearer` on the upgrade: resolved before upgrading; invalid is 401, no socket.
    let initial = match crate::tokens::bearer(&headers) {
        Some(token) => Some(crate::tokens::resolve(&state, community.community_id, token).await?),
        None => None,
    };
    if let Ok(ws) = upgrade {
        let max = state.settings.limits.max_message_length;
        // Frames up to 4x the limit still arrive, so an oversized message gets a NOTICE and the
        // socket survives; beyond that the connection is dropped.
        let hard_cap = max.saturating_mul(4).max(1 << 20);
        return Ok(ws
            .max_message_size(hard_cap)
            .max_frame_size(hard_cap)
            .on_upgrade(move |socket| crate::ws::run(socket, state, community, host, initial)));
    }
    let wants_nip11 = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/nostr+json"));
    if wants_nip11 {
        let mut res = Json(nip11(&state)).into_response();
        let h = res.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/nostr+json"));
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        return Ok(res);
    }
    Ok((StatusCode::OK, "buzz-relay: connect with a Nostr client over WebSocket\n").into_response())
}

/// NIP-11 relay information document.
#[must_use]
pub fn nip11(state: &AppState) -> serde_json::Value {
    serde_json::json!({
        "name": state.settings.relay_name,
        "description": "buzz-relay: a Nostr relay for team communities",
        "pubkey": state.settings.relay_pubkey,
        "software": "buzz-relay",
        "version": env!("CARGO_PKG_VERSION"),
        "supported_nips": [1, 11, 29, 42, 45, 98],
        "supported_extensions": ["nip-ar"],
        "limitation": state.settings.limits,
        "artifacts": artifacts_nip11(&state.settings.limits.artifacts),
    })
}

/// NIP-11 `artifacts`: the NIP-AR kinds, the query forms and every enforced artifact query limit.
/// (`artifacts.snapshot` is advertised once the snapshot transport exists.)
fn artifacts_nip11(l: &buzz_core::ArtifactLimits) -> serde_json::Value {
    serde_json::json!({
        "revision_kind": buzz_core::nipar::KIND_REVISION,
        "removal_kind": buzz_core::nipar::KIND_REMOVAL,
        "queries": ["current", "history"],
        "max_tag_name_bytes": l.max_tag_name_bytes,
        "max_tag_value_bytes": l.max_tag_value_bytes,
        "max_total_tag_bytes": l.max_total_tag_bytes,
        "max_predicates": l.max_predicates,
        "max_values_per_predicate": l.max_values_per_predicate,
        "max_limit": l.max_limit,
        "default_limit": l.default_limit,
        "max_offset": l.max_offset,
        "execution_budget_ms": l.execution_budget_ms,
    })
}

/// The URL forms a NIP-98 `u` tag may take for this host and path: https always, http for
/// loopback dev hosts.
fn signed_urls(host: &str, path: &str) -> Vec<String> {
    let mut urls = vec![format!("https://{host}{path}")];
    if buzz_core::host::is_loopback_host(host) {
        urls.push(format!("http://{host}{path}"));
    }
    urls
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
    if let Some(token) = crate::tokens::bearer(headers) {
        return crate::tokens::resolve_for_host(state, host, token).await;
    }
    let signer =
        buzz_http_auth::authenticate(headers, method, &signed_urls(host, path_and_query), body, &state.guard)
            .await?;
    Ok(Actor::session(signer))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PutMember {
    pubkey: String,
    #[serde(default)]
    role: Option<String>,
}

/// Member changes are not retried on another replica: they are not idempotent in their answer
/// (a retry after a stalled attempt that committed answers `not a member` for a removal that
/// happened, `200` for a grant that was new), see docs/design.md, "Stalls".
async fn write(state: &AppState, req: WriteRequest) -> Result<WriteOk, ApiError> {
    let reply: WriteReply =
        buzz_bus::rpc::request(&state.nats, state.subjects.write(), &req, state.settings.bus_timeout).await?;
    Ok(reply?)
}

async fn put_member(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let (host, community) = community_for(&state, &headers).await?;
    let actor = http_actor(&state, &headers, &host, "POST", "/api/members", &body).await?;
    let req: PutMember = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", format!("invalid body: {e}"))
    })?;
    let role = match req.role.as_deref() {
        None => Role::Member,
        Some(r) => Role::parse(r).ok_or_else(|| {
            ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", "role must be member or admin")
        })?,
    };
    let ok = write(
        &state,
        WriteRequest::PutMember {
            community_id: community.community_id,
            actor,
            pubkey: req.pubkey.clone(),
            role,
        },
    )
    .await?;
    let status = if ok.duplicate { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(serde_json::json!({ "pubkey": req.pubkey, "role": role.as_str() }))).into_response())
}

async fn remove_member(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(pubkey): Path<String>,
) -> Result<Response, ApiError> {
    let (host, community) = community_for(&state, &headers).await?;
    let path = format!("/api/members/{pubkey}");
    let actor = http_actor(&state, &headers, &host, "DELETE", &path, &[]).await?;
    write(
        &state,
        WriteRequest::RemoveMember { community_id: community.community_id, actor, pubkey: pubkey.clone() },
    )
    .await?;
    Ok((StatusCode::OK, Json(serde_json::json!({ "pubkey": pubkey, "removed": true }))).into_response())
}
