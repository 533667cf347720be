//! Bus request latency (`buzz_bus_request_seconds`), by operation and outcome: what a team
//! watches to tell a slow service from a slow database or a missing replica.

use std::time::Instant;

use crate::error::BusError;

/// Request operations, as the subject names them after `<prefix>.v1.`. Anything else is "other",
/// so no subject (a per-community one, a test's) can grow the label set.
const OPERATIONS: [&str; 7] =
    ["write", "query", "access", "chat", "snapshot", "snapshot.purge", "policy.lease"];

/// The operation label of `subject`: its part after `.v1.`, when that is a known request operation.
#[must_use]
pub fn operation(subject: &str) -> &'static str {
    let op = subject.split_once(".v1.").map_or("", |(_, op)| op);
    OPERATIONS.iter().find(|known| **known == op).copied().unwrap_or("other")
}

/// The outcome label: `ok` when an answer arrived (whatever it says), else the bus error's code
/// (`timeout`, `unavailable`, `internal` ...).
#[must_use]
pub fn outcome<R>(result: &Result<R, BusError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => e.code.as_str(),
    }
}

/// Records one request to `subject` that started at `started`.
pub fn record<R>(subject: &str, started: Instant, result: &Result<R, BusError>) {
    metrics::histogram!(
        "buzz_bus_request_seconds",
        "operation" => operation(subject),
        "outcome" => outcome(result)
    )
    .record(started.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn operations_are_a_closed_set_whatever_the_prefix() {
        assert_eq!(operation("buzz.v1.write"), "write");
        assert_eq!(operation("t.abc-1.v1.policy.lease"), "policy.lease");
        assert_eq!(operation("buzz.v1.snapshot.purge"), "snapshot.purge");
        assert_eq!(operation("buzz.v1.live.00000000-0000-0000-0000-000000000000"), "other");
        assert_eq!(operation("buzz.v1.write.direct.abc"), "other");
        assert_eq!(operation("nonsense"), "other");
    }

    #[test]
    fn the_outcome_is_ok_or_the_error_code() {
        assert_eq!(outcome::<()>(&Ok(())), "ok");
        assert_eq!(outcome::<()>(&Err(BusError::new(ErrorCode::Timeout, "slow"))), "timeout");
        assert_eq!(outcome::<()>(&Err(BusError::unavailable("none"))), "unavailable");
    }
}
