//! Tenant HTTP for the chat read model:
//!
//! - `GET /api/channels/{id}/summary` → `{channel_id, message_count, unread, mentions, replies, read_up_to}`
//! - `POST /api/channels/{id}/read` with `{"up_to": <event id>}` → `{channel_id, read_up_to, moved}`
//! - `GET /api/mentions?limit=n` (1–100, default 50) → `{mentions: [{event_id, channel_id, read, event}]}`
//!
//! Authenticated like every `/api` route through [`crate::http::extract::Signed`]; summaries and
//! mentions are answered by the query-service over `chat`, read markers by the write-service.
//! A missing channel and one the caller cannot read give the same 404.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::{get, post};
use axum::{Json, Router};
use buzz_bus::{ChatAnswer, ChatRequest, WriteData, WriteOk, WriteRequest};
use buzz_core::http_json::JsonObject;
use buzz_core::{ChannelId, EventId};
use buzz_http_auth::ApiError;

use crate::http::extract::Signed;
use crate::state::AppState;

const DEFAULT_MENTIONS: u32 = 50;
const MAX_MENTIONS: u32 = 100;

/// The chat read-model routes: channel summary, mark read, mentions.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/api/channels/{id}/summary", get(summary))
        .route("/api/channels/{id}/read", post(mark_read))
        .route("/api/mentions", get(mentions))
        .with_state(state)
}

fn bad_request(message: impl Into<String>) -> ApiError {
    ApiError::invalid_request(message)
}

/// A channel id as `h` carries it: a lowercase, hyphenated, non-nil UUID.
fn channel_id(raw: &str) -> Result<ChannelId, ApiError> {
    ChannelId::parse(raw).map_err(|_| bad_request("channel id must be a lowercase hyphenated non-nil UUID"))
}

async fn chat(state: &AppState, req: &ChatRequest) -> Result<Json<ChatAnswer>, ApiError> {
    let answer: ChatAnswer = buzz_bus::retry::request_retrying(
        &state.nats,
        state.subjects.chat(),
        req,
        state.settings.bus_retry(),
    )
    .await?;
    Ok(Json(answer))
}

async fn summary(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Signed { community, actor: reader, .. }: Signed,
) -> Result<Json<ChatAnswer>, ApiError> {
    let channel_id = channel_id(&id)?;
    let req = ChatRequest::Summary { community_id: community.community_id, reader, channel_id };
    chat(&state, &req).await
}

async fn mark_read(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Signed { community, actor, body }: Signed,
) -> Result<Json<serde_json::Value>, ApiError> {
    let channel_id = channel_id(&id)?;
    let req = JsonObject::parse(&body, &["up_to"]).map_err(ApiError::invalid_body)?;
    let up_to = EventId::parse(req.string("up_to").map_err(ApiError::invalid_body)?)
        .map_err(|_| bad_request("up_to must be a 64-char lowercase hex event id"))?;
    let write = WriteRequest::MarkRead { community_id: community.community_id, actor, channel_id, up_to };
    let ok: WriteOk = buzz_bus::retry::request_retrying(
        &state.nats,
        state.subjects.write(),
        &write,
        state.settings.bus_retry(),
    )
    .await?;
    let read_up_to = match ok.data {
        Some(WriteData::ReadMarker(m)) => Some(m.read_up_to),
        _ => None,
    };
    Ok(Json(
        serde_json::json!({ "channel_id": channel_id, "read_up_to": read_up_to, "moved": !ok.duplicate }),
    ))
}

/// `limit` is the only query parameter; anything else is refused rather than ignored.
fn mentions_limit(query: Option<&str>) -> Result<u32, ApiError> {
    let mut limit = None;
    for pair in query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name != "limit" {
            return Err(bad_request(format!("unknown query parameter: {}", name.escape_default())));
        }
        if limit.is_some() {
            return Err(bad_request("limit given more than once"));
        }
        let n = value
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_MENTIONS).contains(n))
            .ok_or_else(|| bad_request(format!("limit must be an integer from 1 to {MAX_MENTIONS}")))?;
        limit = Some(n);
    }
    Ok(limit.unwrap_or(DEFAULT_MENTIONS))
}

async fn mentions(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    Signed { community, actor: reader, .. }: Signed,
) -> Result<Json<ChatAnswer>, ApiError> {
    let limit = mentions_limit(uri.query())?;
    let req = ChatRequest::Mentions { community_id: community.community_id, reader, limit };
    chat(&state, &req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_limit_defaults_bounds_and_refuses_unknown_parameters() {
        assert_eq!(mentions_limit(None).ok(), Some(DEFAULT_MENTIONS));
        assert_eq!(mentions_limit(Some("limit=7")).ok(), Some(7));
        assert_eq!(mentions_limit(Some("limit=100")).ok(), Some(100));
        for bad in ["limit=0", "limit=101", "limit=x", "limit=", "since=1", "limit=1&limit=2"] {
            assert!(mentions_limit(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn channel_ids_are_strict_uuids() {
        assert!(channel_id("9b353519-f4fe-4757-aef4-bec6cc0ae54c").is_ok());
        for bad in ["x", "9B353519-F4FE-4757-AEF4-BEC6CC0AE54C", "00000000-0000-0000-0000-000000000000"] {
            assert!(channel_id(bad).is_err(), "{bad}");
        }
    }
}
