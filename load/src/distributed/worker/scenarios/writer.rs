//! Chat and fan-out writers: kind-9 events into the load channel (every other one into the
//! private channel for its members, [`Ctx::channel_for`]), each carrying its send instant
//! (wall clock, µs) so listeners in other processes can time delivery. Up to `in_flight` EVENTs
//! await their OK per connection (one with a think time).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::SinkExt;

use buzz_core::{Event, Keys};
use serde_json::json;

use crate::client::{next_frame, Conn, Frame, Sink, Stream};
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
        let keys = ctx.keys(self.g);
        let in_flight = if self.think.is_zero() { ctx.a.knobs.in_flight } else { 1 };
        let Conn { sink, stream, .. } = conn;
        let mut w = Run {
            w: self,
            ctx,
            sink,
            stream,
            keys,
            in_flight,
            pending: HashMap::new(),
            next_at: t.start,
            seq: 0,
            k: 0,
        };
        sleep_until(t.start).await;
        loop {
            let now = Instant::now();
            let sending = now < t.send_end;
            if (!sending && w.pending.is_empty()) || now >= t.drain_end {
                break;
            }
            let mut step = w.resend_due(now).await;
            if matches!(step, Step::Go) {
                step = w.next(now, sending, t).await;
            }
            if matches!(step, Step::Go) && w.ctx.a.reconnect {
                step = w.unanswered_too_long();
            }
            match step {
                Step::Go => {}
                Step::Stop => break,
                Step::Lost(why) => {
                    if !w.recover(&why, t.drain_end).await {
                        break;
                    }
                }
            }
        }
        w.finish().await;
    }
}

/// What the writer does next.
enum Step {
    /// Go on.
    Go,
    /// The socket is lost (why): open another, or stop without `--reconnect`.
    Lost(String),
    /// Stop writing.
    Stop,
}

/// One writer's loop state.
struct Run {
    w: Writer,
    ctx: Arc<Ctx>,
    sink: Sink,
    stream: Stream,
    keys: Keys,
    /// EVENTs awaiting their answer at most.
    in_flight: usize,
    /// Writes without their final answer, by id.
    pending: HashMap<String, Pending>,
    /// When the next event goes out.
    next_at: Instant,
    /// Events written so far.
    seq: u64,
    /// Connects so far (the next gateway on a reconnect).
    k: usize,
}

impl Run {
    /// `error:` answers whose pause is over and writes of a lost socket go out again first.
    async fn resend_due(&mut self, now: Instant) -> Step {
        for p in self.pending.values_mut().filter(|p| p.resend_at.is_some_and(|at| at <= now)) {
            p.at = Instant::now();
            p.attempt += 1;
            p.resend_at = None;
            if let Err(e) = self.sink.send(nostr::event_msg(&p.ev).into()).await {
                return Step::Lost(format!("websocket send: {e}"));
            }
        }
        Step::Go
    }

    /// Waits for the next thing to do: an answer, the next send, a resend, the window's or the
    /// drain's end (and, with `--reconnect`, half a second at most).
    async fn next(&mut self, now: Instant, sending: bool, t: Timing) -> Step {
        let next_resend = self.pending.values().filter_map(|p| p.resend_at).min();
        let can_send = sending && self.pending.len() < self.in_flight;
        let next_at = self.next_at;
        tokio::select! {
            biased;
            frame = next_frame(&mut self.stream) => match frame {
                Ok(Some(f)) => {
                    self.on_message(f);
                    Step::Go
                }
                Ok(None) => Step::Lost("relay closed the connection".to_owned()),
                Err(e) => Step::Lost(format!("{e}")),
            },
            () = sleep_until(next_at), if can_send => self.send_next().await,
            () = sleep_until(next_resend.unwrap_or(now)), if next_resend.is_some() => Step::Go,
            () = sleep_until(t.send_end), if sending => Step::Go,
            () = sleep_until(t.drain_end) => Step::Stop,
            // --reconnect: look at unanswered writes now and then.
            () = tokio::time::sleep(Duration::from_millis(500)), if self.ctx.a.reconnect => Step::Go,
        }
    }

