//! Why a snapshot failed, and which failures the client retries.

/// A failed capture. Only [`SnapshotError::retryable`] failures start the capture over.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A bad argument (URL, key, tag).
    #[error("{0}")]
    Usage(String),
    /// A non-2xx answer: its status and `code`.
    #[error("relay answered {status} {code}")]
    Relay {
        /// HTTP status.
        status: u16,
        /// The body's `code` (e.g. `snapshot_reset`).
        code: String,
    },
    /// The request could not be sent or its answer not read.
    #[error("{0}")]
    Transport(String),
    /// The live subscription was lost or refused.
    #[error("live subscription: {0}")]
    Live(String),
    /// The live subscription was refused (AUTH or REQ): not retried.
    #[error("live subscription refused: {0}")]
    Refused(String),
    /// An answer that breaks the protocol (shape, missing or extra bodies).
    #[error("protocol: {0}")]
    Protocol(String),
    /// A body that fails signature or manifest verification.
    #[error("verification: {0}")]
    Verification(String),
    /// Every attempt ended in a retryable failure.
    #[error("gave up after {attempts} attempts, last: {last}")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's failure.
        last: Box<SnapshotError>,
    },
}

impl SnapshotError {
    /// 409 `snapshot_reset`, 503 (`snapshot_unavailable` or any other service failure) and a
    /// lost live subscription start the whole capture over, with backoff.
    #[must_use]
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Relay { status: 409 | 503, .. } | Self::Live(_))
    }
}
