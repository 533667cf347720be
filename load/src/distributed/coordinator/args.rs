//! Flags of `buzz-load coordinator`, checked into a [`Plan`].

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::distributed::plan::{Knobs, Part, PartKind, Plan, Scenario, Weights};
use crate::distributed::proto::check_token;
use crate::flags::{secs, CommunityFlags, RelayFlags, Target};

/// Coordinator of a distributed run: prepares the community, assigns scenario shares to workers
/// over NATS, merges their histograms and writes the summary, JSON report and SVG plot.
#[derive(Debug, Clone, Parser)]
pub struct CoordinatorArgs {
    /// NATS server the coordinator and its workers meet on.
    #[arg(long, env = "NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// Run id: subjects are `buzzload.<run-id>.*`, so runs never hear each other [default: random].
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Workers started separately (`buzz-load worker --run-id ID`) to wait for.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub workers: usize,
    /// Workers to start as child processes of this binary (added to --workers).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub spawn_workers: usize,
    /// The workload: chat, fanout, artifacts, queries, snapshot, storm, idle or workday.
    #[arg(long, value_enum, default_value_t = Scenario::Chat)]
    pub scenario: Scenario,
    /// The gateways (`--url`, `--host-header`, `--connect-timeout`).
    #[command(flatten)]
    pub relay: RelayFlags,
    /// The community (`--owner-secret`, or `--operator-url` with `--operator-secret`).
    #[command(flatten)]
    pub community: CommunityFlags,
    /// Measured window in seconds (max 3600).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds after the window for outstanding OKs and deliveries.
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub drain_timeout: f64,
    /// Client connections of the scenario [default: chat 4, artifacts 4, queries 4, snapshot 2,
    /// storm 8, idle 100, workday 20; fanout always has one writer].
    #[arg(long, value_name = "N")]
    pub clients: Option<usize>,
    /// Subscriber connections on the load channel (delivery latency) [default: fanout 1000, else 0].
    #[arg(long, value_name = "N")]
    pub subscribers: Option<usize>,
    /// Target total rate: events/s (chat, fanout writer; default fanout 20) or connects/s (storm).
    #[arg(long, value_name = "PER_SEC")]
    pub rate: Option<f64>,
    /// chat: EVENTs awaiting their OK per connection.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub in_flight: usize,
    /// artifacts: updates after each create.
    #[arg(long, value_name = "N", default_value_t = 9)]
    pub chain: usize,
    /// artifacts: share of updates sent with a stale `prev` on purpose (answered `conflict:`).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1)]
    pub conflict_share: f64,
    /// queries, snapshot: artifacts each worker creates before the window (so queries find some).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub seed_artifacts: usize,
    /// workday: client weights, e.g. `chat=50,artifacts=25,queries=15,snapshot=5,storm=5`.
    #[arg(long, value_name = "LIST", default_value = "chat=50,artifacts=25,queries=15,snapshot=5,storm=5")]
    pub weights: String,
    /// workday: multiply every think time by this (0.1 = ten times as busy a team), except the
    /// snapshot clients' (the relay's capture quotas bound those).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub think_scale: f64,
    /// snapshot: member keys each capturing client takes turns with, capture by capture (the
    /// relay allows two live captures per reader, for their 300 s lifetime) [default: 1, its own].
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub snapshot_readers: usize,
    /// Distinct member keys at most; connections beyond share keys round-robin.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub max_members: usize,
    /// Seconds to wait for every worker to say hello and to get ready.
    #[arg(long, value_name = "SECS", default_value_t = 120.0)]
    pub worker_timeout: f64,
    /// Write the JSON report here.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write the SVG plot (latency percentiles and throughput over time) here.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Write each worker's audit trail (acked ids, refusals by prefix, listener sessions and
    /// received ids, snapshot outcomes) to `DIR/<worker>.ndjson`, and the run to `DIR/run.json`;
    /// `buzz-load check` judges it.
    #[arg(long, value_name = "DIR")]
    pub audit: Option<PathBuf>,
    /// Clients behave as a real client behind a Service: a socket the relay closes is opened
    /// again (to another gateway), writes without a final answer are resent (same event id),
    /// `error:` answers are resent, listeners subscribe again with a `since` covering the gap.
    #[arg(long)]
    pub reconnect: bool,
    /// Gateways are read from this file (one ws:// URL a line) at every connect, instead of the
    /// fixed --url list: the ready endpoints of a Service, kept by whoever runs the relay.
    #[arg(long, value_name = "PATH")]
    pub endpoints_file: Option<PathBuf>,
    /// --reconnect: seconds before the lost subscription's end that a listener's new `since` goes
    /// back (events are acknowledged after their `created_at`, writes may be resent late).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub replay_margin: u64,
    /// `AT:FOR` (seconds): every other listener stops reading its socket AT seconds into the
    /// window, for FOR seconds, then reads on (the fault suite's clients that stop reading).
    #[arg(long, value_name = "AT:FOR")]
    pub stall_listeners: Option<String>,
    /// The `fi` part (`--weights ...,fi=N`): the issuer its evidence names (the relay must trust
    /// it: `buzz-load fi-issuers`, and select it as the provision binding). The part's community
    /// is provisioned at `fi-<Host>`, so the Host must be a DNS name (`--host-header`).
    #[arg(long, value_name = "URL")]
    pub fi_issuer: Option<String>,
    /// The `fi` part: the seed of the issuer's keys (as given to `buzz-load fi-issuers`).
    #[arg(long, value_name = "SEED", hide_env_values = true)]
    pub fi_seed: Option<String>,
    /// The `fi` part: seconds between the flips (enable, disable, ...) of the second community.
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub fi_flip_every: f64,
}

