//! Chat and fan-out writers: kind-9 events into the load channel, each carrying its send instant
//! (wall clock, µs) so listeners in other processes can time delivery. Up to `in_flight` EVENTs
//! await their OK per connection (one with a think time).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::SinkExt;

use crate::client::{next_frame, Conn};
use crate::dist::session::{sleep_until, unix_us, Ctx, Timing};
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

impl Writer {
    /// Runs until the window ends, then waits for outstanding OKs until the drain ends.
    pub async fn run(self, ctx: Arc<Ctx>, conn: Conn, t: Timing) {
        let Conn { mut sink, mut stream, .. } = conn;
        let keys = ctx.keys(self.g);
        let in_flight = if self.think.is_zero() { ctx.a.knobs.in_flight } else { 1 };
        let mut pending: HashMap<String, Instant> = HashMap::new();
        let mut next_at = t.start;
        let mut seq = 0u64;
        sleep_until(t.start).await;
        loop {
            let now = Instant::now();
            let sending = now < t.send_end;
            if (!sending && pending.is_empty()) || now >= t.drain_end {
                break;
            }
            let can_send = sending && pending.len() < in_flight;
            tokio::select! {
                biased;
                frame = next_frame(&mut stream) => match frame {
                    Ok(Some(f)) => {
                        if let RelayMsg::Ok { id, accepted, message } = f.msg {
                            if let Some(at) = pending.remove(&id) {
                                if accepted {
                                    ctx.rec.ok(self.op, f.at.saturating_duration_since(at));
                                } else {
                                    ctx.rec.error(self.op, &message);
                                }
                                if !self.think.is_zero() {
                                    next_at = next_at.max(Instant::now() + self.think);
                                }
                            }
                        }
                    }
                    Ok(None) => {
                        ctx.rec.error(self.op, "relay closed the connection");
                        break;
                    }
                    Err(e) => {
                        ctx.rec.error(self.op, &format!("{e}"));
                        break;
                    }
                },
                () = sleep_until(next_at), if can_send => {
                    let ev = nostr::keys_event(&keys, &ctx.a.channel, &content(self.g, seq, unix_us()));
                    let now = Instant::now();
                    pending.insert(ev.id.clone(), now);
                    seq += 1;
                    if let Err(e) = sink.send(nostr::event_msg(&ev).into()).await {
                        ctx.rec.error(self.op, &format!("websocket send: {e}"));
                        pending.remove(&ev.id);
                        break;
                    }
                    if let Some(g) = self.gap {
                        next_at += g;
                    }
                }
                () = sleep_until(t.send_end), if sending => {}
                () = sleep_until(t.drain_end) => break,
            }
        }
        for _ in 0..pending.len() {
            ctx.rec.error(self.op, "no OK before the drain ended");
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
