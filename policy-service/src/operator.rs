//! The operator HTTP API: NIP-98 signed by an allowlisted key, bound to the configured origin.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{OriginalUri, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use buzz_http_auth::{HttpAuthError, ReplayGuard};
use serde::Deserialize;
use uuid::Uuid;

use crate::store::{self, CreateError};

pub struct OperatorState {
    pub pool: sqlx::PgPool,
    pub guard: ReplayGuard,
    pub operator_pubkeys: Vec<String>,
    pub origin: String,
}

pub fn router(state: Arc<OperatorState>) -> Router {
    Router::new()
        .route("/operator/communities", post(create_community).get(get_community))
        .with_state(state)
        .layer(axum::middleware::map_response(no_store))
}

async fn no_store(mut res: Response) -> Response {
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// One error type for the operator surface: a safe message and a stable code.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }
    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
    fn internal(e: &dyn std::error::Error) -> Self {
        tracing::error!(error = %e, "operator request failed");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "authorization_unavailable",
            "authoritative store unavailable",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(serde_json::json!({ "error": self.message, "code": self.code }))).into_response()
    }
}

impl From<HttpAuthError> for ApiError {
    fn from(e: HttpAuthError) -> Self {
        let status = e.status();
        Self::new(status, e.code(), e.to_string())
    }
}

/// Verifies the operator signature over method, full URL (with query) and body.
async fn authorize(
    state: &OperatorState,
    method: &Method,
    uri: &OriginalUri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<String, ApiError> {
    let path_and_query = uri.0.path_and_query().map_or("/", |pq| pq.as_str());
    let url = format!("{}{path_and_query}", state.origin);
    let pubkey = buzz_http_auth::authenticate(headers, method.as_str(), &[url], body, &state.guard).await?;
    if !state.operator_pubkeys.contains(&pubkey) {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", "not an operator key"));
    }
    Ok(pubkey)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateCommunity {
    community_id: Uuid,
    host: String,
    owner_pubkey: String,
}

async fn create_community(
    State(state): State<Arc<OperatorState>>,
    method: Method,
    uri: OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let operator = authorize(&state, &method, &uri, &headers, &body).await?;
    let req: CreateCommunity =
        serde_json::from_slice(&body).map_err(|e| ApiError::invalid(format!("invalid body: {e}")))?;
    if req.community_id.is_nil() {
        return Err(ApiError::invalid("community_id must be a non-nil UUID"));
    }
    let host = buzz_core::host::normalize_host(&req.host)
        .ok_or_else(|| ApiError::invalid("host is not a valid host"))?;
    if !buzz_core::is_lower_hex(&req.owner_pubkey, 64) {
        return Err(ApiError::invalid("owner_pubkey must be 64 lowercase hex"));
    }
    match store::create(&state.pool, req.community_id, &host, &req.owner_pubkey).await {
        Ok((c, created)) => {
            tracing::info!(%operator, community_id = %c.community_id, host = %c.host, created, "community provisioned");
            let status = if created { StatusCode::CREATED } else { StatusCode::OK };
            Ok((status, Json(c)).into_response())
        }
        Err(CreateError::CommunityConflict) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "community_conflict",
            "community_id already exists with another host or owner",
        )),
        Err(CreateError::HostConflict) => {
            Err(ApiError::new(StatusCode::CONFLICT, "host_conflict", "host is bound to another community"))
        }
        Err(CreateError::Sql(e)) => Err(ApiError::internal(&e)),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GetCommunity {
    community_id: String,
}

async fn get_community(
    State(state): State<Arc<OperatorState>>,
    method: Method,
    uri: OriginalUri,
    headers: HeaderMap,
    query: Result<Query<GetCommunity>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    authorize(&state, &method, &uri, &headers, &[]).await?;
    let Query(q) = query.map_err(|e| ApiError::invalid(format!("invalid query: {e}")))?;
    let id = Uuid::parse_str(&q.community_id)
        .ok()
        .filter(|u| !u.is_nil())
        .ok_or_else(|| ApiError::invalid("community_id must be a non-nil UUID"))?;
    match store::get(&state.pool, id).await {
        Ok(Some(c)) => Ok(Json(c).into_response()),
        Ok(None) => Err(ApiError::new(StatusCode::NOT_FOUND, "not_found", "community not found")),
        Err(e) => Err(ApiError::internal(&e)),
    }
}
