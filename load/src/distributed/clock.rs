//! The wall clock the coordinator and its workers share (cross-process latency, the start
//! instant), and sleeping on the tokio clock.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Microseconds since the epoch (the wall clock every worker shares, for cross-process latency).
#[must_use]
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Milliseconds since the epoch.
#[must_use]
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

/// Wall-clock ms since the epoch as an `Instant` (past values map to now).
#[must_use]
pub fn instant_of_unix_ms(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms.saturating_sub(unix_ms()))
}

/// Sleeps until `at` (tokio clock).
pub async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
}
