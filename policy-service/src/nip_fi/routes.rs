//! The NIP-FI operator routes: `nip-fi-policy` (enable/disable and readback), `nip-fi-bindings`
//! and the legacy enable-only `nip-fi-upgrade`. Operator NIP-98 like every operator route;
//! `Cache-Control: no-store` on every answer.

use std::sync::Arc;

use axum::extract::{OriginalUri, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use buzz_core::Pubkey;
use buzz_fi::{FiSettings, Registry, TrustError};

use crate::nip_fi::accept::{self, AcceptError, Accepted};
use crate::nip_fi::request::{self, PolicyRequest, ReadForm};
use crate::nip_fi::store::{self, Receipt};
use crate::nip_fi::view;
use crate::operator::{
    not_found, unavailable as store_unavailable, ApiError, HasOperator, Operator, OperatorState,
};

/// What the NIP-FI operator routes share.
pub struct FiState {
    /// The operator API's pool, replay guard and allowlist.
    pub op: Arc<OperatorState>,
    /// The policy-service's NIP-FI settings.
    pub settings: FiSettings,
    /// The issuer trust registry.
    pub registry: Arc<Registry>,
}

impl HasOperator for Arc<FiState> {
    fn operator(&self) -> &OperatorState {
        &self.op
    }
}

/// The NIP-FI operator routes: policy, bindings and the legacy upgrade.
pub fn router(state: Arc<FiState>) -> Router {
    Router::new()
        .route("/operator/communities/nip-fi-policy", post(post_policy).get(get_policy))
        .route("/operator/communities/nip-fi-upgrade", post(post_legacy).get(get_legacy))
        .route("/operator/communities/nip-fi-bindings", post(post_binding).delete(delete_binding))
        .with_state(state)
        .layer(axum::middleware::map_response(crate::operator::no_store))
}

fn conflict(code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, message)
}

fn unavailable(message: &str) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "authorization_unavailable", message)
}

async fn post_policy(
    State(state): State<Arc<FiState>>,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let req = request::parse_general(&body).map_err(ApiError::invalid_body)?;
    mutate(&state, &req, &operator).await
}

async fn post_legacy(
    State(state): State<Arc<FiState>>,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let req = request::parse_legacy(&body).map_err(ApiError::invalid_body)?;
    mutate(&state, &req, &operator).await
}

/// Replay first (before any mutable preflight, gate included), then the gate, issuer trust, and
/// the accepting transaction.
async fn mutate(state: &FiState, req: &PolicyRequest, operator: &Pubkey) -> Result<Response, ApiError> {
    let pool = &state.op.pool;
    if let Some(r) = store::receipt(pool, req.operation_id).await.map_err(store_unavailable)? {
        let replay = accept::replay_or_conflict(r, req, operator).map_err(accept_error)?;
        return answer(state, replay).await;
    }
    if !state.settings.upgrades_enabled {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "upgrades_disabled",
            "nip-fi policy mutations are disabled (BUZZ_NIP_FI_UPGRADES_ENABLED=false)",
        ));
    }
    if let Some(issuer) = &req.expected_issuer {
        check_issuer(state, issuer)?;
    }
    let accepted = accept::accept(pool, req, operator).await.map_err(accept_error)?;
    if let Accepted::New(r) = &accepted {
        tracing::info!(
            %operator, operation_id = %r.operation_id, community_id = %r.community_id,
            requires_nip_fi = r.desired_requires_nip_fi, generation = r.accepted_policy_generation,
            "nip-fi policy accepted"
        );
    }
    answer(state, accepted).await
}

/// Enable needs the one provision-binding issuer with a usable registry policy.
fn check_issuer(state: &FiState, issuer: &str) -> Result<(), ApiError> {
    if state.settings.provision_binding.as_deref() != Some(issuer) {
        return Err(conflict("issuer_conflict", "expected_issuer is not the deployment's provision binding"));
    }
    match state.registry.keys(issuer) {
        Ok(_) => Ok(()),
        Err(TrustError::Unknown) => {
            Err(conflict("issuer_conflict", "expected_issuer has no registry policy"))
        }
        Err(TrustError::Unavailable) => Err(unavailable("issuer trust is unavailable")),
    }
}

fn accept_error(e: AcceptError) -> ApiError {
    match e {
        AcceptError::NotFound => not_found("community not found"),
        AcceptError::Conflict(code, message) => conflict(code, message),
        AcceptError::Exhausted => {
            conflict("policy_generation_exhausted", "the policy generation cannot advance")
        }
        AcceptError::Idempotency => conflict(
            "idempotency_conflict",
            "operation_id was already used for a different request; use a new operation_id",
        ),
        AcceptError::Sql(e) => store_unavailable(e),
    }
}

async fn answer(state: &FiState, accepted: Accepted) -> Result<Response, ApiError> {
    let (status, r) = match accepted {
        Accepted::New(r) => (StatusCode::CREATED, r),
        Accepted::Replay(r) => (StatusCode::OK, r),
    };
    Ok((status, Json(receipt_body(state, &r).await?)).into_response())
}