impl CoordinatorArgs {
    /// `--stall-listeners AT:FOR` in ms.
    pub fn stall_listeners_ms(&self) -> Result<Option<(u64, u64)>> {
        let Some(v) = &self.stall_listeners else { return Ok(None) };
        let ms = |x: &str| -> Result<u64> {
            let s: f64 =
                x.trim().parse().with_context(|| format!("--stall-listeners {v:?}: {x:?} is not seconds"))?;
            if !s.is_finite() || s < 0.0 {
                bail!("--stall-listeners {v:?}: {x:?} is not seconds");
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // finite, >= 0
            Ok((s * 1000.0) as u64)
        };
        let (at, dur) =
            v.split_once(':').with_context(|| format!("--stall-listeners {v:?} is not AT:FOR"))?;
        Ok(Some((ms(at)?, ms(dur)?)))
    }

    /// Checks every flag; the error text is what the user sees (exit code 2).
    pub fn validate(&self) -> Result<Plan> {
        if self.workers + self.spawn_workers == 0 {
            bail!("no workers: give --spawn-workers N and/or --workers N");
        }
        if self.workers + self.spawn_workers > 256 {
            bail!("at most 256 workers");
        }
        if let Some(id) = &self.run_id {
            check_token("run-id", id)?;
        }
        let targets = self.relay.targets()?;
        if !self.community.names_a_community() {
            bail!("needs --owner-secret, or --operator-url with --operator-secret");
        }
        self.community.check_keys()?;
        self.community.operator_url()?;
        self.check_knobs()?;
        secs("worker-timeout", self.worker_timeout)?;
        let weights = Weights::parse(&self.weights)?;
        secs("fi-flip-every", self.fi_flip_every)?;
        let plan = self.plan(targets, &weights)?;
        let fi_ready =
            self.community.operator_url.is_some() && self.fi_issuer.is_some() && self.fi_seed.is_some();
        if plan.parts.iter().any(|p| p.kind == PartKind::Fi) && !fi_ready {
            bail!("the fi part needs --operator-url, --fi-issuer and --fi-seed");
        }
        Ok(plan)
    }

    /// Checks the scenario knobs clap cannot.
    fn check_knobs(&self) -> Result<()> {
        if let Some(r) = self.rate {
            if !r.is_finite() || r <= 0.0 {
                bail!("--rate must be a positive number per second");
            }
        }
        if self.in_flight == 0 || self.in_flight > 4096 {
            bail!("--in-flight must be 1..=4096");
        }
        if !(0.0..=0.9).contains(&self.conflict_share) {
            bail!("--conflict-share must be between 0 and 0.9");
        }
        if self.max_members == 0 {
            bail!("--max-members must be at least 1");
        }
        if self.clients.is_some_and(|c| c > 100_000) || self.subscribers.is_some_and(|s| s > 100_000) {
            bail!("--clients and --subscribers are at most 100000");
        }
        Ok(())
    }

    /// The plan of these flags (checked one by one already).
    fn plan(&self, targets: Vec<Target>, weights: &Weights) -> Result<Plan> {
        let parts = self.parts(weights)?;
        Ok(Plan {
            scenario: self.scenario,
            targets,
            parts,
            knobs: Knobs {
                in_flight: self.in_flight,
                chain: self.chain,
                conflict_share: self.conflict_share,
                seed_artifacts: self.seed_artifacts,
                snapshot_readers: self.snapshot_readers,
            },
            duration: secs("duration", self.duration)?,
            drain: secs("drain-timeout", self.drain_timeout)?,
            connect_timeout: self.relay.connect_timeout()?,
        })
    }

    /// The client kinds of `--scenario`: think times scaled, listeners added.
    fn parts(&self, weights: &Weights) -> Result<Vec<Part>> {
        let part = |kind, clients, rate| Part { kind, clients, rate, think_ms: 0 };
        let clients = self.clients;
        let mut parts = match self.scenario {
            Scenario::Chat => vec![part(PartKind::Chat, clients.unwrap_or(4), self.rate)],
            Scenario::Fanout => {
                if clients.is_some_and(|c| c != 1) {
                    bail!("--scenario fanout has exactly one writer; use --subscribers");
                }
                vec![part(PartKind::Fanout, 1, Some(self.rate.unwrap_or(20.0)))]
            }
            Scenario::Artifacts => vec![part(PartKind::Artifacts, clients.unwrap_or(4), None)],
            Scenario::Queries => vec![part(PartKind::Queries, clients.unwrap_or(4), None)],
            Scenario::Snapshot => vec![part(PartKind::Snapshot, clients.unwrap_or(2), None)],
            Scenario::Storm => vec![part(PartKind::Storm, clients.unwrap_or(8), self.rate)],
            Scenario::Idle => vec![part(PartKind::Idle, clients.unwrap_or(100), None)],
            Scenario::Workday => weights.parts(clients.unwrap_or(20)),
        };
        if !(0.0..=100.0).contains(&self.think_scale) || !self.think_scale.is_finite() {
            bail!("--think-scale must be between 0 and 100");
        }
        // Snapshot clients keep theirs: the relay's capture quotas bound them, not their pace.
        for p in parts.iter_mut().filter(|p| p.kind != PartKind::Snapshot) {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
            {
                p.think_ms = (p.think_ms as f64 * self.think_scale).round() as u64;
            }
        }
        let listeners = self.subscribers.unwrap_or(if self.scenario == Scenario::Fanout { 1000 } else { 0 });
        if listeners > 0 {
            parts.push(part(PartKind::Listen, listeners, None));
        }
        if parts.iter().all(|p| p.clients == 0) {
            bail!("--clients must be at least 1");
        }
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stall(v: &str) -> Result<Option<(u64, u64)>> {
        CoordinatorArgs::try_parse_from(["c", "--stall-listeners", v])?.stall_listeners_ms()
    }

    #[test]
    fn stall_listeners_is_at_and_for_in_seconds() {
        assert_eq!(stall("8:20").ok(), Some(Some((8000, 20000))));
        assert_eq!(stall("0.5:1.25").ok(), Some(Some((500, 1250))));
        assert!(stall("8").is_err());
        assert!(stall("-1:2").is_err());
        assert!(stall("a:2").is_err());
        assert_eq!(
            CoordinatorArgs::try_parse_from(["c"]).ok().map(|a| a.stall_listeners_ms().ok()),
            Some(Some(None))
        );
    }
}
