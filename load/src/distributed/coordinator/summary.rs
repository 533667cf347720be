//! The report of a distributed run: the summary table, the JSON document and the time series
//! the plot is drawn from.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::distributed::coordinator::timeline::Merged;
use crate::distributed::metrics::Counts;
use crate::distributed::plan::{Plan, Scenario};
use crate::latency::{per_sec, ratio, Reasons, Summary};

/// One operation over the whole run.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    /// Outcome counts.
    #[serde(flatten)]
    pub counts: Counts,
    /// ok / s over the window.
    pub ok_per_sec: f64,
    /// Latency of ok (and conflict) outcomes, µs.
    pub latency: Summary,
}

/// One second of the run (all operations, or the headline operation for the percentiles).
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Seconds since the start.
    pub second: u64,
    /// Completed operations (ok + conflicts) in this second.
    pub ops: u64,
    /// Errors in this second.
    pub errors: u64,
    /// Headline operation percentiles in this second, µs (0 without samples).
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
}

/// One worker as the coordinator saw it.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerReport {
    /// Its name.
    pub name: String,
    /// Connections it opened, by part.
    pub connected: BTreeMap<String, u64>,
    /// Connections it could not open.
    pub failed_connections: u64,
    /// Its own totals (from `done`); `None` when it never finished.
    pub totals: Option<BTreeMap<String, Counts>>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

impl WorkerReport {
    /// The report of worker `name` before it said anything.
    #[must_use]
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            connected: BTreeMap::new(),
            failed_connections: 0,
            totals: None,
            error: None,
        }
    }
}

/// Fan-out (or chat with subscribers): deliveries against accepted × listeners.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    /// Listener connections that reached EOSE.
    pub listeners: u64,
    /// Accepted events × listeners.
    pub expected: u64,
    /// Deliveries received.
    pub delivered: u64,
    /// delivered / expected.
    pub ratio: Option<f64>,
}

/// The whole report (also the JSON document).
#[derive(Debug, Clone, Serialize)]
pub struct DistReport {
    /// Run id (subject prefix `buzzload.<run_id>`).
    pub run_id: String,
    /// The plan that ran.
    pub plan: Plan,
    /// The operation whose percentiles headline the progress lines and the plot.
    pub headline: String,
    /// Seconds of the measured window.
    pub window_secs: f64,
    /// Per operation.
    pub ops: BTreeMap<String, OpReport>,
    /// Delivery accounting when there were listeners.
    pub delivery: Option<Delivery>,
    /// Per second.
    pub timeline: Vec<Point>,
    /// Per worker.
    pub workers: Vec<WorkerReport>,
    /// Workers that failed or never finished.
    pub failed_workers: usize,
    /// Whether the merged windows equal the sum of the workers' own totals, per operation.
    pub totals_match: bool,
    /// Error reasons (first few with counts).
    pub errors: Reasons,
}

/// The operation that headlines a scenario.
#[must_use]
pub fn headline(s: Scenario) -> &'static str {
    match s {
        Scenario::Chat => "chat",
        Scenario::Fanout => "delivery",
        Scenario::Artifacts => "artifact.update",
        Scenario::Queries => "query.current",
        Scenario::Snapshot => "snapshot.capture",
        Scenario::Storm => "storm.connect",
        Scenario::Idle => "idle.connect",
        Scenario::Workday => "",
    }
}

impl DistReport {
    /// Builds the report from what was merged and what the workers said.
    #[must_use]
    pub fn build(run_id: String, plan: Plan, merged: &Merged, workers: Vec<WorkerReport>) -> Self {
        let window = plan.duration;
        let ops: BTreeMap<String, OpReport> = merged
            .totals
            .iter()
            .map(|(name, a)| {
                let r = OpReport {
                    counts: a.counts,
                    ok_per_sec: per_sec(a.counts.ok + a.counts.conflicts, window),
                    latency: a.latency.summary(),
                };
                (name.clone(), r)
            })
            .collect();
        let head = headline(plan.scenario).to_owned();
        let failed_workers = workers.iter().filter(|w| w.totals.is_none() || w.error.is_some()).count();
        let merged_counts: BTreeMap<String, Counts> =
            merged.totals.iter().map(|(k, a)| (k.clone(), a.counts)).collect();
        Self {
            run_id,
            timeline: timeline(merged, &head),
            headline: if head.is_empty() { "all operations".to_owned() } else { head },
            window_secs: window.as_secs_f64(),
            plan,
            ops,
            delivery: delivery(merged, &workers),
            failed_workers,
            totals_match: failed_workers == 0 && summed(&workers) == merged_counts,
            workers,
            errors: merged.errors.clone(),
        }
    }

