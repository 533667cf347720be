//! Tenant HTTP: the router (every error as the contract's JSON), NIP-11, the WebSocket upgrade,
//! the members API, probes (metrics are on the admin port: [`admin_router`]). Host binding and
//! authentication reach handlers as the extractors of [`crate::http::extract`].

use std::sync::Arc;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{DefaultBodyLimit, Path, State, WebSocketUpgrade};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use buzz_bus::{BusError, Role, WriteOk, WriteReply, WriteRequest};
use buzz_core::http_json::JsonObject;
use buzz_core::Pubkey;
use buzz_http_auth::ApiError;

use crate::fi::sockets::FiSockets;
use crate::http::extract::{Signed, Tenant};
use crate::state::AppState;

/// The WebSocket read buffer of each socket.
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// Every tenant HTTP route, the probes, and the contract's JSON for whatever the framework answers
/// itself. Request bodies are bounded by `max_message_length`, like WebSocket messages.
pub fn router(state: Arc<AppState>) -> Router {
    let ready = readiness(state.nats.clone(), state.fi_sockets.clone(), state.settings.nip_fi.mode);
    let max_body = state.settings.limits.max_message_length;
    Router::new()
        .route("/", get(root).post(crate::http::manage::rpc))
        .route("/api/members", post(put_member))
        .route("/api/members/{pubkey}", delete(remove_member))
        .route("/api/tokens", post(crate::http::tokens::issue))
        .with_state(state.clone())
        .merge(crate::http::chat::router(state.clone()))
        .merge(crate::http::query::router(state.clone()))
        .merge(crate::http::info::router(state))
        .merge(buzz_telemetry::probe_router(ready))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn(buzz_http_auth::contract_errors))
}

/// The admin listener's router: probes and `/metrics` (never on the public port).
pub fn admin_router(nats: buzz_bus::Bus, fi_sockets: Arc<FiSockets>, mode: buzz_fi::Mode) -> Router {
    buzz_telemetry::admin_router(readiness(nats, fi_sockets, mode))
}

/// `/readyz`: NATS is connected and, unless `BUZZ_NIP_FI_MODE=off` (where revalidation acts on
/// nothing), the NIP-FI revalidation listener is subscribed (`fi_sockets::supervise`).
pub fn readiness(
    nats: buzz_bus::Bus,
    fi_sockets: Arc<FiSockets>,
    mode: buzz_fi::Mode,
) -> impl Fn() -> std::future::Ready<bool> + Clone + Send + Sync + 'static {
    move || {
        let connected = nats.connection_state() == async_nats::connection::State::Connected;
        std::future::ready(connected && (mode == buzz_fi::Mode::Off || fi_sockets.listening()))
    }
}

async fn root(
    State(state): State<Arc<AppState>>,
    Tenant { host, community }: Tenant,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    // `Authorization: Bearer` on the upgrade: resolved before upgrading; invalid is 401, no socket.
    let initial = match crate::http::request::bearer(&headers) {
        Some(token) => Some(crate::http::request::resolve(&state, community.community_id, token).await?),
        None => None,
    };
    if let Ok(ws) = upgrade {
        let fi = crate::fi::admission::admit_upgrade(
            state.fi_gate(),
            &community,
            &host,
            &headers,
            initial.as_ref(),
        )?;
        let initial = initial.map(|a| buzz_bus::Actor { fi_admitted: fi.is_some(), ..a });
        let max = state.settings.limits.max_message_length;
        // Frames up to 4x the limit still arrive, so an oversized message gets a NOTICE and the
        // socket survives; beyond that the connection is dropped.
        let hard_cap = max.saturating_mul(4).max(1 << 20);
        // Each read fills (and first zeroes) this much buffer: the 128 KiB default cost a 128 KiB
        // memset per read, 7 % of the relay's CPU under load, and 128 KiB per idle socket. Larger
        // messages are read in several chunks.
        return Ok(ws
            .read_buffer_size(READ_BUFFER_BYTES)
            .max_message_size(hard_cap)
            .max_frame_size(hard_cap)
            .on_upgrade(move |socket| crate::ws::session::run(socket, state, community, host, initial, fi)));
    }
    let wants_nip11 = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/nostr+json"));
    if wants_nip11 {
        let mut res = Json(nip11(&state, &community.profile)).into_response();
        let h = res.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/nostr+json"));
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        return Ok(res);
    }
    Ok((StatusCode::OK, "buzz-relay: connect with a Nostr client over WebSocket\n").into_response())
}

