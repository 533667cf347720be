//! Chat and fan-out writers: kind-9 events into the load channel (every other one into the
//! private channel for its members, [`Ctx::channel_for`]), each carrying its send instant
//! (wall clock, µs) so listeners in other processes can time delivery. Up to `in_flight` EVENTs
//! await their OK per connection (one with a think time).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::SinkExt;

use crate::client::{next_frame, Conn};
use buzz_core::Event;
use serde_json::json;

use crate::distributed::clock::{sleep_until, unix_us};
use crate::distributed::worker::session::{resend_pause, Ctx, Timing, MAX_ATTEMPTS};
use crate::nostr::{self, RelayMsg};

/// One writer connection.
pub struct Writer {
    /// Global client index.
    pub g: usize,
    /// Operation name (`chat`, `fanout.publish`).
    pub op: &'static str,
    /// Pacing gap of this connection.
    pub gap: Option<Duration>,
    /// Pause after each OK (workday).
    pub think: Duration,
}

/// The content of event `seq` of client `g`: unique, with the send instant.
#[must_use]
pub fn content(g: usize, seq: u64, sent_us: u64) -> String {
    format!("load {g} {seq} t={sent_us}")
}

/// The send instant in a writer's content, if it is one.
#[must_use]
pub fn sent_us(content: &str) -> Option<u64> {
    content.strip_prefix("load ")?.rsplit_once(" t=")?.1.parse().ok()
}

/// An EVENT awaiting its final answer.
struct Pending {
    /// When it was (last) sent.
    at: Instant,
    /// When it was first sent (latency of a resent write counts from here).
    first: Instant,
    /// The event, kept to resend it.
    ev: Event,
    /// Sends so far.
    attempt: u32,
    /// When to send it again: after an `error:` answer (a pause) or a lost socket (at once).
    /// While set, the write has its answer and is not waiting for one.
    resend_at: Option<Instant>,
}