async fn receipt_body(state: &FiState, r: &Receipt) -> Result<serde_json::Value, ApiError> {
    let pool = &state.op.pool;
    let current = store::current(pool, r.community_id).await.map_err(store_unavailable)?;
    let trust = match (&r.expected_issuer, r.desired_requires_nip_fi) {
        (Some(issuer), true) => {
            state.registry.keys(issuer).is_ok()
                && crate::nip_fi::bindings::exists(pool, r.community_id, issuer)
                    .await
                    .map_err(store_unavailable)?
        }
        _ => true,
    };
    Ok(view::receipt_body(r, current.as_ref(), trust, state.settings.mode))
}

async fn get_policy(
    State(state): State<Arc<FiState>>,
    uri: OriginalUri,
    Operator { pubkey: operator, .. }: Operator,
) -> Result<Response, ApiError> {
    match request::parse_read(uri.0.query()).map_err(ApiError::invalid_request)? {
        ReadForm::Operation(id) => read_receipt(&state, id, &operator, false).await,
        ReadForm::Current { community_id, expected_host } => {
            let pool = &state.op.pool;
            let cur = store::current(pool, community_id)
                .await
                .map_err(store_unavailable)?
                .ok_or_else(|| not_found("community not found"))?;
            if cur.host != expected_host {
                return Err(conflict("host_conflict", "expected_host is not the community's host"));
            }
            let bindings = store::bindings(pool, community_id).await.map_err(store_unavailable)?;
            let body =
                view::current_body(&cur, &bindings, state.settings.mode, state.settings.upgrades_enabled);
            Ok(Json(body).into_response())
        }
    }
}

/// Only the originating operator's receipt; the legacy route also hides general receipts.
async fn read_receipt(
    state: &FiState,
    id: uuid::Uuid,
    operator: &Pubkey,
    legacy: bool,
) -> Result<Response, ApiError> {
    let r = store::receipt(&state.op.pool, id).await.map_err(store_unavailable)?;
    match r {
        Some(r) if r.operator_pubkey == *operator && (!legacy || r.is_legacy()) => {
            Ok(Json(receipt_body(state, &r).await?).into_response())
        }
        _ => Err(not_found("operation not found")),
    }
}

async fn get_legacy(
    State(state): State<Arc<FiState>>,
    uri: OriginalUri,
    Operator { pubkey: operator, .. }: Operator,
) -> Result<Response, ApiError> {
    match request::parse_read(uri.0.query()).map_err(ApiError::invalid_request)? {
        ReadForm::Operation(id) => read_receipt(&state, id, &operator, true).await,
        ReadForm::Current { .. } => {
            Err(ApiError::invalid_request("the legacy route reads only by operation_id"))
        }
    }
}

async fn post_binding(
    State(state): State<Arc<FiState>>,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let (community_id, issuer) = binding_body(&body)?;
    match crate::nip_fi::bindings::bind(&state.op.pool, community_id, &issuer).await {
        Ok(created) => {
            tracing::info!(%operator, %community_id, %issuer, created, "nip-fi binding added");
            let status = if created { StatusCode::CREATED } else { StatusCode::OK };
            let body = serde_json::json!({ "community_id": community_id, "issuer": issuer, "bound": true });
            Ok((status, Json(body)).into_response())
        }
        Err(e) => Err(binding_error(e)),
    }
}

async fn delete_binding(
    State(state): State<Arc<FiState>>,
    Operator { pubkey: operator, body }: Operator,
) -> Result<Response, ApiError> {
    let (community_id, issuer) = binding_body(&body)?;
    match crate::nip_fi::bindings::unbind(&state.op.pool, community_id, &issuer).await {
        Ok(()) => {
            tracing::info!(%operator, %community_id, %issuer, "nip-fi binding removed");
            let body = serde_json::json!({ "community_id": community_id, "issuer": issuer, "bound": false });
            Ok(Json(body).into_response())
        }
        Err(e) => Err(binding_error(e)),
    }
}

/// `{community_id, issuer}` of a binding request. Public for the fuzz target `operator` (fuzz/).
#[doc(hidden)]
pub fn binding_body(body: &[u8]) -> Result<(buzz_core::CommunityId, String), ApiError> {
    let req = buzz_core::http_json::JsonObject::parse(body, &["community_id", "issuer"])
        .map_err(ApiError::invalid_body)?;
    let community_id = req
        .string("community_id")
        .and_then(|c| request::community_field("community_id", c))
        .map_err(ApiError::invalid_body)?;
    let issuer = req
        .string("issuer")
        .and_then(|i| request::issuer_field("issuer", i))
        .map_err(ApiError::invalid_body)?;
    Ok((community_id, issuer))
}

fn binding_error(e: crate::nip_fi::bindings::BindingError) -> ApiError {
    use crate::nip_fi::bindings::BindingError as B;
    match e {
        B::CommunityNotFound => not_found("community not found"),
        B::BindingNotFound => not_found("binding not found"),
        B::Lifecycle => conflict("lifecycle_conflict", "the community is not active"),
        B::Held => conflict("issuer_conflict", "the current enable holds this binding; disable first"),
        B::Sql(e) => store_unavailable(e),
    }
}
