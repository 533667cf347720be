//! The community lifecycle routes: `PATCH /operator/communities/{id}` changes host and owner,
//! `DELETE /operator/communities/{id}` deletes the community (intent first, then its data, its
//! snapshot captures and charges, which the snapshot-service purges when asked over the bus,
//! then its row; a retry finishes an interrupted one).
//! Operator NIP-98 and `Cache-Control: no-store` like every operator route.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::patch;
use axum::{Json, Router};
use buzz_bus::retry::Retry;
use buzz_bus::snapshot::PurgeCaptures;
use buzz_bus::BusError;
use buzz_core::http_json::JsonObject;
use buzz_core::{CommunityId, Pubkey};

use crate::communities::lifecycle_store::{self as lstore, Change, ChangeError};
use crate::operator::{no_store, not_found, unavailable, ApiError, HasOperator, Operator, OperatorState};

/// What the lifecycle routes need: the operator surface and the bus to the snapshot-service.
pub struct LifecycleState {
    /// Operator authentication and the database pool.
    pub op: Arc<OperatorState>,
    /// The bus, to ask the snapshot-service to purge a deleted community's captures.
    pub bus: buzz_bus::Bus,
    /// `<p>.v1.snapshot.purge`.
    pub purge_subject: String,
}

/// A purge is hedged to another replica after `first` and given up after `total` (a replica
/// that took it acknowledges it, so a slow purge is waited for, not sent again).
const PURGE_RETRY: Retry = Retry { first: Duration::from_millis(500), total: Duration::from_secs(5) };

impl LifecycleState {
    /// Asks a snapshot-service replica to remove every capture and charge of `community`.
    async fn purge_captures(&self, community: CommunityId) -> Result<(), BusError> {
        let req = PurgeCaptures { community_id: community };
        buzz_bus::retry::request_retrying(&self.bus, self.purge_subject.clone(), &req, PURGE_RETRY).await
    }
}

impl HasOperator for Arc<LifecycleState> {
    fn operator(&self) -> &OperatorState {
        &self.op
    }
}

/// `PATCH` and `DELETE /operator/communities/{id}`.
pub fn router(state: Arc<LifecycleState>) -> Router {
    Router::new()
        .route("/operator/communities/{id}", patch(change_community).delete(delete_community))
        .with_state(state)
        .layer(axum::middleware::map_response(no_store))
}

fn community_id(raw: &str) -> Result<CommunityId, ApiError> {
    CommunityId::parse(raw)
        .map_err(|_| ApiError::invalid_request("the community id in the path must be a non-nil UUID"))
}

fn conflict(code: &'static str, message: &str) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, message)
}

/// `{host?, owner_pubkey?}`, at least one; validated like provisioning. Public for the fuzz
/// target `operator` (fuzz/).
#[doc(hidden)]
pub fn parse_change(body: &[u8]) -> Result<(Option<String>, Option<Pubkey>), ApiError> {
    let req = JsonObject::parse(body, &["host", "owner_pubkey"]).map_err(ApiError::invalid_body)?;
    let text = |name: &str| -> Result<Option<String>, ApiError> {
        match req.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| ApiError::invalid_body(format!("{name} must be a string"))),
        }
    };
    let host = text("host")?
        .map(|h| buzz_core::host::community_host(&h).map_err(|e| ApiError::invalid_request(e.to_string())))
        .transpose()?;
    let owner = text("owner_pubkey")?
        .map(|o| {
            Pubkey::parse(&o).map_err(|_| ApiError::invalid_request("owner_pubkey must be 64 lowercase hex"))
        })
        .transpose()?;
    if host.is_none() && owner.is_none() {
        return Err(ApiError::invalid_body("the body must name host, owner_pubkey or both".into()));
    }
    Ok((host, owner))
}

async fn change_community(
    State(state): State<Arc<LifecycleState>>,
    Path(raw): Path<String>,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let id = community_id(&raw)?;
    let (host, owner) = parse_change(&body)?;
    let change = Change { host: host.as_deref(), owner: owner.as_ref() };
    match lstore::change(&state.op.pool, id, &change).await {
        Ok(c) => {
            tracing::info!(%operator, community_id = %id, host = %c.host, owner = %c.owner_pubkey, "community changed");
            Ok(Json(c).into_response())
        }
        Err(ChangeError::NotFound) => Err(not_found("community not found")),
        Err(ChangeError::Lifecycle) => Err(conflict("lifecycle_conflict", "the community is being deleted")),
        Err(ChangeError::HostConflict) => {
            Err(conflict("host_conflict", "host is bound to another community"))
        }
        Err(ChangeError::Sql(e)) => Err(unavailable(e)),
    }
}

async fn delete_community(
    State(state): State<Arc<LifecycleState>>,
    Path(raw): Path<String>,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let id = community_id(&raw)?;
    if !body.is_empty() {
        return Err(ApiError::invalid_body("DELETE takes no body".into()));
    }
    let pool = &state.op.pool;
    let host = lstore::mark_deleting(pool, id).await.map_err(unavailable)?;
    let Some(host) = host else { return Err(not_found("community not found")) };
    tracing::info!(%operator, community_id = %id, %host, "community deletion recorded");
    lstore::remove_data(pool, id).await.map_err(unavailable)?;
    // The captures belong to the snapshot-service: it is asked over the bus. When no replica
    // purges them (its Redis failed; none runs; or, mid rolling upgrade, where the chart rolls
    // policy before snapshot, only replicas that predate the purge subject), the deletion stops
    // here like any failed step: 503, the row stays `deleting` (no lease, no host; the
    // snapshot-service serves no capture of a community that is not active) and a retry
    // finishes it. A 200 thus always means the captures are gone too.
    state.purge_captures(id).await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "authorization_unavailable",
            "snapshot store unavailable",
        )
        .with_cause(e)
    })?;
    lstore::remove_row(pool, id).await.map_err(unavailable)?;
    tracing::info!(%operator, community_id = %id, %host, "community deleted");
    Ok(Json(serde_json::json!({"community_id": id, "host": host, "deleted": true})).into_response())
}
