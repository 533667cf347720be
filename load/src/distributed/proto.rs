//! The messages of a distributed run and their subjects. Everything a worker says goes to one
//! subject (`buzzload.<run>.coord`), so NATS keeps each worker's messages in order (its last
//! window arrives before its `done`); the coordinator talks to each worker on
//! `buzzload.<run>.worker.<name>` and to all on `buzzload.<run>.all`.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::distributed::metrics::{Counts, Window};
use crate::distributed::plan::{Knobs, PartShare};
use crate::flags::Target;
use crate::latency::{Latency, Reasons};

/// Subject the workers publish to.
#[must_use]
pub fn coord_subject(run: &str) -> String {
    format!("buzzload.{run}.coord")
}

/// Subject of one worker's assignment.
#[must_use]
pub fn worker_subject(run: &str, worker: &str) -> String {
    format!("buzzload.{run}.worker.{worker}")
}

/// Subject every worker listens to (start, abort).
#[must_use]
pub fn all_subject(run: &str) -> String {
    format!("buzzload.{run}.all")
}

/// Checks a run id or worker name flag: 1–64 of `[A-Za-z0-9_-]` (one NATS subject token).
pub fn check_token(name: &str, v: &str) -> Result<()> {
    if v.is_empty() || v.len() > 64 || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("--{name} must be 1-64 letters, digits, '-' or '_', got {v:?}");
    }
    Ok(())
}

/// One operation of one window on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireOp {
    /// Outcome counts.
    pub counts: Counts,
    /// The latency histogram (V2, base64).
    pub hist: String,
}

/// One second of one worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interval {
    /// The worker.
    pub worker: String,
    /// Seconds since the start (window `[second, second + 1)`; setup samples land in 0).
    pub second: u64,
    /// Per operation.
    pub ops: BTreeMap<String, WireOp>,
    /// Error reasons with counts.
    pub errors: Vec<(String, u64)>,
}

impl Interval {
    /// Packs `w` for the wire.
    pub fn pack(worker: &str, second: u64, w: &Window) -> Result<Self> {
        let mut ops = BTreeMap::new();
        for (name, op) in &w.ops {
            ops.insert(name.clone(), WireOp { counts: op.counts, hist: op.latency.to_base64()? });
        }
        let mut errors = w.errors.first.clone();
        if w.errors.others > 0 {
            errors.push(("(other reasons)".to_owned(), w.errors.others));
        }
        Ok(Self { worker: worker.to_owned(), second, ops, errors })
    }

    /// Unpacks the histograms.
    pub fn unpack(&self) -> Result<(OpsByName, Reasons)> {
        let mut ops = BTreeMap::new();
        for (name, op) in &self.ops {
            let h = Latency::from_base64(&op.hist).with_context(|| format!("histogram of {name}"))?;
            ops.insert(name.clone(), (op.counts, h));
        }
        let mut errors = Reasons::default();
        for (r, n) in &self.errors {
            errors.add_n(r, *n);
        }
        Ok((ops, errors))
    }
}

/// Unpacked operations of one window: counts and histogram by name.
pub type OpsByName = BTreeMap<String, (Counts, Latency)>;

/// Worker → coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToCoordinator {
    /// A worker is listening on its subject (sent until it is assigned).
    Hello {
        /// Its name.
        worker: String,
    },
    /// Connections are open; per part kind, how many.
    Ready {
        /// Its name.
        worker: String,
        /// Open connections by part (`listen`, `idle`, ...).
        connected: BTreeMap<String, u64>,
        /// Connections that failed to open.
        failed: u64,
    },
    /// One window of measurements.
    Interval(Interval),
    /// The worker finished; its running totals (the check against the merged windows).
    Done {
        /// Its name.
        worker: String,
        /// Totals per operation.
        totals: BTreeMap<String, Counts>,
    },
    /// The worker gave up.
    Failed {
        /// Its name.
        worker: String,
        /// Why.
        error: String,
    },
}

/// Coordinator → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// The worker's share of the run.
    Assign(Box<Assignment>),
    /// Go: the window starts at this wall-clock instant (ms since the epoch).
    Start {
        /// Start instant.
        start_unix_ms: u64,
    },
    /// Stop now (the coordinator gave up).
    Abort,
}

