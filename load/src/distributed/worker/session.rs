//! What every client of a worker shares: the assignment, the recorder, its member key, and
//! connecting + authenticating to the gateway of a global client index.

use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use buzz_core::{Event, Keys};

use crate::client::Conn;
use crate::distributed::audit::Audit;
use crate::distributed::members::{member_key, private_member};
use crate::distributed::metrics::Recorder;
use crate::distributed::proto::Assignment;
use crate::flags::Target;
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
    /// The audit trail (a no-op without `--audit`).
    pub audit: Audit,
    /// Artifacts this worker's editors created lately (`d`), for history queries.
    pub recent: std::sync::Mutex<std::collections::VecDeque<String>>,
}

/// Artifacts [`Ctx::recent`] keeps.
const RECENT: usize = 64;

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

impl Ctx {
    /// The connect/AUTH/EOSE timeout.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.a.connect_timeout_ms)
    }

    /// The gateway of global client `g` (round-robin).
    #[must_use]
    pub fn target(&self, g: usize) -> Target {
        self.target_at(g, 0)
    }

    /// The gateway of global client `g` on its `k`-th (re)connect: round-robin over the
    /// endpoints file's URLs when there is one (read now: the Service's ready endpoints), else
    /// over the `--url`s.
    #[must_use]
    pub fn target_at(&self, g: usize, k: usize) -> Target {
        let fixed = &self.a.targets[(g + k) % self.a.targets.len().max(1)];
        let Some(path) = &self.a.endpoints_file else { return fixed.clone() };
        let urls: Vec<String> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("ws://"))
            .map(str::to_owned)
            .collect();
        if urls.is_empty() {
            return fixed.clone();
        }
        let url = &urls[(g + k) % urls.len()];
        match crate::flags::targets(std::slice::from_ref(url), Some(&fixed.host)) {
            Ok(mut t) if !t.is_empty() => t.remove(0),
            _ => fixed.clone(),
        }
    }

    /// Whether global client `g`'s key is a member of the private channel (and there is one).
    #[must_use]
    pub fn private_member(&self, g: usize) -> bool {
        self.a.private_channel.is_some() && private_member(g % self.a.key_pool.max(1))
    }

    /// The channel of client `g`'s `n`-th chat event or artifact: every other one goes to the
    /// private channel when `g` is a member of it, the rest to the open channel.
    #[must_use]
    pub fn channel_for(&self, g: usize, n: u64) -> &str {
        match &self.a.private_channel {
            Some(p) if self.private_member(g) && n % 2 == 1 => p,
            _ => &self.a.channel,
        }
    }

    /// Remembers artifact `d` for history queries.
    pub fn remember(&self, d: &str) {
        if let Ok(mut r) = self.recent.lock() {
            if r.len() >= RECENT {
                r.pop_front();
            }
            r.push_back(d.to_owned());
        }
    }

    /// The `n`-th remembered artifact (round robin), if any.
    #[must_use]
    pub fn recalled(&self, n: usize) -> Option<String> {
        let r = self.recent.lock().ok()?;
        (!r.is_empty()).then(|| r[n % r.len()].clone())
    }

    /// The member key of global client `g`.
    #[must_use]
    pub fn keys(&self, g: usize) -> Keys {
        member_key(&self.a.key_seed, g % self.a.key_pool.max(1))
    }

    /// Connects client `g` to its gateway and answers the AUTH challenge as its member key.
    pub async fn connect(&self, g: usize) -> Result<(Conn, Keys)> {
        self.connect_at(g, 0).await
    }

    /// [`Ctx::connect`] on the `k`-th (re)connect.
    pub async fn connect_at(&self, g: usize, k: usize) -> Result<(Conn, Keys)> {
        let keys = self.keys(g);
        let t = self.timeout();
        let mut conn = Conn::connect(&self.target_at(g, k), t).await?;
        conn.authenticate(&keys, t).await.context("AUTH")?;
        Ok((conn, keys))
    }

    /// `--reconnect`: client `g` (doing `op`) lost its socket; connects again, trying the next
    /// gateway each time with a short backoff, until `give_up`. Audited (`reconnect`, or a
    /// `transport` line per failed attempt). `k` counts this client's connects.
    pub async fn reconnect(&self, op: &str, g: usize, k: &mut usize, give_up: Instant) -> Result<Conn> {
        let t0 = Instant::now();
        let mut pause = Duration::from_millis(50);
        loop {
            *k += 1;
            let target = self.target_at(g, *k);
            match self.connect_at(g, *k).await {
                Ok((conn, _)) => {
                    self.rec.ok("reconnect", t0.elapsed());
                    if self.audit.on() {
                        let ms = u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX);
                        self.audit
                            .log("reconnect", serde_json::json!({"op": op, "url": target.url, "ms": ms}));
                    }
                    return Ok(conn);
                }
                Err(e) => {
                    let msg = format!("{e:#}");
                    if msg.contains("AUTH rejected") {
                        let reason = msg.split("AUTH rejected: ").nth(1).unwrap_or(&msg);
                        self.audit.answer(op, "auth", None, reason, false);
                    } else {
                        self.audit.transport(op, "connect", &msg);
                    }
                    if Instant::now() + pause >= give_up {
                        self.rec.error("reconnect", &msg);
                        return Err(e.context(format!("reconnecting for {:?}", t0.elapsed())));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

/// Sends `ev` and waits for its OK: `(accepted, message)`. NOTICEs on the way are audited.
pub async fn publish_audited(ctx: &Ctx, op: &str, conn: &mut Conn, ev: &Event) -> Result<(bool, String)> {
    conn.send_text(nostr::event_msg(ev)).await?;
    let id = ev.id.clone();
    conn.wait_for(ctx.timeout(), "OK", |m| match m {
        RelayMsg::Ok { id: got, accepted, message } if *got == id => Some(Ok((*accepted, message.clone()))),
        RelayMsg::Closed { message, .. } => Some(Err(anyhow!("CLOSED: {message}"))),
        RelayMsg::Notice(n) => {
            ctx.audit.answer(op, "notice", None, n, false);
            None
        }
        _ => None,
    })
    .await
}

/// `--reconnect`: a write until its final answer. `error:` answers are resent (at most
/// `MAX_ATTEMPTS` times), a lost socket is opened again and the same event resent. Without
/// `--reconnect`, one attempt ([`publish_audited`]). Every refusal is audited; the caller audits
/// the final answer. Returns `(accepted, message, attempts)`.
pub async fn publish_final(
    ctx: &Ctx,
    op: &str,
    conn: &mut Conn,
    g: usize,
    k: &mut usize,
    ev: &Event,
    give_up: Instant,
) -> Result<(bool, String, u32)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let sent = Instant::now();
        match publish_audited(ctx, op, conn, ev).await {
            Ok((false, msg))
                if ctx.a.reconnect
                    && msg.starts_with("error:")
                    && attempt < MAX_ATTEMPTS
                    && Instant::now() < give_up =>
            {
                ctx.audit.write_refused(op, &ev.id, &msg, sent.elapsed().as_millis());
                tokio::time::sleep(resend_pause(attempt)).await;
            }
            Ok((ok, msg)) => return Ok((ok, msg, attempt)),
            Err(e) if ctx.a.reconnect && Instant::now() < give_up && attempt < 2 * MAX_ATTEMPTS => {
                let msg = format!("{e:#}");
                if let Some(c) = msg.strip_prefix("CLOSED: ") {
                    ctx.audit.answer(op, "closed", Some(&ev.id), c, false);
                } else {
                    ctx.audit.transport(op, "lost", &msg);
                }
                if msg.contains("timed out")
                    || msg.contains("closed the connection")
                    || msg.contains("websocket")
                {
                    *conn = ctx.reconnect(op, g, k, give_up).await?;
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Attempts of one write under `--reconnect` (answers `error:` are resent up to this): with
/// [`resend_pause`], about 38 s of resends, so a write outlives every replica of the
/// write-service being down for a while (the fault suite's `all:write`).
pub const MAX_ATTEMPTS: u32 = 40;

/// The pause before resending a write answered `error:` for the `attempt`-th time: 200 ms more
/// each time, at most 1 s.
#[must_use]
pub fn resend_pause(attempt: u32) -> Duration {
    Duration::from_millis((200 * u64::from(attempt)).min(1000))
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
