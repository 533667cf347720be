//! The operator HTTP API: NIP-98 signed by an allowlisted key, bound to the configured origin.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, OriginalUri, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use buzz_core::http_json::JsonObject;
use buzz_core::{CommunityId, Pubkey};
use buzz_http_auth::ReplayGuard;
pub use buzz_http_auth::{contract_errors, ApiError};

use crate::store::{self, CreateError, NewCommunity};

/// Largest operator request body; every operator body is a few hundred bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest revision-history retention in days (100 years); `null` keeps history forever.
pub const MAX_RETENTION_DAYS: u64 = 36_500;

/// What the operator routes share.
pub struct OperatorState {
    /// The database.
    pub pool: sqlx::PgPool,
    /// NIP-98 replay protection (Redis).
    pub guard: ReplayGuard,
    /// The operator keys allowed to sign requests.
    pub operator_pubkeys: Vec<Pubkey>,
    /// The configured origin a NIP-98 `u` tag must name.
    pub origin: String,
}

/// The operator community routes (create, read, update).
pub fn router(state: Arc<OperatorState>) -> Router {
    Router::new()
        .route("/operator/communities", post(create_community).get(get_community).patch(update_community))
        .with_state(state)
        .layer(axum::middleware::map_response(no_store))
}

pub(crate) async fn no_store(mut res: Response) -> Response {
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// The operator surface's answers for a store failure: 503, the cause to the log.
pub(crate) fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "authorization_unavailable",
        "authoritative store unavailable",
    )
    .with_cause(e)
}

/// 404 `not_found` with `message`.
#[must_use]
pub fn not_found(message: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
}

/// An operator request, authorised once before its handler runs: the allowlisted key that signed
/// it (NIP-98 over method, full URL with query, and body) and the body the signature covers.
/// It takes the body, so it is a handler's last argument; any router state that holds the
/// operator surface ([`HasOperator`]) serves it. Refusals are the contract's JSON: the
/// body's own rejection (e.g. `413 too_large`, through `contract_errors`), then `authorize`'s.
pub struct Operator {
    /// The operator's key.
    pub pubkey: Pubkey,
    /// The request body. A GET's is never read: its signature covers no body (as it always has).
    pub body: Bytes,
}

/// A router state that holds the operator surface (the routes' own state around it).
pub trait HasOperator {
    /// The operator surface: allowlist, origin and replay guard.
    fn operator(&self) -> &OperatorState;
}

impl HasOperator for Arc<OperatorState> {
    fn operator(&self) -> &OperatorState {
        self
    }
}

impl<S: HasOperator + Send + Sync> FromRequest<S> for Operator {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = req.into_parts();
        let Ok(uri) = OriginalUri::from_request_parts(&mut parts, state).await;
        let body = if parts.method == Method::GET {
            Bytes::new()
        } else {
            Bytes::from_request(Request::from_parts(parts.clone(), body), state)
                .await
                .map_err(IntoResponse::into_response)?
        };
        let pubkey = authorize(state.operator(), &parts.method, &uri, &parts.headers, &body)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self { pubkey, body })
    }
}

/// Verifies the operator signature over method, full URL (with query) and body.
async fn authorize(
    state: &OperatorState,
    method: &Method,
    uri: &OriginalUri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Pubkey, ApiError> {
    let path_and_query = uri.0.path_and_query().map_or("/", |pq| pq.as_str());
    let url = format!("{}{path_and_query}", state.origin);
    let pubkey = buzz_http_auth::authenticate(headers, method.as_str(), &[url], body, &state.guard).await?;
    if !state.operator_pubkeys.contains(&pubkey) {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", "not an operator key"));
    }
    Ok(pubkey)
}

/// `retention_days` as the operator API takes it: `null` (keep revision history forever) or whole
/// days from 1 to [`MAX_RETENTION_DAYS`].
fn retention_days(value: &serde_json::Value) -> Result<Option<i32>, ApiError> {
    if value.is_null() {
        return Ok(None);
    }
    value
        .as_u64()
        .filter(|d| (1..=MAX_RETENTION_DAYS).contains(d))
        .and_then(|d| i32::try_from(d).ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::invalid_body(format!(
                "retention_days must be null (keep forever) or an integer from 1 to {MAX_RETENTION_DAYS}"
            ))
        })
}

/// The one query parameter of the community routes: `community_id`, a non-nil UUID. Public for
/// the fuzz target `operator` (fuzz/).
#[doc(hidden)]
pub fn community_param(uri: &OriginalUri) -> Result<CommunityId, ApiError> {
    let mut id = None;
    for pair in uri.0.query().unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if name != "community_id" {
            let shown: String = name.chars().take(64).collect();
            return Err(ApiError::invalid_request(format!(
                "unknown query parameter {}",
                shown.escape_default()
            )));
        }
        if id.is_some() {
            return Err(ApiError::invalid_request("community_id given more than once"));
        }
        let parsed = CommunityId::parse(value).map_err(|_| {
            ApiError::invalid_request("community_id must be a non-nil lowercase hyphenated UUID")
        })?;
        id = Some(parsed);
    }
    id.ok_or_else(|| ApiError::invalid_request("the query parameter community_id is required"))
}

/// The body of `POST /operator/communities`, validated.
#[doc(hidden)]
#[derive(Debug)]
pub struct CreateBody {
    /// The community to provision (non-nil).
    pub community_id: CommunityId,
    /// Its host, as [`buzz_core::host::community_host`] canonicalises it.
    pub host: String,
    /// Its owner.
    pub owner: Pubkey,
    /// Absent, `Some(None)` (keep revision history forever) or days.
    pub retention_days: Option<Option<i32>>,
}

