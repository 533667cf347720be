//! Flags of `buzz-load coordinator` and `buzz-load worker`, checked into a [`Plan`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Parser};

use super::plan::{Plan, Scenario, Weights};
use crate::config::MAX_DURATION_SECS;

/// Coordinator of a distributed run: prepares the community, assigns scenario shares to workers
/// over NATS, merges their histograms and writes the summary, JSON report and SVG plot.
#[derive(Debug, Clone, Parser)]
#[command(name = "buzz-load coordinator", bin_name = "buzz-load coordinator", version)]
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
    /// Gateway WebSocket URL (ws:// only); repeat to spread connections over several gateways.
    #[arg(long = "url", value_name = "URL", action = ArgAction::Append, default_value = "ws://127.0.0.1:7777")]
    pub urls: Vec<String>,
    /// Host header naming the community [default: each URL's host:port].
    #[arg(long, value_name = "HOST")]
    pub host_header: Option<String>,
    /// The community owner's secret key (64 hex); generated when --operator-url is given without it.
    #[arg(long, value_name = "HEX", env = "BUZZ_LOAD_OWNER_SECRET", hide_env_values = true)]
    pub owner_secret: Option<String>,
    /// Operator API base URL: provision a new community for the Host first.
    #[arg(long, value_name = "URL")]
    pub operator_url: Option<String>,
    /// The operator's secret key (64 hex) for the operator API.
    #[arg(long, value_name = "HEX", env = "BUZZ_LOAD_OPERATOR_SECRET", hide_env_values = true)]
    pub operator_secret: Option<String>,
    /// Measured window in seconds (max 3600).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub duration: f64,
    /// Seconds after the window for outstanding OKs and deliveries.
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    pub drain_timeout: f64,
    /// Seconds allowed for each connect, AUTH, EOSE wait and HTTP request.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub connect_timeout: f64,
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

/// One worker of a distributed run: connects to NATS, says hello under the run id, runs the share
/// it is assigned, streams histograms every second and exits when the run is over.
#[derive(Debug, Clone, Parser)]
#[command(name = "buzz-load worker", bin_name = "buzz-load worker", version)]
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

/// Checks a seconds flag: positive, finite, at most an hour.
pub(super) fn secs(name: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > MAX_DURATION_SECS {
        bail!("--{name} must be > 0 and <= {MAX_DURATION_SECS} seconds, got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// A run id or worker name: 1–64 of `[A-Za-z0-9_-]` (one NATS subject token).
pub(super) fn check_token(name: &str, v: &str) -> Result<()> {
    if v.is_empty() || v.len() > 64 || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("--{name} must be 1-64 letters, digits, '-' or '_', got {v:?}");
    }
    Ok(())
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
        let targets = crate::config::targets(&self.urls, self.host_header.as_deref())?;
        if self.owner_secret.is_none() && self.operator_url.is_none() {
            bail!("needs --owner-secret, or --operator-url with --operator-secret");
        }
        for (name, secret) in
            [("owner-secret", &self.owner_secret), ("operator-secret", &self.operator_secret)]
        {
            if secret.as_deref().is_some_and(|s| buzz_core::Keys::from_secret_hex(s.trim()).is_none()) {
                bail!("--{name} is not a valid 64-hex secret key");
            }
        }
        if self.operator_url.is_some() && self.operator_secret.is_none() {
            bail!("--operator-url needs --operator-secret");
        }
        if let Some(u) = &self.operator_url {
            let rest = u.strip_prefix("http://").unwrap_or("");
            if rest.is_empty() || rest.starts_with('/') || rest.contains(['@', ' ']) {
                bail!("--operator-url must be http://host[:port], got {u:?}");
            }
        }
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
        secs("worker-timeout", self.worker_timeout)?;
        let weights = Weights::parse(&self.weights)?;
        secs("fi-flip-every", self.fi_flip_every)?;
        let plan = Plan::build(self, targets, &weights)?;
        let fi_ready = self.operator_url.is_some() && self.fi_issuer.is_some() && self.fi_seed.is_some();
        if plan.parts.iter().any(|p| p.kind == super::plan::PartKind::Fi) && !fi_ready {
            bail!("the fi part needs --operator-url, --fi-issuer and --fi-seed");
        }
        Ok(plan)
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