/// The NIPs this relay serves, each checked against what it does (docs/design.md, "Supported
/// NIPs"): 1 (protocol), 9 (kind-5 deletion of one's own events), 11 (this document), 29
/// (channels as relay-based groups), 42 (AUTH), 45 (COUNT), 50 (`search`, no extensions), 86
/// (community management, the methods `supportedmethods` lists), 98 (HTTP auth). NIP-AR is listed
/// in `supported_extensions`; NIP-FI and NIP-OA have no number.
pub const SUPPORTED_NIPS: [u32; 9] = [1, 9, 11, 29, 42, 45, 50, 86, 98];

/// NIP-11 relay information document of a community's host: its own profile's name,
/// description and icon where the operator set them, else the relay's.
#[must_use]
pub fn nip11(state: &AppState, profile: &buzz_bus::CommunityProfile) -> serde_json::Value {
    let mut doc = serde_json::json!({
        "name": profile.name.as_deref().unwrap_or(&state.settings.relay_name),
        "description": profile.description.as_deref().unwrap_or("buzz-relay: a Nostr relay for team communities"),
        "pubkey": state.settings.relay_pubkey,
        "software": "buzz-relay",
        "version": env!("CARGO_PKG_VERSION"),
        "supported_nips": SUPPORTED_NIPS,
        "supported_extensions": ["nip-ar"],
        "limitation": state.settings.limits,
        "artifacts": artifacts_nip11(&state.settings.limits.artifacts),
    });
    if let Some(icon) = &profile.icon {
        doc["icon"] = serde_json::Value::String(icon.clone());
    }
    doc
}

/// NIP-11 `artifacts`: the NIP-AR kinds, the query forms and every enforced artifact query limit.
/// `snapshot`: the stable manifest transport, exactly the spec's table.
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
        "snapshot": buzz_bus::snapshot::nip11(),
    })
}

/// Member changes are not retried on another replica: they are not idempotent in their answer
/// (a retry after a stalled attempt that committed answers `not a member` for a removal that
/// happened, `200` for a grant that was new), see docs/design.md, "Stalls".
async fn write(state: &AppState, req: WriteRequest) -> Result<WriteOk, ApiError> {
    let reply: WriteReply =
        buzz_bus::rpc::request(&state.nats, state.subjects.write(), &req, state.settings.bus_timeout).await?;
    Ok(reply?)
}

/// A member's key from a request: 64 lowercase hex, else `400 invalid` (the answer the
/// write-service gave before the gateway parsed keys).
fn member_key(s: &str) -> Result<Pubkey, ApiError> {
    Pubkey::parse(s).map_err(|_| BusError::invalid(buzz_core::refusal::BAD_PUBKEY).into())
}

async fn put_member(
    State(state): State<Arc<AppState>>,
    Signed { community, actor, body }: Signed,
) -> Result<Response, ApiError> {
    let req = JsonObject::parse(&body, &["pubkey", "role"]).map_err(ApiError::invalid_body)?;
    let pubkey = member_key(req.string("pubkey").map_err(ApiError::invalid_body)?)?;
    let role = match req.opt_string("role").map_err(ApiError::invalid_body)? {
        None => Role::Member,
        Some(r) => {
            Role::parse(r).ok_or_else(|| ApiError::invalid_request(buzz_core::refusal::MEMBER_OR_ADMIN))?
        }
    };
    let ok = write(
        &state,
        WriteRequest::PutMember { community_id: community.community_id, actor, pubkey: pubkey.clone(), role },
    )
    .await?;
    let status = if ok.duplicate { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(serde_json::json!({ "pubkey": pubkey, "role": role.as_str() }))).into_response())
}

async fn remove_member(
    State(state): State<Arc<AppState>>,
    Path(pubkey): Path<String>,
    Signed { community, actor, .. }: Signed,
) -> Result<Response, ApiError> {
    let pubkey = member_key(&pubkey)?;
    write(
        &state,
        WriteRequest::RemoveMember { community_id: community.community_id, actor, pubkey: pubkey.clone() },
    )
    .await?;
    Ok((StatusCode::OK, Json(serde_json::json!({ "pubkey": pubkey, "removed": true }))).into_response())
}