/// Reads the body of `POST /operator/communities`. Public for the fuzz target `operator` (fuzz/).
#[doc(hidden)]
pub fn parse_create(body: &[u8]) -> Result<CreateBody, ApiError> {
    let fields = ["community_id", "host", "owner_pubkey", "retention_days"];
    let req = JsonObject::parse(body, &fields).map_err(ApiError::invalid_body)?;
    let community_id = CommunityId::parse(req.string("community_id").map_err(ApiError::invalid_body)?)
        .map_err(|_| ApiError::invalid_request("community_id must be a non-nil lowercase hyphenated UUID"))?;
    let host = buzz_core::host::community_host(req.string("host").map_err(ApiError::invalid_body)?)
        .map_err(|e| ApiError::invalid_request(e.to_string()))?;
    let owner = Pubkey::parse(req.string("owner_pubkey").map_err(ApiError::invalid_body)?)
        .map_err(|_| ApiError::invalid_request("owner_pubkey must be 64 lowercase hex"))?;
    let retention = req.get("retention_days").map(retention_days).transpose()?;
    Ok(CreateBody { community_id, host, owner, retention_days: retention })
}

async fn create_community(
    State(state): State<Arc<OperatorState>>,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let req = parse_create(&body)?;
    let new = NewCommunity {
        id: req.community_id,
        host: &req.host,
        owner: &req.owner,
        retention_days: req.retention_days,
    };
    match store::create(&state.pool, &new).await {
        Ok((c, created)) => {
            tracing::info!(%operator, community_id = %c.community_id, host = %c.host, created, "community provisioned");
            let status = if created { StatusCode::CREATED } else { StatusCode::OK };
            Ok((status, Json(c)).into_response())
        }
        Err(CreateError::CommunityConflict) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "community_conflict",
            "community_id already exists with another host, owner or retention",
        )),
        Err(CreateError::HostConflict) => {
            Err(ApiError::new(StatusCode::CONFLICT, "host_conflict", "host is bound to another community"))
        }
        Err(CreateError::Sql(e)) => Err(unavailable(e)),
    }
}

async fn get_community(
    State(state): State<Arc<OperatorState>>,
    uri: OriginalUri,
    _: Operator,
) -> Result<Response, ApiError> {
    let id = community_param(&uri)?;
    match store::get(&state.pool, id).await {
        Ok(Some(c)) => Ok(Json(c).into_response()),
        Ok(None) => Err(not_found("community not found")),
        Err(e) => Err(unavailable(e)),
    }
}

/// `PATCH /operator/communities?community_id=<id>` with any of `retention_days` (n | null),
/// `name`, `description`, `icon` (string | null: the community's host's own NIP-11 profile; null
/// serves the relay's default): changes the named settings and answers the community. Naming a
/// profile field before the 0.2.0 migration has run answers 503 `schema_pending`.
async fn update_community(
    State(state): State<Arc<OperatorState>>,
    uri: OriginalUri,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let id = community_param(&uri)?;
    let changes = parse_update(&body)?;
    match store::update(&state.pool, id, &changes).await {
        Ok(Some(c)) => {
            tracing::info!(%operator, community_id = %id, ?changes, "community settings changed");
            Ok(Json(c).into_response())
        }
        Ok(None) => Err(not_found("community not found")),
        Err(store::UpdateError::SchemaPending) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "schema_pending",
            store::UpdateError::SchemaPending.to_string(),
        )),
        Err(store::UpdateError::Sql(e)) => Err(unavailable(e)),
    }
}

/// The body of `PATCH /operator/communities`: at least one of `retention_days`, `name`,
/// `description`, `icon`. Public for the fuzz target `operator` (fuzz/).
#[doc(hidden)]
pub fn parse_update(body: &[u8]) -> Result<store::Changes, ApiError> {
    let req = JsonObject::parse(body, &["retention_days", "name", "description", "icon"])
        .map_err(ApiError::invalid_body)?;
    let changes = store::Changes {
        retention_days: req.get("retention_days").map(retention_days).transpose()?,
        name: profile_field(&req, "name", 64, false)?,
        description: profile_field(&req, "description", 1024, false)?,
        icon: profile_field(&req, "icon", 2048, true)?,
    };
    if changes.retention_days.is_none() && !changes.names_profile() {
        return Err(ApiError::invalid_body(
            "name at least one of retention_days, name, description, icon".into(),
        ));
    }
    Ok(changes)
}

/// A profile field of a PATCH: absent (`None`), `null` (`Some(None)`: cleared) or a string of 1
/// to `max` characters without control characters (`url`: an http(s) URL).
fn profile_field(
    req: &JsonObject,
    field: &str,
    max: usize,
    url: bool,
) -> Result<Option<Option<String>>, ApiError> {
    let Some(value) = req.get(field) else { return Ok(None) };
    if value.is_null() {
        return Ok(Some(None));
    }
    let text =
        value.as_str().ok_or_else(|| ApiError::invalid_body(format!("{field} must be a string or null")))?;
    let chars = text.chars().count();
    if chars == 0 || chars > max || text.chars().any(char::is_control) {
        return Err(ApiError::invalid_body(format!(
            "{field} must have 1 to {max} characters and no control characters"
        )));
    }
    if url && !(text.starts_with("https://") || text.starts_with("http://")) {
        return Err(ApiError::invalid_body(format!("{field} must be an http:// or https:// URL")));
    }
    Ok(Some(Some(text.to_owned())))
}
