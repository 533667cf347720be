//! The one-process tool's flags and its validated run configuration.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::ValueEnum;
use serde::Serialize;

use crate::flags::{secs, CommunityFlags, RelayFlags, Target};

/// Send window when only `--events` is given.
pub const EVENTS_ONLY_DURATION_SECS: f64 = 600.0;
/// Send window when neither `--duration` nor `--events` is given.
pub const DEFAULT_DURATION_SECS: f64 = 10.0;
/// In-flight bound per publisher when `--rate` is given and `--in-flight` is not.
pub const PACED_IN_FLIGHT: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Any NIP-01 relay: no auth, random channel tag.
    Plain,
    /// buzz-relay: NIP-42 AUTH, members added over NIP-98 HTTP, an open channel created first.
    Buzz,
}

/// The one-process tool's flags (`buzz-load [FLAGS]`, no subcommand): N publishers and M
/// subscribers on one channel, for --duration seconds or --events events.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub relay: RelayFlags,

    /// Target relay kind: `plain` for generic NIP-01 relays, `buzz` for buzz-relay.
    #[arg(long, value_enum, default_value_t = Mode::Plain)]
    pub mode: Mode,

    /// Number of publisher connections.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub publishers: usize,

    /// Number of subscriber connections (each subscribes to the load channel).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub subscribers: usize,

    /// Target total publish rate in events/s over all publishers. Omit to publish as fast as the
    /// in-flight bound allows.
    #[arg(long, value_name = "EVENTS_PER_SEC")]
    pub rate: Option<f64>,

    /// Most EVENTs awaiting their OK per publisher connection [default: 1 = closed loop, or 256
    /// with --rate].
    #[arg(long, value_name = "N")]
    pub in_flight: Option<usize>,

    /// Send window in seconds [default: 10, or 600 as a cap when only --events is given; max 3600].
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,

    /// Total events to publish over all publishers; the run stops sending at this count or at the
    /// end of --duration, whichever comes first.
    #[arg(long, value_name = "N")]
    pub events: Option<u64>,

    /// Extra filler bytes in each event's content, beyond a short unique prefix (max 1048576).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub content_bytes: usize,

    /// Seconds after which an EVENT without an OK counts as timed out.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub ok_timeout: f64,

    /// Seconds to wait after the send window for outstanding OKs and deliveries.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub drain_timeout: f64,

    #[command(flatten)]
    pub community: CommunityFlags,

    /// Also write the report as JSON to this path.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Exit non-zero unless every event was accepted and delivered to every subscriber (a smoke
    /// test, e.g. the chart's `helm test`).
    #[arg(long)]
    pub require_complete: bool,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    pub targets: Vec<Target>,
    pub host_header: Option<String>,
    pub publishers: usize,
    pub subscribers: usize,
    pub rate: Option<f64>,
    pub in_flight: usize,
    pub duration: Duration,
    pub events: Option<u64>,
    pub content_bytes: usize,
    pub connect_timeout: Duration,
    pub ok_timeout: Duration,
    pub drain_timeout: Duration,
    /// The community flags, `--operator-url` checked and without a trailing `/`.
    pub community: CommunityFlags,
    pub json: Option<PathBuf>,
    pub require_complete: bool,
}

impl Config {
    /// An upper bound on the whole run (setup, send window, drain), used as a last-resort stop.
    #[must_use]
    pub fn hard_deadline(&self) -> Duration {
        let conns = u32::try_from(self.publishers + self.subscribers).unwrap_or(u32::MAX);
        // Setup: provisioning, members (8 at a time), owner connect/auth/channel, then every
        // connection's connect/auth/EOSE in parallel.
        let setup_steps = conns.div_ceil(8).saturating_add(8);
        self.duration
            + self.drain_timeout * 3
            + self.ok_timeout
            + self.connect_timeout.saturating_mul(setup_steps)
            + Duration::from_secs(10)
    }
}

impl TryFrom<Args> for Config {
    type Error = anyhow::Error;

