//! The run as the coordinator follows it: every worker's one-second windows merged until each is
//! done (or failed), a progress line per second, and an abort when the run overstays.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::distributed::coordinator::bus::Bus;
use crate::distributed::coordinator::summary::WorkerReport;
use crate::distributed::coordinator::timeline::Merged;
use crate::distributed::proto::{self, ToCoordinator, ToWorker};

/// When the run started and how to show it.
pub struct Follow {
    /// The start instant, and the same in wall-clock ms (what the workers were sent).
    pub start: Instant,
    pub start_ms: u64,
    /// Workers not done by then are given up (and told to abort).
    pub end_by: Instant,
    /// The operation the progress line shows the latency of (empty: all).
    pub head: &'static str,
    /// No progress lines.
    pub quiet: bool,
}

/// Merges the windows until every worker of `workers` is done or failed (their totals and errors
/// go there), or until `f.end_by`.
pub async fn follow(bus: &mut Bus, workers: &mut BTreeMap<String, WorkerReport>, f: &Follow) -> Merged {
    let n = workers.len();
    let mut merged = Merged::default();
    let mut finished = 0;
    let first_tick = tokio::time::Instant::from_std(f.start + Duration::from_millis(1300));
    let mut tick = tokio::time::interval_at(first_tick, Duration::from_secs(1));
    let end_by = tokio::time::Instant::from_std(f.end_by);
    while finished < n {
        tokio::select! {
            payload = bus.next() => {
                let Some(payload) = payload else { break };
                match take(&payload, &mut merged, workers) {
                    Seen::Finished => finished += 1,
                    // Still saying Ready: it missed the start (at most once delivery); the
                    // start instant is absolute, so the same message is sent again.
                    Seen::MissedStart => {
                        let _ = bus.to_all(&ToWorker::Start { start_unix_ms: f.start_ms }).await;
                    }
                    Seen::Nothing => {}
                }
            }
            _ = tick.tick(), if !f.quiet => {
                let elapsed = f.start.elapsed().as_secs_f64();
                let second = f.start.elapsed().as_secs().saturating_sub(1);
                eprintln!("{}", progress(&merged, second, f.head, elapsed));
            }
            () = tokio::time::sleep_until(end_by) => {
                let _ = bus.to_all(&ToWorker::Abort).await;
                break;
            }
        }
    }
    merged
}

/// What one message from a worker changed.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// A worker finished (done or failed), for the first time.
    Finished,
    /// A worker is still saying ready: it missed the start.
    MissedStart,
    /// A window merged, a repeat, or a message of no interest.
    Nothing,
}

/// Takes one message: a window is merged, a worker's `done` or `failed` is recorded once.
fn take(payload: &[u8], merged: &mut Merged, workers: &mut BTreeMap<String, WorkerReport>) -> Seen {
    match proto::decode(payload) {
        Ok(ToCoordinator::Interval(i)) => {
            if let Err(e) = merged.add(&i) {
                merged.errors.add(&format!("coordinator: {e:#}"));
            }
            Seen::Nothing
        }
        Ok(ToCoordinator::Done { worker, totals }) => match workers.get_mut(&worker) {
            Some(w) if w.totals.is_none() => {
                w.totals = Some(totals);
                Seen::Finished
            }
            _ => Seen::Nothing,
        },
        Ok(ToCoordinator::Ready { .. }) => Seen::MissedStart,
        Ok(ToCoordinator::Failed { worker, error }) => match workers.get_mut(&worker) {
            Some(w) if w.error.is_none() => {
                w.error = Some(error);
                Seen::Finished
            }
            _ => Seen::Nothing,
        },
        _ => Seen::Nothing,
    }
}

/// The progress line of second `second`.
fn progress(merged: &Merged, second: u64, head: &str, elapsed: f64) -> String {
    let c = merged.second_counts(second);
    let ops: Vec<&str> = if head.is_empty() { Vec::new() } else { vec![head] };
    let s = merged.latency_of(&ops).summary();
    let errors: u64 = merged.totals.values().map(|a| a.counts.errors).sum();
    let conflicts: u64 = merged.totals.values().map(|a| a.counts.conflicts).sum();
    format!(
        "[{elapsed:>6.1} s] {:>8} ops/s  p50 {:.2} ms  p99 {:.2} ms  errors {errors}  conflicts {conflicts}",
        c.ok + c.conflicts,
        s.p50_us as f64 / 1000.0,
        s.p99_us as f64 / 1000.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(m: &ToCoordinator, merged: &mut Merged, workers: &mut BTreeMap<String, WorkerReport>) -> Seen {
        take(&proto::encode(m).expect("encode"), merged, workers)
    }

    #[test]
    fn a_worker_finishes_once_and_one_still_saying_ready_missed_the_start() {
        let mut merged = Merged::default();
        let mut workers: BTreeMap<String, WorkerReport> =
            ["w0", "w1"].iter().map(|w| ((*w).to_owned(), WorkerReport::named(w))).collect();
        let done = ToCoordinator::Done { worker: "w0".into(), totals: BTreeMap::new() };
        assert_eq!(seen(&done, &mut merged, &mut workers), Seen::Finished);
        assert_eq!(seen(&done, &mut merged, &mut workers), Seen::Nothing);
        let failed = ToCoordinator::Failed { worker: "w1".into(), error: "gone".into() };
        assert_eq!(seen(&failed, &mut merged, &mut workers), Seen::Finished);
        assert_eq!(seen(&failed, &mut merged, &mut workers), Seen::Nothing);
        assert_eq!(workers["w1"].error.as_deref(), Some("gone"));
        let stranger = ToCoordinator::Done { worker: "w9".into(), totals: BTreeMap::new() };
        assert_eq!(seen(&stranger, &mut merged, &mut workers), Seen::Nothing);
        let ready = ToCoordinator::Ready { worker: "w1".into(), connected: BTreeMap::new(), failed: 0 };
        assert_eq!(seen(&ready, &mut merged, &mut workers), Seen::MissedStart);
        assert_eq!(take(b"not json", &mut merged, &mut workers), Seen::Nothing);
    }
}