/// What a worker runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Assignment {
    /// Its position among the workers.
    pub index: usize,
    /// How many workers.
    pub workers: usize,
    /// Gateways.
    pub targets: Vec<Target>,
    /// Member keys are derived from this seed (see `session::member_keys`).
    pub key_seed: String,
    /// How many distinct member keys exist.
    pub key_pool: usize,
    /// The open channel everything happens in.
    pub channel: String,
    /// The members-only channel of the workday (`None` elsewhere): member keys are those of
    /// [`crate::distributed::members::private_member`]; they write part of their chat and
    /// artifacts there.
    #[serde(default)]
    pub private_channel: Option<String>,
    /// The worker's shares.
    pub shares: Vec<PartShare>,
    /// Shared knobs.
    pub knobs: Knobs,
    /// Window, drain and connect timeout in milliseconds.
    pub duration_ms: u64,
    /// Drain after the window.
    pub drain_ms: u64,
    /// Connect/AUTH/EOSE/HTTP timeout.
    pub connect_timeout_ms: u64,
    /// Audit trail directory (`--audit`).
    #[serde(default)]
    pub audit_dir: Option<String>,
    /// Reconnect, resend and replay (`--reconnect`).
    #[serde(default)]
    pub reconnect: bool,
    /// File of gateway URLs read at every connect (`--endpoints-file`).
    #[serde(default)]
    pub endpoints_file: Option<String>,
    /// Seconds a listener's new `since` goes back (`--replay-margin`).
    #[serde(default)]
    pub replay_margin_s: u64,
    /// Every other listener (even index) stops reading `(at_ms, for_ms)` into the window
    /// (`--stall-listeners`).
    #[serde(default)]
    pub stall_listeners_ms: Option<(u64, u64)>,
    /// The NIP-FI part's community and issuer (the `fi` weight).
    #[serde(default)]
    pub fi: Option<FiAssignment>,
}

/// Where the NIP-FI part's sockets go and how their evidence is minted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FiAssignment {
    /// The Host of the second community, whose requirement the coordinator flips.
    pub host: String,
    /// The issuer evidence names (`iss`).
    pub issuer: String,
    /// The seed of the issuer's keys (`buzz_fi::testing::TestIssuer::from_seed`).
    pub seed: String,
}

/// Connects to NATS at `url`; `NATS_CREDS_FILE` and `NATS_CA_FILE` (as the services read them)
/// add credentials and a CA, and a `tls://` URL requires TLS.
pub async fn connect(url: &str) -> Result<async_nats::Client> {
    let mut options = async_nats::ConnectOptions::new()
        .name("buzz-load")
        .connection_timeout(std::time::Duration::from_secs(5));
    if let Some(path) = std::env::var_os("NATS_CREDS_FILE").filter(|p| !p.is_empty()) {
        options = options.credentials_file(path).await.context("reading NATS_CREDS_FILE")?;
    }
    if let Some(path) = std::env::var_os("NATS_CA_FILE").filter(|p| !p.is_empty()) {
        options = options.add_root_certificates(path.into());
    }
    if url.starts_with("tls://") {
        options = options.require_tls(true);
    }
    options.connect(url).await.with_context(|| format!("NATS at {url}"))
}

/// Serializes a message.
pub fn encode<T: Serialize>(m: &T) -> Result<bytes::Bytes> {
    Ok(serde_json::to_vec(m).context("encoding a bus message")?.into())
}

/// Parses a message.
pub fn decode<T: for<'de> Deserialize<'de>>(b: &[u8]) -> Result<T> {
    serde_json::from_slice(b).context("decoding a bus message")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributed::metrics::Recorder;
    use std::time::Duration;

    #[test]
    fn an_interval_round_trips_with_its_histograms() -> Result<()> {
        let r = Recorder::default();
        r.ok("chat", Duration::from_millis(3));
        r.error("chat", "closed");
        let msg = ToCoordinator::Interval(Interval::pack("w1", 4, &r.take())?);
        let back: ToCoordinator = decode(&encode(&msg)?)?;
        let ToCoordinator::Interval(i) = back else { anyhow::bail!("wrong variant") };
        assert_eq!((i.worker.as_str(), i.second), ("w1", 4));
        let (ops, errors) = i.unpack()?;
        assert_eq!(ops["chat"].0, Counts { ok: 1, errors: 1, conflicts: 0 });
        assert_eq!(ops["chat"].1.count(), 1);
        assert_eq!(errors.total(), 1);
        assert!(decode::<ToCoordinator>(b"{\"type\":\"nope\"}").is_err());
        Ok(())
    }
}
