//! `GET /info`: the community of this host and its effective NIP-FI requirement, nothing about
//! receipts or issuers.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use buzz_fi::Mode;

use crate::http::request::community_for;
use crate::state::AppState;
use buzz_http_auth::ApiError;

/// The `GET /info` route.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new().route("/info", get(info)).with_state(state)
}

async fn info(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Result<Response, ApiError> {
    let (host, community) = community_for(&state, &headers).await?;
    let mode = state.settings.nip_fi.mode;
    // `off` answers false without consulting the stored flag.
    let required = mode != Mode::Off && mode.effective_required(community.requires_nip_fi);
    let body = serde_json::json!({
        "community_id": community.community_id,
        "host": host,
        "requires_nip_fi": required,
    });
    Ok((StatusCode::OK, Json(body)).into_response())
}
