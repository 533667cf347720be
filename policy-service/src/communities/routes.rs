//! The operator community routes: `POST`, `GET` and `PATCH /operator/communities` (create, read,
//! update), NIP-98 signed by an allowlisted key (`crate::operator`).

use std::sync::Arc;

use axum::extract::{OriginalUri, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use buzz_core::http_json::JsonObject;
use buzz_core::{CommunityId, Pubkey};

use crate::communities::store::{self, CreateError, NewCommunity};
use crate::operator::{no_store, not_found, unavailable, ApiError, Operator, OperatorState};

/// Longest revision-history retention in days (100 years); `null` keeps history forever.
pub const MAX_RETENTION_DAYS: u64 = 36_500;

/// The operator community routes (create, read, update).
pub fn router(state: Arc<OperatorState>) -> Router {
    Router::new()
        .route("/operator/communities", post(create_community).get(get_community).patch(update_community))
        .with_state(state)
        .layer(axum::middleware::map_response(no_store))
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
