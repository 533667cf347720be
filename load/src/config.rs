//! Command-line flags and the validated run configuration.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Parser, ValueEnum};
use serde::Serialize;

/// Longest run the tool accepts, so that every run stops by itself.
pub const MAX_DURATION_SECS: f64 = 3600.0;
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

/// Load generator for buzz-relay and other Nostr relays.
///
/// Opens N publisher connections that publish signed kind-9 events into one channel and M
/// subscriber connections subscribed to it, then reports accepted events/s, rejections, OK latency
/// (EVENT sent → OK received) and live delivery latency (EVENT sent → a subscriber receives it).
/// Every run is bounded: the send window ends after --duration seconds or --events events, then
/// outstanding OKs and deliveries get --drain-timeout seconds.
#[derive(Debug, Clone, Parser)]
#[command(name = "buzz-load", version)]
pub struct Args {
    /// Relay WebSocket URL (ws:// only). Repeat to spread connections round-robin over several
    /// gateways serving the same community; only these addresses are contacted.
    #[arg(long = "url", value_name = "URL", action = ArgAction::Append,
          default_value = "ws://127.0.0.1:7777")]
    pub urls: Vec<String>,

    /// Target relay kind: `plain` for generic NIP-01 relays, `buzz` for buzz-relay.
    #[arg(long, value_enum, default_value_t = Mode::Plain)]
    pub mode: Mode,

    /// Fixed Host header for every WebSocket and HTTP request (buzz-relay binds the community by
    /// Host). Default: each URL's own host:port.
    #[arg(long, value_name = "HOST")]
    pub host_header: Option<String>,

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

    /// Seconds allowed for each connect, AUTH, EOSE wait and HTTP setup request.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub connect_timeout: f64,

    /// Seconds after which an EVENT without an OK counts as timed out.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub ok_timeout: f64,

    /// Seconds to wait after the send window for outstanding OKs and deliveries.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub drain_timeout: f64,

    /// buzz mode: the community owner's secret key (64 hex); used to add one member per connection
    /// and to create the load channel. Generated when --operator-url is given without it.
    #[arg(long, value_name = "HEX", env = "BUZZ_LOAD_OWNER_SECRET", hide_env_values = true)]
    pub owner_secret: Option<String>,

    /// buzz mode: operator API base URL (e.g. http://127.0.0.1:9000); when given, a new community
    /// for the Host is provisioned first with `POST <operator-url>/operator/communities`.
    #[arg(long, value_name = "URL")]
    pub operator_url: Option<String>,

    /// buzz mode: the operator's secret key (64 hex) for NIP-98 auth on the operator API.
    #[arg(long, value_name = "HEX", env = "BUZZ_LOAD_OPERATOR_SECRET", hide_env_values = true)]
    pub operator_secret: Option<String>,

    /// Also write the report as JSON to this path.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Exit non-zero unless every event was accepted and delivered to every subscriber (a smoke
    /// test, e.g. the chart's `helm test`).
    #[arg(long)]
    pub require_complete: bool,
}

/// One place to connect to: the socket URL and the Host header to send there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Target {
    /// `ws://authority/path` as given.
    pub url: String,
    /// The URL's `host[:port]`: where the socket goes.
    pub authority: String,
    /// The Host header value (and the host in AUTH `relay` tags and NIP-98 `u` tags).
    pub host: String,
}

impl Target {
    /// `http://<authority>` for HTTP requests to the same gateway.
    #[must_use]
    pub fn http_base(&self) -> String {
        format!("http://{}", self.authority)
    }
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
    pub owner_secret: Option<String>,
    pub operator_url: Option<String>,
    pub operator_secret: Option<String>,
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

fn secs(name: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > MAX_DURATION_SECS {
        bail!("--{name} must be > 0 and <= {MAX_DURATION_SECS} seconds, got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// Splits `ws://authority/path` and returns the authority. Only plain `ws://` is supported.
pub fn ws_authority(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("ws://")
        .with_context(|| format!("unsupported URL {url:?}: only ws://host[:port][/path] is supported"))?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.is_empty() || authority.contains(['@', ' ']) {
        bail!("bad host in URL {url:?}");
    }
    Ok(authority.to_string())
}

fn check_http_url(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("--operator-url must be http://host[:port], got {url:?}"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.contains(['@', ' ']) {
        bail!("bad --operator-url {url:?}");
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// The relays of `--url` (each `ws://` or `wss://`), all addressed with `--host-header` when given.
pub fn targets(urls: &[String], host_header: Option<&str>) -> Result<Vec<Target>> {
    if let Some(h) = host_header {
        if h.is_empty() || h.contains(['/', '@', ' ']) {
            bail!("bad --host-header {h:?}");
        }
    }
    urls.iter()
        .map(|u| {
            let authority = ws_authority(u)?;
            let host = host_header.map_or_else(|| authority.clone(), str::to_owned);
            Ok(Target { url: u.clone(), authority, host })
        })
        .collect()
}

impl TryFrom<Args> for Config {
    type Error = anyhow::Error;

    fn try_from(a: Args) -> Result<Self> {
        if a.urls.is_empty() {
            bail!("at least one --url is needed");
        }
        let targets = targets(&a.urls, a.host_header.as_deref())?;
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
        let operator_url = a.operator_url.as_deref().map(check_http_url).transpose()?;
        if operator_url.is_some() && a.operator_secret.is_none() {
            bail!("--operator-url needs --operator-secret");
        }
        if a.mode == Mode::Buzz && a.owner_secret.is_none() && operator_url.is_none() {
            bail!("--mode buzz needs --owner-secret, or --operator-url with --operator-secret");
        }
        if a.mode == Mode::Plain && (a.owner_secret.is_some() || operator_url.is_some()) {
            bail!("--owner-secret / --operator-url only apply to --mode buzz");
        }
        Ok(Self {
            mode: a.mode,
            targets,
            host_header: a.host_header,
            publishers: a.publishers,
            subscribers: a.subscribers,
            rate: a.rate,
            in_flight,
            duration,
            events: a.events,
            content_bytes: a.content_bytes,
            connect_timeout: secs("connect-timeout", a.connect_timeout)?,
            ok_timeout: secs("ok-timeout", a.ok_timeout)?,
            drain_timeout: secs("drain-timeout", a.drain_timeout)?,
            owner_secret: a.owner_secret,
            operator_url,
            operator_secret: a.operator_secret,
            json: a.json,
            require_complete: a.require_complete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> Result<Config> {
        let mut v = vec!["buzz-load"];
        v.extend_from_slice(args);
        Config::try_from(Args::try_parse_from(v)?)
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

    #[test]
    fn authority_parsing() -> Result<()> {
        assert_eq!(ws_authority("ws://localhost:7777")?, "localhost:7777");
        assert_eq!(ws_authority("ws://[::1]:7777/x?y")?, "[::1]:7777");
        assert!(ws_authority("ws:///x").is_err());
        Ok(())
    }
}
