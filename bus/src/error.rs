//! Errors that cross the bus: a small code enum mapped in one place to NIP-01 prefixes and HTTP status.

use serde::{Deserialize, Serialize};

/// What went wrong, as the caller may learn it (defined in `buzz_core` so the store's write rule
/// can name it; one mapping to NIP-01 prefixes and HTTP status).
pub use buzz_core::ErrorCode;

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
        Self::new(ErrorCode::Internal, buzz_core::refusal::INTERNAL)
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