    /// Writes the JSON document.
    pub fn write_json(&self, path: &std::path::Path) -> anyhow::Result<()> {
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")?;
        Ok(())
    }
}

/// Per second: operations, errors, and the latency of the headline operation (`head`; all
/// operations when empty).
fn timeline(merged: &Merged, head: &str) -> Vec<Point> {
    let last = merged.seconds.keys().next_back().copied().unwrap_or(0);
    (0..=last)
        .map(|s| {
            let c = merged.second_counts(s);
            let mut h = crate::latency::Latency::new();
            for (name, a) in merged.seconds.get(&s).into_iter().flatten() {
                if head.is_empty() || head == name.as_str() {
                    h.merge(&a.latency);
                }
            }
            let sum = h.summary();
            Point {
                second: s,
                ops: c.ok + c.conflicts,
                errors: c.errors,
                p50_us: sum.p50_us,
                p90_us: sum.p90_us,
                p99_us: sum.p99_us,
            }
        })
        .collect()
}

/// Deliveries against accepted writes × listeners, when the run had listeners.
fn delivery(merged: &Merged, workers: &[WorkerReport]) -> Option<Delivery> {
    let listeners: u64 = workers.iter().filter_map(|w| w.connected.get("listen")).sum();
    (listeners > 0).then(|| {
        let accepted: u64 = ["chat", "fanout.publish"]
            .iter()
            .filter_map(|o| merged.totals.get(*o))
            .map(|a| a.counts.ok)
            .sum();
        let delivered = merged.totals.get("delivery").map_or(0, |a| a.counts.ok);
        let expected = accepted * listeners;
        Delivery { listeners, expected, delivered, ratio: ratio(delivered, expected) }
    })
}

/// The workers' own totals, summed per operation.
fn summed(workers: &[WorkerReport]) -> BTreeMap<String, Counts> {
    let mut summed: BTreeMap<String, Counts> = BTreeMap::new();
    for t in workers.iter().filter_map(|w| w.totals.as_ref()) {
        for (op, c) in t {
            summed.entry(op.clone()).or_default().add(c);
        }
    }
    summed
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

impl fmt::Display for DistReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "buzz-load distributed report (run {})", self.run_id)?;
        let urls: Vec<&str> = self.plan.targets.iter().map(|t| t.url.as_str()).collect();
        writeln!(
            f,
            "  scenario {:?}, {} worker(s), window {:.1} s, gateways {}",
            self.plan.scenario,
            self.workers.len(),
            self.window_secs,
            urls.join(", ")
        )?;
        for p in &self.plan.parts {
            let rate = p.rate.map_or_else(String::new, |r| format!(" at {r}/s"));
            writeln!(f, "  part {:?}: {} client(s){rate}", p.kind, p.clients)?;
        }
        writeln!(f)?;
        self.fmt_ops(f)?;
        if let Some(d) = &self.delivery {
            let r = d.ratio.map_or_else(|| "n/a".to_owned(), |x| format!("{:.2} %", x * 100.0));
            writeln!(
                f,
                "  delivered {} of {} expected ({r}) to {} listener(s)",
                d.delivered, d.expected, d.listeners
            )?;
        }
        self.fmt_workers(f)?;
        if self.errors.total() > 0 {
            writeln!(f, "  errors:")?;
            for (r, n) in &self.errors.first {
                writeln!(f, "    {n:>8} × {r}")?;
            }
            if self.errors.others > 0 {
                writeln!(f, "    {:>8} × (other reasons)", self.errors.others)?;
            }
        }
        Ok(())
    }
}

