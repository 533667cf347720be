//! The coordinator: community setup, workers (spawned or external), assignment, start, merging
//! with a progress line per second, and the report.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use buzz_core::Keys;
use futures::StreamExt;
use serde_json::json;

use super::args::CoordinatorArgs;
use super::plan::{assign, Plan, Scenario};
use super::proto::{self, Assignment, ToCoordinator, ToWorker};
use super::session::{member_key, private_member};
use super::summary::{headline, DistReport, WorkerReport};
use super::timeline::Merged;
use crate::client::Conn;
use crate::nostr;
use crate::setup::post_signed;

/// Member additions in flight at once.
const HTTP_CONCURRENCY: usize = 16;
/// Gap between "everyone ready" and the start, so every worker hears it first.
const START_DELAY: Duration = Duration::from_millis(500);

/// Child worker processes, killed if still running when dropped.
struct Children(Vec<Child>);

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

fn parse_secret(name: &str, hex: &str) -> Result<Keys> {
    Keys::from_secret_hex(hex.trim()).ok_or_else(|| anyhow!("{name} is not a valid 64-hex secret key"))
}

/// The channels of a run: the open one, and the workday's private one with its member keys.
struct Channels {
    open: String,
    private: Option<(String, Vec<String>)>,
}

/// Provisions (optionally), adds the member keys, creates the open load channel and, for the
/// workday, the private channel with the member keys of [`private_member`]; returns them.
async fn setup(args: &CoordinatorArgs, plan: &Plan, seed: &str, pool: usize) -> Result<Channels> {
    let http = reqwest::Client::builder().timeout(plan.connect_timeout).build().context("HTTP client")?;
    let first = plan.targets.first().context("no target")?;
    let owner = match &args.owner_secret {
        Some(s) => parse_secret("--owner-secret", s)?,
        None => {
            let k = Keys::generate();
            eprintln!("buzz-load coordinator: generated community owner key, secret {}", k.secret_hex());
            k
        }
    };
    if let Some(op_url) = &args.operator_url {
        let op = parse_secret("--operator-secret", args.operator_secret.as_deref().unwrap_or(""))?;
        let url = format!("{}/operator/communities", op_url.trim_end_matches('/'));
        let body = json!({"community_id": uuid::Uuid::new_v4().to_string(), "host": first.host, "owner_pubkey": owner.public_hex()});
        post_signed(&http, &op, &url, &url, None, &body).await.context("provisioning the community")?;
    }
    let url = format!("{}/api/members", first.http_base());
    // https is always accepted (http only for loopback hosts).
    let signed_url = format!("https://{}/api/members", first.host);
    let host = (first.host != first.authority).then_some(first.host.as_str());
    let started = Instant::now();
    let results: Vec<Result<()>> = futures::stream::iter(0..pool)
        .map(|i| {
            let body = json!({"pubkey": member_key(seed, i).public_hex(), "role": "member"});
            let (http, owner, url, signed_url) = (&http, &owner, &url, &signed_url);
            async move { post_signed(http, owner, url, signed_url, host, &body).await }
        })
        .buffer_unordered(HTTP_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>().context("adding members")?;
    if !args.quiet {
        eprintln!(
            "buzz-load coordinator: {pool} member(s) added in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    let channel = nostr::buzz_channel_id();
    let mut conn = Conn::connect(first, plan.connect_timeout).await?;
    conn.authenticate(&owner, plan.connect_timeout).await.context("owner AUTH")?;
    conn.publish_and_confirm(&nostr::create_channel_event(&owner, &channel), plan.connect_timeout)
        .await
        .context("creating the load channel")?;
    let private = if plan.scenario == Scenario::Workday {
        let id = nostr::buzz_channel_id();
        let t = plan.connect_timeout;
        conn.publish_and_confirm(&nostr::create_private_channel_event(&owner, &id), t)
            .await
            .context("creating the private channel")?;
        let members: Vec<String> =
            (0..pool).filter(|i| private_member(*i)).map(|i| member_key(seed, i).public_hex()).collect();
        for pk in &members {
            conn.publish_and_confirm(&nostr::put_user_event(&owner, &id, pk), t)
                .await
                .context("adding a private-channel member")?;
        }
        Some((id, members))
    } else {
        None
    };
    conn.close(Duration::from_secs(1)).await;
    Ok(Channels { open: channel, private })
}

fn spawn_workers(args: &CoordinatorArgs, run_id: &str) -> Result<Children> {
    let exe = std::env::current_exe().context("this program's path")?;
    let mut children = Children(Vec::new());
    for i in 0..args.spawn_workers {
        let child = Command::new(&exe)
            .args(["worker", "--nats-url", &args.nats_url, "--run-id", run_id, "--name", &format!("w{i}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting worker {i} ({})", exe.display()))?;
        children.0.push(child);
    }
    Ok(children)
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

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

/// Runs a whole distributed run and returns its report (also printed, and written where asked).
pub async fn run_coordinator(args: &CoordinatorArgs, plan: Plan) -> Result<DistReport> {
    let run_id =
        args.run_id.clone().unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_owned());
    let n = args.workers + args.spawn_workers;
    let nats = proto::connect(&args.nats_url).await?;
    let mut inbox = nats.subscribe(proto::coord_subject(&run_id)).await?;
    let seed = uuid::Uuid::new_v4().simple().to_string();
    let pool = plan.connections().min(args.max_members).max(1);
    let Channels { open: channel, private } = setup(args, &plan, &seed, pool).await?;
    let fi = super::fi_flip::prepare(args, &plan, &seed, pool).await?;
    let _children = spawn_workers(args, &run_id)?;
    if !args.quiet {
        eprintln!("buzz-load coordinator: run {run_id}, waiting for {n} worker(s)");
    }
    let worker_timeout = Duration::from_secs_f64(args.worker_timeout);
    let send = |worker: &str, m: &ToWorker| {
        let subject = proto::worker_subject(&run_id, worker);
        let payload = proto::encode(m);
        let nats = nats.clone();
        async move {
            nats.publish(subject, payload?).await?;
            anyhow::Ok(())
        }
    };

    // Hellos, then assignments in order of arrival. NATS delivers at most once: a worker that
    // says hello again did not get its assignment, so it is sent again (here and while waiting
    // for everyone to be ready).
    let mut names: Vec<String> = Vec::new();
    let mut assigned: BTreeMap<String, ToWorker> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + worker_timeout;
    while names.len() < n {
        let msg = tokio::time::timeout_at(deadline, inbox.next())
            .await
            .map_err(|_| {
                anyhow!("only {} of {n} worker(s) said hello within {worker_timeout:?}", names.len())
            })?
            .context("NATS subscription ended")?;
        if let Ok(ToCoordinator::Hello { worker }) = proto::decode(&msg.payload) {
            if let Some(again) = assigned.get(&worker) {
                send(&worker, again).await?;
            } else {
                let a = Assignment {
                    index: names.len(),
                    workers: n,
                    targets: plan.targets.clone(),
                    key_seed: seed.clone(),
                    key_pool: pool,
                    channel: channel.clone(),
                    private_channel: private.as_ref().map(|p| p.0.clone()),
                    shares: assign(&plan, n, names.len()),
                    knobs: plan.knobs,
                    duration_ms: u64::try_from(plan.duration.as_millis()).unwrap_or(u64::MAX),
                    drain_ms: u64::try_from(plan.drain.as_millis()).unwrap_or(u64::MAX),
                    connect_timeout_ms: u64::try_from(plan.connect_timeout.as_millis()).unwrap_or(u64::MAX),
                    audit_dir: args.audit.as_ref().map(|p| p.display().to_string()),
                    reconnect: args.reconnect,
                    endpoints_file: args.endpoints_file.as_ref().map(|p| p.display().to_string()),
                    replay_margin_s: args.replay_margin,
                    stall_listeners_ms: args.stall_listeners_ms()?,
                    fi: fi.as_ref().map(|f| f.assignment.clone()),
                };
                let assign = ToWorker::Assign(Box::new(a));
                send(&worker, &assign).await?;
                assigned.insert(worker.clone(), assign);
                names.push(worker);
            }
        }
    }

    // Ready (connections open) from everyone.
    let mut workers: BTreeMap<String, WorkerReport> = names
        .iter()
        .map(|w| {
            let r = WorkerReport {
                name: w.clone(),
                connected: BTreeMap::new(),
                failed_connections: 0,
                totals: None,
                error: None,
            };
            (w.clone(), r)
        })
        .collect();
    // Workers repeat Ready until the start (it may be lost too): each counts once.
    let mut ready_workers = std::collections::BTreeSet::new();
    let mut ready = 0;
    let deadline = tokio::time::Instant::now() + worker_timeout;
    while ready < n {
        let msg = tokio::time::timeout_at(deadline, inbox.next())
            .await
            .map_err(|_| anyhow!("only {ready} of {n} worker(s) got ready within {worker_timeout:?}"))?
            .context("NATS subscription ended")?;
        match proto::decode(&msg.payload) {
            Ok(ToCoordinator::Ready { worker, connected, failed }) => {
                if let Some(w) = workers.get_mut(&worker) {
                    if ready_workers.insert(worker) {
                        w.connected = connected;
                        w.failed_connections = failed;
                        ready += 1;
                    }
                }
            }
            Ok(ToCoordinator::Hello { worker }) => {
                if let Some(again) = assigned.get(&worker) {
                    send(&worker, again).await?;
                }
            }
            Ok(ToCoordinator::Failed { worker, error }) => {
                let _ = nats.publish(proto::all_subject(&run_id), proto::encode(&ToWorker::Abort)?).await;
                bail!("worker {worker} failed while preparing: {error}");
            }
            _ => {}
        }
    }
    let start_ms = unix_ms() + u64::try_from(START_DELAY.as_millis()).unwrap_or(500);
    nats.publish(proto::all_subject(&run_id), proto::encode(&ToWorker::Start { start_unix_ms: start_ms })?)
        .await?;
    let start = Instant::now() + START_DELAY;
    let window_end = start + plan.duration;
    let flips = fi.map(|f| tokio::spawn(f.flipper.run(start, window_end, window_end + plan.drain)));
    if let Some(dir) = &args.audit {
        let run = json!({
            "run_id": run_id,
            "start_unix_ms": start_ms,
            "duration_ms": u64::try_from(plan.duration.as_millis()).unwrap_or(u64::MAX),
            "drain_ms": u64::try_from(plan.drain.as_millis()).unwrap_or(u64::MAX),
            "channel": channel,
            "private_channel": private.as_ref().map(|p| &p.0),
            "private_members": private.as_ref().map(|p| &p.1),
            "workers": names,
            "reconnect": args.reconnect,
        });
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("run.json"), run.to_string())
            .with_context(|| format!("writing {}/run.json", dir.display()))?;
    }
    if !args.quiet {
        let conns: u64 = workers.values().flat_map(|w| w.connected.values()).sum();
        eprintln!("buzz-load coordinator: {n} worker(s) ready with {conns} connection(s); starting");
    }

    // Windows until every worker is done (or failed), bounded.
    let mut merged = Merged::default();
    let head = headline(plan.scenario);
    let end_by = tokio::time::Instant::from_std(start + plan.duration + plan.drain + Duration::from_secs(30));
    let mut finished = 0;
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::from_std(start + Duration::from_millis(1300)),
        Duration::from_secs(1),
    );
    while finished < n {
        tokio::select! {
            msg = inbox.next() => {
                let Some(msg) = msg else { break };
                match proto::decode(&msg.payload) {
                    Ok(ToCoordinator::Interval(i)) => {
                        if let Err(e) = merged.add(&i) {
                            merged.errors.add(&format!("coordinator: {e:#}"));
                        }
                    }
                    Ok(ToCoordinator::Done { worker, totals }) => {
                        if let Some(w) = workers.get_mut(&worker) {
                            if w.totals.is_none() {
                                w.totals = Some(totals);
                                finished += 1;
                            }
                        }
                    }
                    // Still saying Ready: it missed the start (at most once delivery); the
                    // start instant is absolute, so the same message is sent again.
                    Ok(ToCoordinator::Ready { .. }) => {
                        let again = proto::encode(&ToWorker::Start { start_unix_ms: start_ms })?;
                        let _ = nats.publish(proto::all_subject(&run_id), again).await;
                    }
                    Ok(ToCoordinator::Failed { worker, error }) => {
                        if let Some(w) = workers.get_mut(&worker) {
                            if w.error.is_none() {
                                w.error = Some(error);
                                finished += 1;
                            }
                        }
                    }
                    _ => {}
                }
            }
            _ = tick.tick(), if !args.quiet => {
                let elapsed = start.elapsed().as_secs_f64();
                let second = start.elapsed().as_secs().saturating_sub(1);
                eprintln!("{}", progress(&merged, second, head, elapsed));
            }
            () = tokio::time::sleep_until(end_by) => {
                let _ = nats.publish(proto::all_subject(&run_id), proto::encode(&ToWorker::Abort)?).await;
                break;
            }
        }
    }
    if let Some(h) = flips {
        match tokio::time::timeout(plan.drain + Duration::from_secs(20), h).await {
            Ok(Ok(f)) => eprintln!(
                "buzz-load coordinator: fi flips: {} answered, {} attempt(s) retried, {} refused",
                f.ok, f.retries, f.failed
            ),
            _ => eprintln!("buzz-load coordinator: the fi flipper did not finish"),
        }
    }
    let report = DistReport::build(run_id, plan, &merged, workers.into_values().collect());
    print!("{report}");
    if let Some(path) = &args.json {
        report.write_json(path).with_context(|| format!("writing {}", path.display()))?;
        println!("  JSON report written to {}", path.display());
    }
    if let Some(path) = &args.svg {
        let title = format!("buzz-load {:?}, {} worker(s)", report.plan.scenario, report.workers.len());
        std::fs::write(path, super::svg::render(&title, &report.headline, &report.timeline))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("  SVG plot written to {}", path.display());
    }
    Ok(report)
}
