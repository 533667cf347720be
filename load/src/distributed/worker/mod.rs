//! A worker: hello until assigned, prepare the share, ready, wait for the start, run, stream one
//! window per second, then the final window and `done` with its totals.

mod scenarios;
mod session;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use futures::StreamExt;

use crate::distributed::audit::Audit;
use crate::distributed::clock::{instant_of_unix_ms, sleep_until};
use crate::distributed::metrics::Recorder;
use crate::distributed::proto::{self, check_token, Assignment, Interval, ToCoordinator, ToWorker};
use crate::flags::secs;
use crate::process;
use session::{Ctx, Timing};

/// One worker of a distributed run: connects to NATS, says hello under the run id, runs the share
/// it is assigned, streams histograms every second and exits when the run is over.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerArgs {
    /// NATS server the coordinator listens on.
    #[arg(long, env = "NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// The coordinator's run id.
    #[arg(long, value_name = "ID", env = "BUZZ_LOAD_RUN_ID")]
    pub run_id: String,
    /// This worker's name (letters, digits, `-`, `_`) [default: host name and process id].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Seconds to wait for an assignment before giving up.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub assign_timeout: f64,
}

impl WorkerArgs {
    /// Checks the flags clap cannot (exit code 2 on error).
    pub fn validate(&self) -> Result<()> {
        check_token("run-id", &self.run_id)?;
        if let Some(n) = &self.name {
            check_token("name", n)?;
        }
        secs("assign-timeout", self.assign_timeout)?;
        Ok(())
    }
}

/// `buzz-load worker ...`: exit 0 when the run finished, 1 on failure, 2 on bad flags.
#[must_use]
pub fn main(args: &WorkerArgs) -> ExitCode {
    const WHO: &str = "buzz-load worker";
    if let Err(e) = args.validate() {
        return process::bad_flags(WHO, &e);
    }
    match process::block_on(WHO, None, run_worker(args)) {
        Ok(result) => process::finished(WHO, result),
        Err(code) => code,
    }
}

fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String =
        host.trim().chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(40).collect();
    format!("{}-{}", if host.is_empty() { "worker" } else { &host }, std::process::id())
}

/// Runs one worker to the end of its run.
pub async fn run_worker(args: &WorkerArgs) -> Result<()> {
    check_token("run-id", &args.run_id)?;
    let name = args.name.clone().unwrap_or_else(default_name);
    check_token("name", &name)?;
    let assign_timeout = secs("assign-timeout", args.assign_timeout)?;
    let nats = proto::connect(&args.nats_url).await?;
    let coord = proto::coord_subject(&args.run_id);
    let mut mine = nats.subscribe(proto::worker_subject(&args.run_id, &name)).await?;
    let mut all = nats.subscribe(proto::all_subject(&args.run_id)).await?;
    let link = Link { nats: &nats, name: &name, coord: &coord };
    let assignment = await_assignment(&link, &mut mine, assign_timeout).await?;
    eprintln!("buzz-load worker {name}: assigned; opening connections");
    let result = run_assignment(&link, assignment, &mut all).await;
    if let Err(e) = &result {
        let _ = link.say(ToCoordinator::Failed { worker: name.clone(), error: format!("{e:#}") }).await;
    }
    nats.flush().await?;
    result
}

/// Says hello every half second until assigned (the coordinator may not listen yet).
async fn await_assignment(
    link: &Link<'_>,
    mine: &mut async_nats::Subscriber,
    timeout: Duration,
) -> Result<Assignment> {
    let name = link.name;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        link.say(ToCoordinator::Hello { worker: name.to_owned() }).await?;
        tokio::select! {
            msg = mine.next() => match msg.map(|m| proto::decode::<ToWorker>(&m.payload)) {
                Some(Ok(ToWorker::Assign(a))) => return Ok(*a),
                Some(Ok(ToWorker::Abort)) => bail!("the coordinator aborted the run"),
                Some(Ok(ToWorker::Start { .. })) => {}
                Some(Err(e)) => eprintln!("buzz-load worker {name}: undecodable message from the coordinator: {e:#}"),
                None => bail!("NATS subscription ended"),
            },
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
            () = tokio::time::sleep_until(deadline) => bail!("no assignment within {timeout:?}"),
        }
    }
}

