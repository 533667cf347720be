//! The coordinator (`buzz-load coordinator`): the community set up, the workers (spawned or
//! external) met and assigned their shares, one start, the windows merged with a progress line
//! per second, and the report.
//!
//! Layout: `args` (its flags, checked into a plan), `community` (members and channels), `bus`
//! (the run's subjects as the coordinator holds them), `handshake` (hello, assign, ready, start),
//! `windows` (following the run), `timeline` (merging windows), `summary` (the report), `svg`
//! (its plot), `fi_flip` (the NIP-FI part's second community and its flipper; `fi-issuers`).

pub(crate) mod args;
mod bus;
mod community;
pub(crate) mod fi_flip;
mod handshake;
pub(crate) mod summary;
mod svg;
mod timeline;
mod windows;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::distributed::plan::{assign, Plan};
use crate::distributed::proto::{Assignment, FiAssignment};
use crate::process;
use args::CoordinatorArgs;
use bus::Bus;
use community::Channels;
use fi_flip::Flips;
use summary::{headline, DistReport, WorkerReport};
use windows::Follow;

const WHO: &str = "buzz-load coordinator";

/// `buzz-load coordinator ...`: exit 0 on a finished run, 1 when the run failed, 2 on bad flags.
#[must_use]
pub fn main(args: &CoordinatorArgs) -> ExitCode {
    let plan = match args.validate() {
        Ok(p) => p,
        Err(e) => return process::bad_flags(WHO, &e),
    };
    match process::block_on(WHO, None, run_coordinator(args, plan)) {
        Ok(Ok(report)) if report.failed_workers == 0 => ExitCode::SUCCESS,
        Ok(Ok(report)) => {
            eprintln!("{WHO}: {} worker(s) did not finish", report.failed_workers);
            ExitCode::FAILURE
        }
        Ok(Err(e)) => process::finished(WHO, Err(e)),
        Err(code) => code,
    }
}

/// Runs a whole distributed run and returns its report (also printed, and written where asked).
pub async fn run_coordinator(args: &CoordinatorArgs, plan: Plan) -> Result<DistReport> {
    let run_id =
        args.run_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_owned());
    let n = args.workers + args.spawn_workers;
    let mut bus = Bus::connect(&args.nats_url, &run_id).await?;
    let seed = uuid::Uuid::new_v4().simple().to_string();
    let pool = plan.connections().min(args.max_members).max(1);
    let channels = community::setup(args, &plan, &seed, pool).await?;
    let fi = fi_flip::prepare(args, &plan, &seed, pool).await?;
    let _children = handshake::spawn_workers(args.spawn_workers, &args.nats_url, &run_id)?;
    if !args.quiet {
        eprintln!("{WHO}: run {run_id}, waiting for {n} worker(s)");
    }
    let worker_timeout = Duration::from_secs_f64(args.worker_timeout);
    let shared = Shared { seed, pool, channels, fi: fi.as_ref().map(|f| f.assignment.clone()) };
    let assigned =
        handshake::assign(&mut bus, n, worker_timeout, |i| shared.assignment(args, &plan, n, i)).await?;
    let mut workers = handshake::await_ready(&mut bus, &assigned, worker_timeout).await?;
    let (start_ms, start) = handshake::start(&bus).await?;
    let window_end = start + plan.duration;
    let flips = fi.map(|f| tokio::spawn(f.flipper.run(start, window_end, window_end + plan.drain)));
    if let Some(dir) = &args.audit {
        write_run_json(dir, &run_id, start_ms, &plan, &shared.channels, &assigned.names, args.reconnect)?;
    }
    if !args.quiet {
        let conns: u64 = workers.values().flat_map(|w| w.connected.values()).sum();
        eprintln!("{WHO}: {n} worker(s) ready with {conns} connection(s); starting");
    }
    let end_by = start + plan.duration + plan.drain + Duration::from_secs(30);
    let follow = Follow { start, start_ms, end_by, head: headline(plan.scenario), quiet: args.quiet };
    let merged = windows::follow(&mut bus, &mut workers, &follow).await;
    if let Some(h) = flips {
        report_flips(
            tokio::time::timeout(plan.drain + Duration::from_secs(20), h).await.ok().and_then(Result::ok),
        );
    }
    let report =
        DistReport::build(run_id, plan, &merged, workers.into_values().collect::<Vec<WorkerReport>>());
    write_report(args, &report)?;
    Ok(report)
}

/// What every worker's assignment shares: the run's keys, channels and NIP-FI part.
struct Shared {
    seed: String,
    pool: usize,
    channels: Channels,
    fi: Option<FiAssignment>,
}

impl Shared {
    /// The assignment of worker `index` of `n`.
    fn assignment(&self, args: &CoordinatorArgs, plan: &Plan, n: usize, index: usize) -> Result<Assignment> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Ok(Assignment {
            index,
            workers: n,
            targets: plan.targets.clone(),
            key_seed: self.seed.clone(),
            key_pool: self.pool,
            channel: self.channels.open.clone(),
            private_channel: self.channels.private.as_ref().map(|p| p.0.clone()),
            shares: assign(plan, n, index),
            knobs: plan.knobs,
            duration_ms: ms(plan.duration),
            drain_ms: ms(plan.drain),
            connect_timeout_ms: ms(plan.connect_timeout),
            audit_dir: args.audit.as_ref().map(|p| p.display().to_string()),
            reconnect: args.reconnect,
            endpoints_file: args.endpoints_file.as_ref().map(|p| p.display().to_string()),
            replay_margin_s: args.replay_margin,
            stall_listeners_ms: args.stall_listeners_ms()?,
            fi: self.fi.clone(),
        })
    }
}

/// `DIR/run.json`: what `buzz-load check` needs to know of the run.
fn write_run_json(
    dir: &std::path::Path,
    run_id: &str,
    start_ms: u64,
    plan: &Plan,
    channels: &Channels,
    names: &[String],
    reconnect: bool,
) -> Result<()> {
    let run = json!({
        "run_id": run_id,
        "start_unix_ms": start_ms,
        "duration_ms": u64::try_from(plan.duration.as_millis()).unwrap_or(u64::MAX),
        "drain_ms": u64::try_from(plan.drain.as_millis()).unwrap_or(u64::MAX),
        "channel": channels.open,
        "private_channel": channels.private.as_ref().map(|p| &p.0),
        "private_members": channels.private.as_ref().map(|p| &p.1),
        "workers": names,
        "reconnect": reconnect,
    });
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("run.json"), run.to_string())
        .with_context(|| format!("writing {}/run.json", dir.display()))
}

/// The NIP-FI flipper's tally (`None`: it did not finish in time).
fn report_flips(flips: Option<Flips>) {
    match flips {
        Some(f) => eprintln!(
            "{WHO}: fi flips: {} answered, {} attempt(s) retried, {} refused",
            f.ok, f.retries, f.failed
        ),
        None => eprintln!("{WHO}: the fi flipper did not finish"),
    }
}

/// Prints the report and writes its JSON and SVG plot where asked.
fn write_report(args: &CoordinatorArgs, report: &DistReport) -> Result<()> {
    print!("{report}");
    if let Some(path) = &args.json {
        report.write_json(path).with_context(|| format!("writing {}", path.display()))?;
        println!("  JSON report written to {}", path.display());
    }
    if let Some(path) = &args.svg {
        let title = format!("buzz-load {:?}, {} worker(s)", report.plan.scenario, report.workers.len());
        std::fs::write(path, svg::render(&title, &report.headline, &report.timeline))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("  SVG plot written to {}", path.display());
    }
    Ok(())
}
