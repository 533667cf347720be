//! Errors that cross the bus: a small code enum mapped in one place to NIP-01 prefixes and HTTP status.

use serde::{Deserialize, Serialize};

/// What went wrong, as the caller may learn it; the one mapping to NIP-01 prefixes and HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request or event is malformed or breaks a rule (bad field, bad tag, bad value): 400.
    Invalid,
    /// The write is refused outright by a rule of its target (e.g. an archived channel): 403.
    Blocked,
    /// The actor is authenticated but lacks the right (scope, role, channel access): 403.
    Restricted,
    /// The request needs authentication (NIP-42, NIP-98 or a token) it did not carry: 401.
    AuthRequired,
    /// The caller exceeded a rate or quota limit: 429.
    RateLimited,
    /// The write collides with current state (already exists, stale precondition): 409.
    Conflict,
    /// The addressed object does not exist or is not visible to the caller: 404 (`invalid` in NIP-01).
    NotFound,
    /// The request asks for something this relay does not do: 400.
    Unsupported,
    /// A bus request or a streamed query did not complete in time: 504.
    Timeout,
    /// A dependency (NATS, a service, the database) cannot answer now; retrying may help: 503.
    Unavailable,
    /// A bug or unexpected failure; the message says nothing more: 500.
    Internal,
}

impl ErrorCode {
    /// The NIP-01 machine-readable prefix, without the colon.
    #[must_use]
    pub fn nip01_prefix(self) -> &'static str {
        match self {
            Self::Invalid | Self::NotFound => "invalid",
            Self::Blocked => "blocked",
            Self::Restricted => "restricted",
            Self::AuthRequired => "auth-required",
            Self::RateLimited => "rate-limited",
            Self::Conflict => "conflict",
            Self::Unsupported => "unsupported",
            Self::Timeout | Self::Unavailable | Self::Internal => "error",
        }
    }
    /// The HTTP status this code answers with.
    #[must_use]
    pub fn http_status(self) -> u16 {
        match self {
            Self::Invalid | Self::Unsupported => 400,
            Self::AuthRequired => 401,
            Self::Blocked | Self::Restricted => 403,
            Self::NotFound => 404,
            Self::Conflict => 409,
            Self::RateLimited => 429,
            Self::Timeout => 504,
            Self::Unavailable => 503,
            Self::Internal => 500,
        }
    }
    /// Stable code string for HTTP JSON bodies.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Invalid => "invalid",
            Self::Blocked => "blocked",
            Self::Restricted => "restricted",
            Self::AuthRequired => "auth_required",
            Self::RateLimited => "rate_limited",
            Self::Conflict => "conflict",
            Self::NotFound => "not_found",
            Self::Unsupported => "unsupported",
            Self::Timeout => "timeout",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }
}

/// An error with a message that is safe to show the caller (it names nothing the caller cannot read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{}: {message}", code.nip01_prefix())]
pub struct BusError {
    /// What kind of failure it is.
    pub code: ErrorCode,
    /// Human-readable detail, safe to show the caller.
    pub message: String,
}

impl BusError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
    /// An [`ErrorCode::Invalid`] error.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Invalid, message)
    }
    /// An [`ErrorCode::Restricted`] error.
    pub fn restricted(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Restricted, message)
    }
    /// An [`ErrorCode::Blocked`] error.
    pub fn blocked(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Blocked, message)
    }
    /// An [`ErrorCode::Internal`] error with the fixed message `internal error` (details go to logs).
    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error")
    }
    /// An [`ErrorCode::Unavailable`] error.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
    /// NIP-01 reason text: `<prefix>: <message>`.
    #[must_use]
    pub fn nip01(&self) -> String {
        self.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_to_a_prefix_and_a_status_in_one_place() {
        let all = [
            ErrorCode::Invalid,
            ErrorCode::Blocked,
            ErrorCode::Restricted,
            ErrorCode::AuthRequired,
            ErrorCode::RateLimited,
            ErrorCode::Conflict,
            ErrorCode::NotFound,
            ErrorCode::Unsupported,
            ErrorCode::Timeout,
            ErrorCode::Unavailable,
            ErrorCode::Internal,
        ];
        for c in all {
            assert!((400..600).contains(&c.http_status()));
            assert!(!c.nip01_prefix().is_empty());
        }
        assert_eq!(BusError::new(ErrorCode::Conflict, "stale prev").nip01(), "conflict: stale prev");
        assert_eq!(ErrorCode::AuthRequired.http_status(), 401);
    }
}
