//! The contract's NIP-FI denial answers. Their HTTP form (`{"error","code"}`, 401 with
//! `WWW-Authenticate: Nostr`) comes from the conversion into `request::ApiError`.

use axum::http::StatusCode;

/// Why NIP-FI refuses a request or socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// No evidence where it is required: 401 `auth-required: authentication required`.
    AuthRequired,
    /// Malformed, forged, expired, foreign or unbound evidence: 403.
    EvidenceRejected,
    /// `deny_protected` on a protected route: 403.
    AuthorizationDenied,
    /// Issuer keys past their deadline, or the policy lookup failed: 503.
    AuthorizationUnavailable,
    /// No community for this host: 404.
    UnknownHost,
}

impl Denial {
    /// Status, code and message.
    #[must_use]
    pub fn parts(self) -> (StatusCode, &'static str, &'static str) {
        match self {
            Self::AuthRequired => {
                (StatusCode::UNAUTHORIZED, "auth_required", "auth-required: authentication required")
            }
            Self::EvidenceRejected => {
                (StatusCode::FORBIDDEN, "evidence_rejected", "restricted: evidence rejected")
            }
            Self::AuthorizationDenied => {
                (StatusCode::FORBIDDEN, "authorization_denied", "restricted: authorization denied")
            }
            Self::AuthorizationUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "authorization_unavailable",
                "restricted: authorization unavailable",
            ),
            Self::UnknownHost => {
                (StatusCode::NOT_FOUND, "unknown_host", "no community is configured for this host")
            }
        }
    }
}

impl From<Denial> for buzz_http_auth::ApiError {
    fn from(d: Denial) -> Self {
        let (status, code, message) = d.parts();
        Self::new(status, code, message)
    }
}
