//! Progress of a capture, reported to the caller (a progress bar, or a test's hook).

use std::time::Duration;

/// Where a capture is, for a progress display (or a test's hook).
#[derive(Debug, Clone)]
pub enum Step {
    Attempt(u32),
    /// Manifest page `index` served; `entries` so far.
    Page {
        index: usize,
        entries: usize,
    },
    Bodies {
        done: usize,
        total: usize,
    },
    Completed,
    Retry {
        attempt: u32,
        delay: Duration,
        reason: String,
    },
}
