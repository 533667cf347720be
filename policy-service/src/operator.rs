//! The operator HTTP API: NIP-98 signed by an allowlisted key, bound to the configured origin.
//! What every operator route shares: its state, the [`Operator`] extractor and the answers of
//! the whole surface.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, OriginalUri, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use buzz_core::Pubkey;
use buzz_http_auth::ReplayGuard;
pub use buzz_http_auth::{contract_errors, ApiError};

/// Largest operator request body; every operator body is a few hundred bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

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
