//! Merging the workers' windows: per operation in total, and per operation per second.

use std::collections::BTreeMap;

use anyhow::Result;

use crate::distributed::metrics::Counts;
use crate::distributed::proto::Interval;
use crate::latency::{Latency, Reasons};

/// Counts and histogram of one operation (over some span).
#[derive(Debug, Clone, Default)]
pub struct Agg {
    /// Outcome counts.
    pub counts: Counts,
    /// Latencies.
    pub latency: Latency,
}

impl Agg {
    fn add(&mut self, c: &Counts, h: &Latency) {
        self.counts.add(c);
        self.latency.merge(h);
    }
}

/// Everything merged so far.
#[derive(Debug, Default)]
pub struct Merged {
    /// Per operation, the whole run.
    pub totals: BTreeMap<String, Agg>,
    /// Per second, per operation.
    pub seconds: BTreeMap<u64, BTreeMap<String, Agg>>,
    /// Error reasons over the run.
    pub errors: Reasons,
}

impl Merged {
    /// Adds one worker window.
    pub fn add(&mut self, i: &Interval) -> Result<()> {
        let (ops, errors) = i.unpack()?;
        let sec = self.seconds.entry(i.second).or_default();
        for (name, (c, h)) in &ops {
            self.totals.entry(name.clone()).or_default().add(c, h);
            sec.entry(name.clone()).or_default().add(c, h);
        }
        self.errors.merge(&errors);
        Ok(())
    }

    /// The histogram of `ops` (all operations when empty) over the run so far.
    #[must_use]
    pub fn latency_of(&self, ops: &[&str]) -> Latency {
        let mut h = Latency::new();
        for (name, a) in &self.totals {
            if ops.is_empty() || ops.contains(&name.as_str()) {
                h.merge(&a.latency);
            }
        }
        h
    }

    /// Completed operations (ok + conflicts) and errors in second `s`.
    #[must_use]
    pub fn second_counts(&self, s: u64) -> Counts {
        let mut c = Counts::default();
        for a in self.seconds.get(&s).into_iter().flat_map(BTreeMap::values) {
            c.add(&a.counts);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::metrics::Recorder;
    use std::time::Duration;

    #[test]
    fn windows_of_two_workers_add_up() -> Result<()> {
        let (a, b) = (Recorder::default(), Recorder::default());
        for ms in [1, 2, 3] {
            a.ok("chat", Duration::from_millis(ms));
        }
        b.ok("chat", Duration::from_millis(10));
        b.error("chat", "closed");
        let mut m = Merged::default();
        m.add(&Interval::pack("a", 0, &a.take())?)?;
        m.add(&Interval::pack("b", 0, &b.take())?)?;
        b.ok("query.current", Duration::from_millis(7));
        m.add(&Interval::pack("b", 1, &b.take())?)?;
        assert_eq!(m.totals["chat"].counts, Counts { ok: 4, errors: 1, conflicts: 0 });
        assert_eq!(m.totals["chat"].latency.count(), 4);
        assert_eq!(m.second_counts(0), Counts { ok: 4, errors: 1, conflicts: 0 });
        assert_eq!(m.second_counts(1).ok, 1);
        assert_eq!(m.latency_of(&[]).count(), 5);
        assert_eq!(m.latency_of(&["chat"]).summary().max_us / 1000, 10);
        assert_eq!(m.errors.total(), 1);
        Ok(())
    }
}
