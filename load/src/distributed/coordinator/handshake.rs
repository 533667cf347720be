//! Meeting the workers: spawned ones started, each hello answered with an assignment (in order of
//! arrival), every worker's ready awaited, then one start instant sent to all. NATS delivers at
//! most once: a worker that says hello again did not get its assignment, so it is sent again
//! (also while waiting for ready).

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::distributed::clock::unix_ms;
use crate::distributed::coordinator::bus::Bus;
use crate::distributed::coordinator::summary::WorkerReport;
use crate::distributed::proto::{self, Assignment, ToCoordinator, ToWorker};

/// Gap between "everyone ready" and the start, so every worker hears it first.
const START_DELAY: Duration = Duration::from_millis(500);

/// Child worker processes, killed if still running when dropped.
pub struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

/// Starts `count` workers (`w0`, `w1`, ...) as child processes of this binary.
pub fn spawn_workers(count: usize, nats_url: &str, run_id: &str) -> Result<Children> {
    let exe = std::env::current_exe().context("this program's path")?;
    let mut children = Children(Vec::new());
    for i in 0..count {
        let child = Command::new(&exe)
            .args(["worker", "--nats-url", nats_url, "--run-id", run_id, "--name", &format!("w{i}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting worker {i} ({})", exe.display()))?;
        children.0.push(child);
    }
    Ok(children)
}

/// The workers that said hello, in order, with the assignment each was sent.
pub struct Assigned {
    /// Worker names in order of arrival (the index of each one's assignment).
    pub names: Vec<String>,
    /// The message each was sent, sent again when it says hello again.
    sent: BTreeMap<String, ToWorker>,
}

/// Answers hellos with `assignment(index)` until `n` workers have one, within `timeout`.
pub async fn assign(
    bus: &mut Bus,
    n: usize,
    timeout: Duration,
    assignment: impl Fn(usize) -> Result<Assignment>,
) -> Result<Assigned> {
    let mut a = Assigned { names: Vec::new(), sent: BTreeMap::new() };
    let deadline = tokio::time::Instant::now() + timeout;
    while a.names.len() < n {
        let Some(payload) = bus.next_by(deadline).await? else {
            bail!("only {} of {n} worker(s) said hello within {timeout:?}", a.names.len());
        };
        if let Ok(ToCoordinator::Hello { worker }) = proto::decode(&payload) {
            if let Some(again) = a.sent.get(&worker) {
                bus.to_worker(&worker, again).await?;
            } else {
                let m = ToWorker::Assign(Box::new(assignment(a.names.len())?));
                bus.to_worker(&worker, &m).await?;
                a.sent.insert(worker.clone(), m);
                a.names.push(worker);
            }
        }
    }
    Ok(a)
}

/// Waits within `timeout` until every assigned worker is ready (workers repeat it until the
/// start, so each counts once); a report per worker with what it connected. A worker failing
/// while it prepares aborts the run.
pub async fn await_ready(
    bus: &mut Bus,
    assigned: &Assigned,
    timeout: Duration,
) -> Result<BTreeMap<String, WorkerReport>> {
    let n = assigned.names.len();
    let mut workers: BTreeMap<String, WorkerReport> =
        assigned.names.iter().map(|w| (w.clone(), WorkerReport::named(w))).collect();
    let mut ready = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + timeout;
    while ready.len() < n {
        let Some(payload) = bus.next_by(deadline).await? else {
            bail!("only {} of {n} worker(s) got ready within {timeout:?}", ready.len());
        };
        match proto::decode(&payload) {
            Ok(ToCoordinator::Ready { worker, connected, failed }) => {
                if let Some(w) = workers.get_mut(&worker) {
                    if ready.insert(worker) {
                        w.connected = connected;
                        w.failed_connections = failed;
                    }
                }
            }
            Ok(ToCoordinator::Hello { worker }) => {
                if let Some(again) = assigned.sent.get(&worker) {
                    bus.to_worker(&worker, again).await?;
                }
            }
            Ok(ToCoordinator::Failed { worker, error }) => {
                let _ = bus.to_all(&ToWorker::Abort).await;
                bail!("worker {worker} failed while preparing: {error}");
            }
            _ => {}
        }
    }
    Ok(workers)
}

/// Sends every worker the start, [`START_DELAY`] from now: its wall-clock ms (what the workers
/// are sent) and its `Instant`.
pub async fn start(bus: &Bus) -> Result<(u64, Instant)> {
    let start_ms = unix_ms() + u64::try_from(START_DELAY.as_millis()).unwrap_or(500);
    bus.to_all(&ToWorker::Start { start_unix_ms: start_ms }).await?;
    Ok((start_ms, Instant::now() + START_DELAY))
}
