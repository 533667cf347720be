//! `POST /query` (contract "Messages and errors"): a NIP-98 signed (or bearer) artifact query over
//! HTTP. The body is a JSON array of exactly one filter, `{"artifact":"current"|"history", ...}`,
//! answered with a JSON array of events in the query's order; `POST /query?count=1` answers
//! `{"count":n}` with the same access and matching. The query runs in the query-service over the
//! bus exactly as a WebSocket REQ/COUNT does (same frames, same checks).

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use buzz_bus::QueryRequest;
use buzz_core::Filter;
use tokio::sync::mpsc;

use buzz_http_auth::ApiError;

use crate::http::extract::Signed;
use crate::state::AppState;
use crate::ws::query::{self, Answered, QueryBus, QueryUpdate, Ticket};

/// The `POST /query` route.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new().route("/query", post(handle)).with_state(state)
}

fn bad(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code, message)
}

/// What the body asks: an artifact query, or a snapshot action (`crate::http::snapshot`).
enum Parsed {
    Query(Filter),
    Snapshot(serde_json::Value),
}

/// The one filter of the body, checked like a REQ filter. A malformed body that names a snapshot
/// action (one filter object with `"artifact": "snapshot"`, alone, among others, or not in an
/// array) is the spec's `400 snapshot_invalid` ("Each request contains one filter"); a body that
/// is not JSON names no action and keeps the generic `400 invalid` (design.md, "Malformed
/// snapshot bodies").
fn parse_body(state: &AppState, body: &[u8]) -> Result<Parsed, ApiError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| bad("invalid", "invalid: body is not JSON"))?;
    let names_snapshot = match &value {
        serde_json::Value::Array(filters) => filters.iter().any(crate::http::snapshot::is_snapshot),
        other => crate::http::snapshot::is_snapshot(other),
    };
    let one_filter = value.as_array().and_then(|f| if let [one] = f.as_slice() { Some(one) } else { None });
    let Some(one) = one_filter else {
        if names_snapshot {
            return Err(crate::http::snapshot::error(buzz_bus::snapshot::SnapshotCode::SnapshotInvalid));
        }
        return Err(bad("invalid", "invalid: body must be a JSON array of exactly one filter"));
    };
    if crate::http::snapshot::is_snapshot(one) {
        return Ok(Parsed::Snapshot(one.clone()));
    }
    let filter = Filter::from_value(one).map_err(|e| filter_error(&e))?;
    if filter.artifact.is_none() {
        return Err(bad(
            "unsupported",
            "unsupported: POST /query takes an artifact query (\"artifact\":\"current\" or \"history\")",
        ));
    }
    filter.validate(&state.settings.limits).map_err(|e| filter_error(&e))?;
    Ok(Parsed::Query(filter))
}

fn filter_error(e: &buzz_core::FilterError) -> ApiError {
    let code = match e {
        buzz_core::FilterError::Invalid(_) => "invalid",
        buzz_core::FilterError::Unsupported(_) => "unsupported",
    };
    bad(code, e.to_string())
}

async fn handle(
    State(state): State<Arc<AppState>>,
    RawQuery(raw): RawQuery,
    Signed { community, actor, body }: Signed,
) -> Result<Response, ApiError> {
    let count = match raw.as_deref() {
        None | Some("") => false,
        Some("count=1") => true,
        Some(_) => return Err(bad("invalid", "invalid: the only query parameter is count=1")),
    };
    // Bodies over `max_message_length` never get here: the router answers 413 `too_large`.
    let parsed = parse_body(&state, &body)?;
    // The same membership check as a WebSocket AUTH: only community members (and their agents) query.
    if !state.access.member(community.community_id, actor.member_key()).await? {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "restricted",
            format!("restricted: {}", buzz_core::refusal::NOT_COMMUNITY_MEMBER),
        ));
    }
    let filter = match parsed {
        Parsed::Query(filter) => filter,
        Parsed::Snapshot(one) => {
            return crate::http::snapshot::forward(&state, community.community_id, actor, one, count).await
        }
    };
    let answered = run_query(&state, community.community_id, actor, filter, count).await?;
    let events = match answered {
        (Answered::Count(n), _) => return Ok(Json(serde_json::json!({ "count": n })).into_response()),
        (Answered::End, _) if count => return Ok(Json(serde_json::json!({ "count": 0 })).into_response()),
        (Answered::End, events) => events,
    };
    // Events are the stored JSON as is: joined, never re-serialised.
    let mut body = String::with_capacity(events.iter().map(|e| e.len() + 1).sum::<usize>() + 2);
    body.push('[');
    body.push_str(&events.join(","));
    body.push(']');
    let mut res = (StatusCode::OK, body).into_response();
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

/// Runs one query for this request under the key's query slots; its answer and the events of a
/// page. The query runs in the request: a client that leaves drops it, which cancels the query.
async fn run_query(
    state: &Arc<AppState>,
    community_id: buzz_core::CommunityId,
    actor: buzz_bus::Actor,
    filter: Filter,
    count: bool,
) -> Result<(Answered, Vec<String>), ApiError> {
    let ticket = if count { Ticket::Count { serial: 0 } } else { Ticket::Page { generation: 1 } };
    let req = QueryRequest {
        community_id,
        reader: actor,
        filters: vec![filter],
        kind: ticket.kind(),
        query_id: None,
    };
    let (tx, mut rx) = mpsc::channel(16);
    let key_slots = state.key_slots.of(&req.reader.pubkey, state.settings.max_inflight_queries_per_key);
    let Ok(_key) = key_slots.acquire_owned().await else {
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the gateway is stopping"));
    };
    let collect = async move {
        let mut events: Vec<String> = Vec::new();
        while let Some(update) = rx.recv().await {
            match update {
                QueryUpdate::Events { events: batch, .. } => events.extend(batch),
                QueryUpdate::Done { result, .. } => return (events, Some(result)),
            }
        }
        (events, None)
    };
    let ((), (events, outcome)) =
        tokio::join!(query::run(QueryBus::of(state), req, String::new(), ticket, tx), collect);
    let result = outcome.ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the query answer was interrupted")
    })?;
    let answered = result.map_err(|e| {
        let nip01 = e.nip01();
        let mut err = ApiError::from(e);
        err.message = nip01;
        err
    })?;
    Ok((answered, events))
}