    fn try_from(a: Args) -> Result<Self> {
        let targets = a.relay.targets()?;
        if a.publishers == 0 {
            bail!("--publishers must be at least 1");
        }
        if let Some(r) = a.rate {
            if !r.is_finite() || r <= 0.0 {
                bail!("--rate must be a positive number of events/s");
            }
        }
        let in_flight = a.in_flight.unwrap_or(if a.rate.is_some() { PACED_IN_FLIGHT } else { 1 });
        if in_flight == 0 {
            bail!("--in-flight must be at least 1");
        }
        if a.content_bytes > 1 << 20 {
            bail!("--content-bytes must be at most 1048576");
        }
        if a.events == Some(0) {
            bail!("--events must be at least 1");
        }
        let duration = match (a.duration, a.events) {
            (Some(d), _) => secs("duration", d)?,
            (None, Some(_)) => Duration::from_secs_f64(EVENTS_ONLY_DURATION_SECS),
            (None, None) => Duration::from_secs_f64(DEFAULT_DURATION_SECS),
        };
        let operator_url = a.community.operator_url()?;
        if a.mode == Mode::Buzz && !a.community.names_a_community() {
            bail!("--mode buzz needs --owner-secret, or --operator-url with --operator-secret");
        }
        if a.mode == Mode::Plain && a.community.names_a_community() {
            bail!("--owner-secret / --operator-url only apply to --mode buzz");
        }
        Ok(Self {
            mode: a.mode,
            targets,
            host_header: a.relay.host_header.clone(),
            publishers: a.publishers,
            subscribers: a.subscribers,
            rate: a.rate,
            in_flight,
            duration,
            events: a.events,
            content_bytes: a.content_bytes,
            connect_timeout: a.relay.connect_timeout()?,
            ok_timeout: secs("ok-timeout", a.ok_timeout)?,
            drain_timeout: secs("drain-timeout", a.drain_timeout)?,
            community: CommunityFlags { operator_url, ..a.community },
            json: a.json,
            require_complete: a.require_complete,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn cfg(args: &[&str]) -> Result<Config> {
        let mut v = vec!["buzz-load"];
        v.extend_from_slice(args);
        Config::try_from(Cli::try_parse_from(v)?.single)
    }

    #[test]
    fn defaults() -> Result<()> {
        let c = cfg(&[])?;
        assert_eq!(c.mode, Mode::Plain);
        assert_eq!(c.targets.len(), 1);
        assert_eq!(c.targets[0].host, "127.0.0.1:7777");
        assert_eq!(c.targets[0].http_base(), "http://127.0.0.1:7777");
        assert_eq!(c.duration, Duration::from_secs(10));
        assert_eq!(c.in_flight, 1);
        assert!(c.hard_deadline() > c.duration);
        Ok(())
    }

    #[test]
    fn multiple_urls_and_host_header() -> Result<()> {
        let c = cfg(&[
            "--url",
            "ws://127.0.0.1:7777",
            "--url",
            "ws://127.0.0.1:7778/",
            "--host-header",
            "team.localhost:7777",
            "--rate",
            "100",
            "--mode",
            "buzz",
            "--owner-secret",
            "ab",
        ])?;
        assert_eq!(c.targets[1].authority, "127.0.0.1:7778");
        assert!(c.targets.iter().all(|t| t.host == "team.localhost:7777"));
        assert_eq!(c.in_flight, PACED_IN_FLIGHT);
        Ok(())
    }

    #[test]
    fn events_only_gets_capped_window() -> Result<()> {
        let c = cfg(&["--events", "100"])?;
        assert_eq!(c.duration, Duration::from_secs(600));
        Ok(())
    }

    #[test]
    fn rejects_bad_input() {
        assert!(cfg(&["--url", "wss://x"]).is_err());
        assert!(cfg(&["--url", "http://x"]).is_err());
        assert!(cfg(&["--duration", "0"]).is_err());
        assert!(cfg(&["--duration", "100000"]).is_err());
        assert!(cfg(&["--publishers", "0"]).is_err());
        assert!(cfg(&["--mode", "buzz"]).is_err());
        assert!(cfg(&["--rate", "-1"]).is_err());
    }
}