impl Writer {
    /// Runs until the window ends, then waits for outstanding OKs until the drain ends. With
    /// `--reconnect`, a lost socket is opened again (next gateway) and every write still
    /// awaiting its answer is resent (same id: the relay stores it once), and `error:` answers
    /// are resent; the final answer counts.
    pub async fn run(self, ctx: Arc<Ctx>, conn: Conn, t: Timing) {
        let Conn { mut sink, mut stream, .. } = conn;
        let keys = ctx.keys(self.g);
        let in_flight = if self.think.is_zero() { ctx.a.knobs.in_flight } else { 1 };
        let mut pending: HashMap<String, Pending> = HashMap::new();
        let mut next_at = t.start;
        let mut seq = 0u64;
        let mut k = 0usize;
        sleep_until(t.start).await;
        loop {
            let now = Instant::now();
            let sending = now < t.send_end;
            if (!sending && pending.is_empty()) || now >= t.drain_end {
                break;
            }
            let mut lost: Option<String> = None;
            // `error:` answers whose pause is over and writes of a lost socket go out again first.
            for p in pending.values_mut().filter(|p| p.resend_at.is_some_and(|at| at <= now)) {
                p.at = Instant::now();
                p.attempt += 1;
                p.resend_at = None;
                if let Err(e) = sink.send(nostr::event_msg(&p.ev).into()).await {
                    lost = Some(format!("websocket send: {e}"));
                    break;
                }
            }
            let next_resend = pending.values().filter_map(|p| p.resend_at).min();
            let can_send = sending && pending.len() < in_flight && lost.is_none();
            if lost.is_none() {
                tokio::select! {
                    biased;
                    frame = next_frame(&mut stream) => match frame {
                        Ok(Some(f)) => match f.msg {
                            RelayMsg::Ok { id, accepted, message } => {
                                if let Some(p) = pending.remove(&id) {
                                    if accepted {
                                        ctx.rec.ok(self.op, f.at.saturating_duration_since(p.first));
                                        ctx.audit.ack(self.op, &id, p.ev.kind, &message, p.attempt);
                                    } else if ctx.a.reconnect && message.starts_with("error:") && p.attempt < MAX_ATTEMPTS {
                                        // Resent after a pause; meanwhile the socket is read on
                                        // (other writes' answers are not held up by it).
                                        ctx.audit.write_refused(self.op, &id, &message, f.at.saturating_duration_since(p.at).as_millis());
                                        let resend_at = Instant::now() + resend_pause(p.attempt);
                                        pending.insert(id, Pending { resend_at: Some(resend_at), ..p });
                                    } else {
                                        ctx.rec.error(self.op, &message);
                                        ctx.audit.write_refused(self.op, &id, &message, f.at.saturating_duration_since(p.at).as_millis());
                                    }
                                    if !self.think.is_zero() {
                                        next_at = next_at.max(Instant::now() + self.think);
                                    }
                                }
                            }
                            RelayMsg::Notice(n) => ctx.audit.answer(self.op, "notice", None, &n, false),
                            RelayMsg::Closed { message, .. } => ctx.audit.answer(self.op, "closed", None, &message, false),
                            _ => {}
                        },
                        Ok(None) => lost = Some("relay closed the connection".to_owned()),
                        Err(e) => lost = Some(format!("{e}")),
                    },
                    () = sleep_until(next_at), if can_send => {
                        let h = ctx.channel_for(self.g, seq);
                        let ev = nostr::keys_event(&keys, h, &content(self.g, seq, unix_us()));
                        let now = Instant::now();
                        seq += 1;
                        let msg = nostr::event_msg(&ev);
                        let id = ev.id.to_string();
                        pending.insert(id.clone(), Pending { at: now, first: now, ev, attempt: 1, resend_at: None });
                        if let Err(e) = sink.send(msg.into()).await {
                            if !ctx.a.reconnect {
                                pending.remove(&id);
                                ctx.rec.error(self.op, &format!("websocket send: {e}"));
                                break;
                            }
                            lost = Some(format!("websocket send: {e}"));
                        }
                        if let Some(g) = self.gap {
                            next_at += g;
                        }
                    }
                    () = sleep_until(next_resend.unwrap_or(now)), if next_resend.is_some() => {}
                    () = sleep_until(t.send_end), if sending => {}
                    () = sleep_until(t.drain_end) => break,
                    // --reconnect: look at unanswered writes now and then (below).
                    () = tokio::time::sleep(Duration::from_millis(500)), if ctx.a.reconnect => {}
                }
            }
            // A write without an answer for the connect timeout: the socket is as good as lost.
            // (One waiting to be resent has its answer.)
            if lost.is_none() && ctx.a.reconnect {
                let limit = ctx.timeout();
                if pending.values().any(|p| p.resend_at.is_none() && p.at.elapsed() > limit) {
                    ctx.audit.transport(self.op, "timeout", "no OK within the connect timeout; reconnecting");
                    lost = Some("no OK within the connect timeout".to_owned());
                }
            }
            let Some(why) = lost else { continue };
            if !ctx.a.reconnect {
                ctx.rec.error(self.op, &why);
                break;
            }
            ctx.audit.transport(self.op, "lost", &why);
            let _ = tokio::time::timeout(Duration::from_millis(200), sink.close()).await;
            match ctx.reconnect(self.op, self.g, &mut k, t.drain_end).await {
                Ok(c) => {
                    (sink, stream) = (c.sink, c.stream);
                    let now = Instant::now();
                    for p in pending.values_mut() {
                        p.resend_at = Some(p.resend_at.map_or(now, |at| at.min(now)));
                    }
                }
                Err(e) => {
                    ctx.rec.error(self.op, &format!("{e:#}"));
                    break;
                }
            }
        }
        for (id, p) in &pending {
            ctx.rec.error(self.op, "no OK before the drain ended");
            if ctx.audit.on() {
                ctx.audit.log("unanswered", json!({"op": self.op, "id": id, "kind": p.ev.kind}));
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_instant_travels_in_the_content() {
        assert_eq!(sent_us(&content(3, 7, 1_700_000_000_123_456)), Some(1_700_000_000_123_456));
        assert_eq!(sent_us("hello"), None);
        assert_eq!(sent_us("load 1 2 t=x"), None);
    }
}
