//! What every client of a worker shares: the assignment, the recorder, member keys derived from
//! the run's seed, and connecting + authenticating to the gateway of a global client index.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use buzz_core::{Event, Keys};
use sha2::{Digest, Sha256};

use super::metrics::Recorder;
use super::proto::Assignment;
use crate::client::Conn;
use crate::config::Target;
use crate::nostr::{self, RelayMsg};

/// A worker's shared state.
#[derive(Debug)]
pub struct Ctx {
    /// What to run.
    pub a: Assignment,
    /// Where measurements go.
    pub rec: Recorder,
    /// HTTP client (snapshot captures).
    pub http: reqwest::Client,
}

/// When the window starts, when senders stop, when everything stops.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// First operation.
    pub start: Instant,
    /// No new operation from here.
    pub send_end: Instant,
    /// Outstanding answers and deliveries are given up here.
    pub drain_end: Instant,
}

/// Member key `i` of a run: secp256k1 secret = sha256(`seed:i`), re-hashed in the (never seen)
/// case it is not a valid scalar. Coordinator and workers derive the same keys.
#[must_use]
pub fn member_key(seed: &str, i: usize) -> Keys {
    let mut digest = Sha256::digest(format!("{seed}:{i}").as_bytes());
    loop {
        if let Some(k) = Keys::from_secret_hex(&hex::encode(digest)) {
            return k;
        }
        digest = Sha256::digest(digest);
    }
}

/// Microseconds since the epoch (the wall clock every worker shares, for cross-process latency).
#[must_use]
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

impl Ctx {
    /// The connect/AUTH/EOSE timeout.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.a.connect_timeout_ms)
    }

    /// The gateway of global client `g` (round-robin).
    #[must_use]
    pub fn target(&self, g: usize) -> &Target {
        &self.a.targets[g % self.a.targets.len().max(1)]
    }

    /// The member key of global client `g`.
    #[must_use]
    pub fn keys(&self, g: usize) -> Keys {
        member_key(&self.a.key_seed, g % self.a.key_pool.max(1))
    }

    /// Connects client `g` to its gateway and answers the AUTH challenge as its member key.
    pub async fn connect(&self, g: usize) -> Result<(Conn, Keys)> {
        let keys = self.keys(g);
        let t = self.timeout();
        let mut conn = Conn::connect(self.target(g), t).await?;
        conn.authenticate(&keys, t).await.context("AUTH")?;
        Ok((conn, keys))
    }
}

/// Sends `ev` and waits for its OK: `(accepted, message)`.
pub async fn publish(conn: &mut Conn, ev: &Event, timeout: Duration) -> Result<(bool, String)> {
    conn.send_text(nostr::event_msg(ev)).await?;
    let id = ev.id.clone();
    conn.wait_for(timeout, "OK", |m| match m {
        RelayMsg::Ok { id: got, accepted, message } if *got == id => Some(Ok((*accepted, message.clone()))),
        RelayMsg::Closed { message, .. } => Some(Err(anyhow!("CLOSED: {message}"))),
        _ => None,
    })
    .await
}

/// Sleeps until `at` (tokio clock).
pub async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_keys_are_deterministic_and_distinct() {
        let a = member_key("seed", 1);
        assert_eq!(a.public_hex(), member_key("seed", 1).public_hex());
        assert_ne!(a.public_hex(), member_key("seed", 2).public_hex());
        assert_ne!(a.public_hex(), member_key("other", 1).public_hex());
    }
}