    /// One message from the relay: an OK is the final answer of its write, or an `error:` to
    /// resend after a pause; NOTICEs and CLOSEDs are audited.
    fn on_message(&mut self, f: Frame) {
        let (ctx, op) = (&self.ctx, self.w.op);
        match f.msg {
            RelayMsg::Ok { id, accepted, message } => {
                let Some(p) = self.pending.remove(&id) else { return };
                let waited_ms = f.at.saturating_duration_since(p.at).as_millis();
                if accepted {
                    ctx.rec.ok(op, f.at.saturating_duration_since(p.first));
                    ctx.audit.ack(op, &id, p.ev.kind, &message, p.attempt);
                } else if ctx.a.reconnect && message.starts_with("error:") && p.attempt < MAX_ATTEMPTS {
                    // Resent after a pause; meanwhile the socket is read on (other writes'
                    // answers are not held up by it).
                    ctx.audit.write_refused(op, &id, &message, waited_ms);
                    let resend_at = Instant::now() + resend_pause(p.attempt);
                    self.pending.insert(id, Pending { resend_at: Some(resend_at), ..p });
                } else {
                    ctx.rec.error(op, &message);
                    ctx.audit.write_refused(op, &id, &message, waited_ms);
                }
                if !self.w.think.is_zero() {
                    self.next_at = self.next_at.max(Instant::now() + self.w.think);
                }
            }
            RelayMsg::Notice(n) => ctx.audit.answer(op, "notice", None, &n, false),
            RelayMsg::Closed { message, .. } => ctx.audit.answer(op, "closed", None, &message, false),
            _ => {}
        }
    }

    /// Signs and sends the next event.
    async fn send_next(&mut self) -> Step {
        let h = self.ctx.channel_for(self.w.g, self.seq);
        let ev = nostr::keys_event(&self.keys, h, &content(self.w.g, self.seq, unix_us()));
        let now = Instant::now();
        self.seq += 1;
        let msg = nostr::event_msg(&ev);
        let id = ev.id.to_string();
        self.pending.insert(id.clone(), Pending { at: now, first: now, ev, attempt: 1, resend_at: None });
        let mut step = Step::Go;
        if let Err(e) = self.sink.send(msg.into()).await {
            if !self.ctx.a.reconnect {
                self.pending.remove(&id);
                self.ctx.rec.error(self.w.op, &format!("websocket send: {e}"));
                return Step::Stop;
            }
            step = Step::Lost(format!("websocket send: {e}"));
        }
        if let Some(g) = self.w.gap {
            self.next_at += g;
        }
        step
    }

    /// A write without an answer for the connect timeout: the socket is as good as lost. (One
    /// waiting to be resent has its answer.)
    fn unanswered_too_long(&self) -> Step {
        let limit = self.ctx.timeout();
        if self.pending.values().any(|p| p.resend_at.is_none() && p.at.elapsed() > limit) {
            self.ctx.audit.transport(self.w.op, "timeout", "no OK within the connect timeout; reconnecting");
            return Step::Lost("no OK within the connect timeout".to_owned());
        }
        Step::Go
    }

    /// The socket is lost: with `--reconnect`, another one (every pending write to be resent at
    /// once); `false` when the writer stops.
    async fn recover(&mut self, why: &str, give_up: Instant) -> bool {
        let op = self.w.op;
        if !self.ctx.a.reconnect {
            self.ctx.rec.error(op, why);
            return false;
        }
        self.ctx.audit.transport(op, "lost", why);
        let _ = tokio::time::timeout(Duration::from_millis(200), self.sink.close()).await;
        match self.ctx.reconnect(op, self.w.g, &mut self.k, give_up).await {
            Ok(c) => {
                (self.sink, self.stream) = (c.sink, c.stream);
                let now = Instant::now();
                for p in self.pending.values_mut() {
                    p.resend_at = Some(p.resend_at.map_or(now, |at| at.min(now)));
                }
                true
            }
            Err(e) => {
                self.ctx.rec.error(op, &format!("{e:#}"));
                false
            }
        }
    }

    /// Writes still without an answer are given up (audited `unanswered`); the socket closes.
    async fn finish(mut self) {
        for (id, p) in &self.pending {
            self.ctx.rec.error(self.w.op, "no OK before the drain ended");
            if self.ctx.audit.on() {
                self.ctx.audit.log("unanswered", json!({"op": self.w.op, "id": id, "kind": p.ev.kind}));
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.sink.close()).await;
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