impl DistReport {
    /// The table of operations.
    fn fmt_ops(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  {:<18} {:>9} {:>7} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "operation", "ok", "errors", "conflicts", "ok/s", "p50 ms", "p90 ms", "p99 ms", "max ms"
        )?;
        for (name, o) in &self.ops {
            writeln!(
                f,
                "  {name:<18} {:>9} {:>7} {:>9} {:>10.1} {:>9} {:>9} {:>9} {:>9}",
                o.counts.ok,
                o.counts.errors,
                o.counts.conflicts,
                o.ok_per_sec,
                ms(o.latency.p50_us),
                ms(o.latency.p90_us),
                ms(o.latency.p99_us),
                ms(o.latency.max_us)
            )?;
        }
        Ok(())
    }

    /// A line per worker, and whether the merged windows equal their totals.
    fn fmt_workers(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for w in &self.workers {
            let conns: Vec<String> = w.connected.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let state = match (&w.error, &w.totals) {
                (Some(e), _) => format!("failed: {e}"),
                (None, None) => "did not finish".to_owned(),
                (None, Some(_)) => "done".to_owned(),
            };
            writeln!(
                f,
                "  worker {}: {} ({} failed to open), {state}",
                w.name,
                conns.join(", "),
                w.failed_connections
            )?;
        }
        writeln!(
            f,
            "  merged windows equal the workers' totals: {}",
            if self.totals_match { "yes" } else { "NO" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::metrics::Recorder;
    use crate::distributed::proto::Interval;
    use clap::Parser;
    use std::time::Duration;

    fn plan() -> anyhow::Result<Plan> {
        let args = crate::distributed::coordinator::args::CoordinatorArgs::try_parse_from([
            "c",
            "--spawn-workers",
            "2",
            "--owner-secret",
            "0000000000000000000000000000000000000000000000000000000000000001",
            "--scenario",
            "fanout",
            "--subscribers",
            "4",
            "--duration",
            "2",
        ])?;
        args.validate()
    }

    fn worker(name: &str, listen: u64, totals: Option<BTreeMap<String, Counts>>) -> WorkerReport {
        WorkerReport {
            name: name.to_owned(),
            connected: [("listen".to_owned(), listen)].into_iter().collect(),
            failed_connections: 0,
            totals,
            error: None,
        }
    }

    #[test]
    fn the_report_adds_up_deliveries_timeline_and_worker_totals() -> anyhow::Result<()> {
        let (a, b) = (Recorder::default(), Recorder::default());
        let mut merged = Merged::default();
        for s in 0..2 {
            a.ok("fanout.publish", Duration::from_millis(2));
            for _ in 0..4 {
                b.ok("delivery", Duration::from_millis(5 + s));
            }
            merged.add(&Interval::pack("a", s, &a.take())?)?;
            merged.add(&Interval::pack("b", s, &b.take())?)?;
        }
        let r = DistReport::build(
            "run".into(),
            plan()?,
            &merged,
            vec![worker("a", 2, Some(a.totals())), worker("b", 2, Some(b.totals()))],
        );
        assert_eq!(r.headline, "delivery");
        let d = r.delivery.clone().expect("listeners");
        assert_eq!((d.listeners, d.expected, d.delivered), (4, 8, 8));
        assert_eq!(r.timeline.len(), 2);
        assert_eq!(r.timeline[1].ops, 5);
        assert!(r.timeline[1].p99_us >= 6_000 && r.timeline[1].p99_us < 6_100, "{:?}", r.timeline[1]);
        assert!(r.totals_match);
        assert_eq!(r.failed_workers, 0);
        assert!((r.ops["delivery"].ok_per_sec - 4.0).abs() < 1e-9);
        let json = serde_json::to_value(&r)?;
        assert_eq!(json["ops"]["delivery"]["ok"], 8);
        assert_eq!(json["delivery"]["ratio"], 1.0);
        assert!(r.to_string().contains("merged windows equal the workers' totals: yes"));

        // A worker that never finished: flagged, and the totals cannot match.
        let r = DistReport::build(
            "run".into(),
            plan()?,
            &merged,
            vec![worker("a", 2, Some(a.totals())), worker("b", 2, None)],
        );
        assert_eq!(r.failed_workers, 1);
        assert!(!r.totals_match);
        Ok(())
    }
}
