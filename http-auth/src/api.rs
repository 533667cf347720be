//! The one error convention of every HTTP surface (tenant API on the gateway, operator API on the
//! policy-service): a status, a stable `code` and a safe message as `{"error","code"}`; a cause
//! that is not for the client (a SQL or bus failure) goes to the log with its whole chain.

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use buzz_bus::BusError;
use http::{header, HeaderValue, StatusCode};

use crate::HttpAuthError;

/// An HTTP error answer: `status` with the body `{"error": message, "code": code}`. A 401 also
/// carries `WWW-Authenticate: Nostr`.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status of the answer.
    pub status: StatusCode,
    /// Stable machine-readable code (contract "Messages and errors").
    pub code: &'static str,
    /// Text for the client: never a cause's internals.
    pub message: String,
    /// What went wrong inside, logged with its source chain when the answer is sent.
    cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ApiError {
    /// An answer with no internal cause (bad input, missing authorization, ...).
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), cause: None }
    }

    /// 400 `invalid_request` with `message`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    /// 400 for a request body that is not what the route takes; `message` names the field.
    #[must_use]
    #[allow(clippy::needless_pass_by_value)] // used as `.map_err(ApiError::invalid_body)`
    pub fn invalid_body(message: String) -> Self {
        Self::invalid_request(format!("invalid body: {message}"))
    }

    /// Keeps `cause` for the log; the client sees only status, code and message.
    #[must_use]
    pub fn with_cause(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Box::new(cause));
        self
    }

    /// `e`, then each of its sources, joined with `: ` (what the log shows).
    fn chain(e: &(dyn std::error::Error + 'static)) -> String {
        let mut text = e.to_string();
        let mut next = e.source();
        while let Some(source) = next {
            text.push_str(": ");
            text.push_str(&source.to_string());
            next = source.source();
        }
        text
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.code, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(cause) = &self.cause {
            let cause = Self::chain(cause.as_ref());
            tracing::error!(status = self.status.as_u16(), code = self.code, %cause, "request failed");
        }
        let body = serde_json::json!({ "error": self.message, "code": self.code });
        let mut res = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Nostr"));
        }
        res
    }
}

impl From<HttpAuthError> for ApiError {
    fn from(e: HttpAuthError) -> Self {
        Self::new(e.status(), e.code(), e.to_string())
    }
}

/// A bus answer's error: its code decides the status (one map, `buzz_bus::ErrorCode`); its message
/// was written for clients by the service that refused.
impl From<BusError> for ApiError {
    fn from(e: BusError) -> Self {
        let status = StatusCode::from_u16(e.code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::new(status, e.code.as_str(), e.message)
    }
}

/// Middleware around every request of an HTTP surface: more than one `Host` header is a 400 (which
/// would bind the request?), and an error the framework answered itself (unknown route, wrong
/// method, oversized body, ...) gets the contract's JSON body instead of plain text or nothing.
/// Its other headers (e.g. `Allow`) stay.
pub async fn contract_errors(req: Request, next: Next) -> Response {
    if req.headers().get_all(header::HOST).iter().nth(1).is_some() {
        return ApiError::invalid_request("more than one Host header").into_response();
    }
    let res = next.run(req).await;
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json || !(res.status().is_client_error() || res.status().is_server_error()) {
        return res;
    }
    let (code, message) = buzz_core::http_json::status_error(res.status().as_u16());
    let (mut parts, _) = res.into_parts();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    let body = serde_json::json!({ "error": message, "code": code }).to_string();
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_cause_chain_is_joined_for_the_log_and_kept_out_of_the_body() {
        let e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "try again")
            .with_cause(Outer(std::io::Error::other("connection reset")));
        let chain = e.cause.as_deref().map(|c| ApiError::chain(c));
        assert_eq!(chain.as_deref(), Some("outer: connection reset"));
        assert_eq!(e.to_string(), "503 unavailable: try again");
    }

    #[test]
    fn a_401_asks_for_nostr_authorization_and_bus_codes_map_to_their_status() {
        let res = ApiError::new(StatusCode::UNAUTHORIZED, "invalid_auth", "bad signature").into_response();
        assert_eq!(
            res.headers().get(header::WWW_AUTHENTICATE).map(HeaderValue::as_bytes),
            Some(&b"Nostr"[..])
        );
        let e = ApiError::from(BusError::new(buzz_bus::ErrorCode::Conflict, "taken"));
        assert_eq!((e.status, e.code, e.message.as_str()), (StatusCode::CONFLICT, "conflict", "taken"));
    }
}
