//! Progress of a capture, reported to the caller (a progress bar, or a test's hook).

use std::time::Duration;

/// Where a capture is, for a progress display (or a test's hook).
#[derive(Debug, Clone)]
pub enum Step {
    /// Attempt `n` (from 1) starts: live subscription, then capture.
    Attempt(u32),
    /// Manifest page `index` served; `entries` so far.
    Page {
        /// Page number, from 0.
        index: usize,
        /// Entries received so far.
        entries: usize,
    },
    /// Bodies verified so far.
    Bodies {
        /// Bodies fetched or reused.
        done: usize,
        /// Bodies the manifest names.
        total: usize,
    },
    /// The relay confirmed the completion boundary.
    Completed,
    /// A lost answer (transport error) or a 503 to one request of the capture: the same request
    /// (same token and cursor) is sent again after `delay`, within the same capture.
    RequestRetry {
        /// The snapshot action (`start`, `page`, `bodies`, `complete`).
        action: &'static str,
        /// The try that failed, from 1.
        attempt: u32,
        /// Backoff before the next try.
        delay: Duration,
        /// Why it failed.
        reason: String,
    },
    /// A retryable failure: the next attempt starts after `delay`.
    Retry {
        /// The attempt that failed.
        attempt: u32,
        /// Backoff before the next attempt.
        delay: Duration,
        /// Why it failed.
        reason: String,
    },
}
