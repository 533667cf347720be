//! What a worker records: per operation, counts (ok, errors, conflicts) and an OK-latency
//! histogram, kept per one-second window (shipped and reset every second) and in running totals.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::latency::{Latency, Reasons};

/// Outcome counts of one operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Operations that succeeded (their latency is in the histogram).
    pub ok: u64,
    /// Operations that failed (refused, timed out, connection lost).
    pub errors: u64,
    /// Refusals the scenario asked for: stale `prev` answered `conflict:` (timed, not errors).
    pub conflicts: u64,
}

impl Counts {
    /// Adds `o` to these counts.
    pub fn add(&mut self, o: &Self) {
        self.ok += o.ok;
        self.errors += o.errors;
        self.conflicts += o.conflicts;
    }
}

/// One operation within one window.
#[derive(Debug, Clone, Default)]
pub struct OpWindow {
    /// Outcome counts.
    pub counts: Counts,
    /// Latencies of ok and conflict outcomes.
    pub latency: Latency,
}

#[derive(Debug, Default)]
struct Inner {
    window: BTreeMap<String, OpWindow>,
    totals: BTreeMap<String, Counts>,
    errors: Reasons,
}

/// The recorder every client task of a worker writes to (one short lock per operation).
#[derive(Debug, Default)]
pub struct Recorder(Mutex<Inner>);

/// A window taken out of a [`Recorder`].
#[derive(Debug, Default)]
pub struct Window {
    /// Per operation.
    pub ops: BTreeMap<String, OpWindow>,
    /// Error reasons seen in the window.
    pub errors: Reasons,
}

impl Recorder {
    fn with(&self, f: impl FnOnce(&mut Inner)) {
        if let Ok(mut g) = self.0.lock() {
            f(&mut g);
        }
    }

    /// A successful `op` that took `d`.
    pub fn ok(&self, op: &str, d: Duration) {
        self.with(|i| {
            let w = i.window.entry(op.to_owned()).or_default();
            w.counts.ok += 1;
            w.latency.record(d);
            i.totals.entry(op.to_owned()).or_default().ok += 1;
        });
    }

    /// An expected `conflict:` refusal of `op` after `d`.
    pub fn conflict(&self, op: &str, d: Duration) {
        self.with(|i| {
            let w = i.window.entry(op.to_owned()).or_default();
            w.counts.conflicts += 1;
            w.latency.record(d);
            i.totals.entry(op.to_owned()).or_default().conflicts += 1;
        });
    }

    /// A failed `op`, with why.
    pub fn error(&self, op: &str, reason: &str) {
        self.with(|i| {
            i.window.entry(op.to_owned()).or_default().counts.errors += 1;
            i.totals.entry(op.to_owned()).or_default().errors += 1;
            i.errors.add(&format!("{op}: {}", reason.chars().take(160).collect::<String>()));
        });
    }

    /// Takes the current window and starts an empty one.
    pub fn take(&self) -> Window {
        let mut out = Window::default();
        self.with(|i| {
            out.ops = std::mem::take(&mut i.window);
            out.errors = std::mem::take(&mut i.errors);
        });
        out
    }

    /// Running totals since the worker started.
    #[must_use]
    pub fn totals(&self) -> BTreeMap<String, Counts> {
        self.0.lock().map(|g| g.totals.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_reset_and_totals_keep_counting() {
        let r = Recorder::default();
        r.ok("chat", Duration::from_millis(2));
        r.ok("chat", Duration::from_millis(4));
        r.conflict("artifact.stale", Duration::from_millis(1));
        r.error("chat", "rate-limited: slow down");
        let w = r.take();
        assert_eq!(w.ops["chat"].counts, Counts { ok: 2, errors: 1, conflicts: 0 });
        assert_eq!(w.ops["chat"].latency.count(), 2);
        assert_eq!(w.ops["artifact.stale"].counts.conflicts, 1);
        assert_eq!(w.errors.total(), 1);
        r.ok("chat", Duration::from_millis(3));
        let w = r.take();
        assert_eq!(w.ops["chat"].counts.ok, 1);
        assert!(r.take().ops.is_empty());
        assert_eq!(r.totals()["chat"], Counts { ok: 3, errors: 1, conflicts: 0 });
    }
}