/// The worker's side of the run's subjects: what it says goes to the coordinator's.
struct Link<'a> {
    nats: &'a async_nats::Client,
    name: &'a str,
    coord: &'a str,
}

impl Link<'_> {
    async fn say(&self, m: ToCoordinator) -> Result<()> {
        self.nats.publish(self.coord.to_owned(), proto::encode(&m)?).await?;
        Ok(())
    }
}

/// Prepares the shares of `a`, says ready until the start, runs them, streams the windows, and
/// ends with the last window and the totals.
async fn run_assignment(link: &Link<'_>, a: Assignment, all: &mut async_nats::Subscriber) -> Result<()> {
    let name = link.name;
    let (duration, drain) = (Duration::from_millis(a.duration_ms), Duration::from_millis(a.drain_ms));
    let shares = a.shares.clone();
    let ctx = Arc::new(context(a, name)?);
    let prepared = futures::future::join_all(shares.into_iter().map(|s| scenarios::prepare(&ctx, s))).await;
    let mut connected = BTreeMap::new();
    let mut failed = 0;
    for p in &prepared {
        *connected.entry(p.name().to_owned()).or_insert(0) += p.connected();
        failed += p.failed;
    }
    eprintln!("buzz-load worker {name}: ready ({failed} connection(s) failed); waiting for the start");
    let ready = ToCoordinator::Ready { worker: name.to_owned(), connected, failed };
    let start = instant_of_unix_ms(await_start(link, &ready, all).await?);
    let timing = Timing { start, send_end: start + duration, drain_end: start + duration + drain };
    let tasks: Vec<_> = prepared.into_iter().flat_map(|p| scenarios::spawn(&ctx, p, timing)).collect();
    let second = stream_windows(link, &ctx, start, tasks, all).await?;
    let w = ctx.rec.take();
    ctx.audit.flush();
    link.say(ToCoordinator::Interval(Interval::pack(name, second, &w)?)).await?;
    link.say(ToCoordinator::Done { worker: name.to_owned(), totals: ctx.rec.totals() }).await?;
    Ok(())
}

/// What the clients of assignment `a` share (worker `name`'s audit trail among it).
fn context(a: Assignment, name: &str) -> Result<Ctx> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_millis(a.connect_timeout_ms))
        .build()
        .context("HTTP client")?;
    let audit = match &a.audit_dir {
        Some(dir) => Audit::open(std::path::Path::new(dir), name)?,
        None => Audit::none(),
    };
    Ok(Ctx { a, rec: Recorder::default(), http, audit, recent: std::sync::Mutex::default() })
}

/// Says `ready` every second until the start comes (NATS delivers at most once, and the
/// coordinator counts it once); the start in wall-clock ms.
async fn await_start(
    link: &Link<'_>,
    ready: &ToCoordinator,
    all: &mut async_nats::Subscriber,
) -> Result<u64> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        link.say(ready.clone()).await?;
        let msg = tokio::select! {
            msg = all.next() => msg.context("NATS subscription ended")?,
            () = tokio::time::sleep(Duration::from_secs(1)) => continue,
            () = tokio::time::sleep_until(give_up) => bail!("no start within 600 s"),
        };
        match proto::decode::<ToWorker>(&msg.payload)? {
            ToWorker::Start { start_unix_ms } => return Ok(start_unix_ms),
            ToWorker::Abort => bail!("the coordinator aborted the run"),
            ToWorker::Assign(_) => {}
        }
    }
}

/// Sends one window per second, aligned to the start, until every task ended; the number of
/// the last (not yet sent) window.
async fn stream_windows(
    link: &Link<'_>,
    ctx: &Ctx,
    start: Instant,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    all: &mut async_nats::Subscriber,
) -> Result<u64> {
    let mut all_done = Box::pin(futures::future::join_all(tasks));
    let mut second = 0u64;
    loop {
        let tick = start + Duration::from_secs(second + 1);
        tokio::select! {
            _ = &mut all_done => return Ok(second),
            () = sleep_until(tick) => {
                let w = ctx.rec.take();
                link.say(ToCoordinator::Interval(Interval::pack(link.name, second, &w)?)).await?;
                second += 1;
            }
            msg = all.next() => {
                if let Some(Ok(ToWorker::Abort)) = msg.map(|m| proto::decode::<ToWorker>(&m.payload)) {
                    bail!("the coordinator aborted the run");
                }
            }
        }
    }
}
