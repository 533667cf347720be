//! Errors as a caller may learn them: one code, mapped in one place to the NIP-01 prefix and the
//! HTTP status. The bus carries it (`buzz_bus::BusError`), the store's write rule names it.

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
