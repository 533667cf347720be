//! The outbound side of one socket: a queue bounded in bytes, and the writer task that drains it
//! into the WebSocket. The session only ever queues (it never waits on the network), so its idle,
//! auth and too-slow checks keep running while a peer stops reading. A peer that lets the queue
//! fill up is closed with 1008 "too slow: outbound queue full".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use buzz_core::RelayMessage;
use futures::stream::SplitSink;
use futures::SinkExt;
use tokio::sync::{mpsc, Notify};
use tokio_util::sync::CancellationToken;

/// Most queued messages written before a flush.
const FLUSH_EVERY: usize = 64;
/// Time a too-slow peer gets to take the NOTICE and close frame before the connection is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// The close reason (and NOTICE) of a socket whose outbound queue overflowed.
pub const TOO_SLOW: &str = "too slow: outbound queue full";

/// One message waiting to be written.
pub enum Frame {
    /// A complete text message (replies, stored events).
    Text(String),
    /// A live event for one subscription. `raw` is the event's JSON, serialised once per gateway
    /// and shared by every socket; the `["EVENT",<sub>,<raw>]` text is built when it is written,
    /// so a queued live event costs each socket a pointer, not a copy.
    Event {
        sub_id: String,
        raw: Arc<str>,
    },
    Ping,
    Close(u16, String),
}

impl Frame {
    /// A relay message as text, counted in the gateway's message metrics (`meter`).
    #[must_use]
    pub fn reply(msg: &RelayMessage) -> Self {
        super::meter::message_out(msg);
        Frame::Text(msg.to_json())
    }

    /// Bytes this frame puts on the wire (its payload), what the queue limit counts.
    fn len(&self) -> usize {
        match self {
            Frame::Text(t) => t.len(),
            // `["EVENT","",]` plus the quoted id (escapes aside).
            Frame::Event { sub_id, raw } => raw.len() + sub_id.len() + 14,
            Frame::Ping => 0,
            Frame::Close(_, reason) => reason.len() + 2,
        }
    }

    fn into_message(self) -> Message {
        match self {
            Frame::Text(t) => Message::Text(t.into()),
            Frame::Event { sub_id, raw } => Message::Text(event_text(&sub_id, &raw).into()),
            Frame::Ping => Message::Ping(Vec::new().into()),
            Frame::Close(code, reason) => Message::Close(Some(CloseFrame { code, reason: reason.into() })),
        }
    }
}

/// `["EVENT",<sub_id>,<raw>]` around an already serialised event (no re-serialisation).
fn event_text(sub_id: &str, raw: &str) -> String {
    // Serialising a string cannot fail.
    let sub = serde_json::to_string(sub_id).unwrap_or_default();
    let mut s = String::with_capacity(raw.len() + sub.len() + 12);
    s.push_str("[\"EVENT\",");
    s.push_str(&sub);
    s.push(',');
    s.push_str(raw);
    s.push(']');
    s
}

/// Shared by the session (and its write tasks) and the writer.
struct Shared {
    /// Bytes queued and not yet taken by the writer.
    queued: AtomicUsize,
    limit: usize,
    /// Signalled when the writer takes the queue below half its limit (paced answers resume).
    drained: Notify,
    /// Cancelled when a push would overflow: the writer drops the queue and closes the socket.
    overflow: CancellationToken,
}

/// The sending half, cloned into every task that answers on this socket.
#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::UnboundedSender<Frame>,
    shared: Arc<Shared>,
}

/// The writer's half.
pub struct Queue {
    rx: mpsc::UnboundedReceiver<Frame>,
    shared: Arc<Shared>,
}

/// A queue holding at most `limit` bytes (one frame of any size fits an empty queue).
#[must_use]
pub fn channel(limit: usize) -> (Outbound, Queue) {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        queued: AtomicUsize::new(0),
        limit,
        drained: Notify::new(),
        overflow: CancellationToken::new(),
    });
    (Outbound { tx, shared: shared.clone() }, Queue { rx, shared })
}

impl Outbound {
    /// Queues `frame` unless that would take the queue over its limit; then the socket is marked
    /// too slow (see [`Outbound::overflowed`]) and `false` is returned.
    pub fn push(&self, frame: Frame) -> bool {
        let len = frame.len();
        let s = &self.shared;
        if s.overflow.is_cancelled() {
            return false;
        }
        let before = s.queued.fetch_add(len, Ordering::AcqRel);
        if before > 0 && before + len > s.limit {
            s.queued.fetch_sub(len, Ordering::AcqRel);
            s.overflow.cancel();
            return false;
        }
        self.send(frame, len)
    }

    /// Queues `frame` whatever the queue holds. For answers the session paces itself (it takes
    /// the next query update only while [`Outbound::has_room`]), so they wait instead of
    /// overflowing.
    pub fn push_paced(&self, frame: Frame) -> bool {
        let len = frame.len();
        self.shared.queued.fetch_add(len, Ordering::AcqRel);
        self.send(frame, len)
    }

    fn send(&self, frame: Frame, len: usize) -> bool {
        if matches!(frame, Frame::Event { .. }) {
            super::meter::live_event_out();
        }
        gauge_add(len);
        if self.tx.send(frame).is_err() {
            self.shared.queued.fetch_sub(len, Ordering::AcqRel);
            gauge_sub(len);
            return false;
        }
        true
    }

    /// Whether paced answers may be queued: under half the limit.
    #[must_use]
    pub fn has_room(&self) -> bool {
        self.shared.queued.load(Ordering::Acquire) < self.shared.limit / 2
    }

    /// Resolves when the writer has taken the queue below half its limit (may wake spuriously).
    pub async fn drained(&self) {
        self.shared.drained.notified().await;
    }

    /// Resolves when a push overflowed the queue.
    pub async fn overflowed(&self) {
        self.shared.overflow.cancelled().await;
    }

    #[must_use]
    pub fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Acquire)
    }
}

fn gauge_add(len: usize) {
    #[allow(clippy::cast_precision_loss)]
    metrics::gauge!("buzz_gateway_outbound_bytes").increment(len as f64);
}

fn gauge_sub(len: usize) {
    #[allow(clippy::cast_precision_loss)]
    metrics::gauge!("buzz_gateway_outbound_bytes").decrement(len as f64);
}

impl Queue {
    /// Takes the next frame (or `None` when every sender is gone), releasing its bytes.
    async fn next(&mut self) -> Option<Frame> {
        let frame = self.rx.recv().await?;
        self.release(&frame);
        Some(frame)
    }

    fn try_next(&mut self) -> Option<Frame> {
        let frame = self.rx.try_recv().ok()?;
        self.release(&frame);
        Some(frame)
    }

    fn release(&self, frame: &Frame) {
        let len = frame.len();
        let s = &self.shared;
        let before = s.queued.fetch_sub(len, Ordering::AcqRel);
        gauge_sub(len);
        if before >= s.limit / 2 && before - len < s.limit / 2 {
            s.drained.notify_one();
        }
    }

    /// Drops everything queued (the memory goes now, not when the peer finally reads).
    fn discard(&mut self) {
        self.rx.close();
        while let Some(frame) = self.try_next() {
            drop(frame);
        }
    }
}

type Sink = SplitSink<WebSocket, Message>;

/// The writer task: writes what is queued, flushing once per batch, until the session is gone,
/// a close frame was written, or the queue overflowed (then NOTICE and close 1008).
pub async fn write(mut sink: Sink, mut queue: Queue) {
    let overflow = queue.shared.overflow.clone();
    let ended = tokio::select! {
        biased;
        () = overflow.cancelled() => None,
        clean = write_all(&mut sink, &mut queue) => Some(clean),
    };
    if ended.is_none() {
        queue.discard();
        metrics::counter!("buzz_gateway_slow_consumers_closed_total").increment(1);
        let notice = RelayMessage::Notice(format!("error: {TOO_SLOW}; reconnect and replay")).to_json();
        let goodbye = async {
            sink.feed(Message::Text(notice.into())).await?;
            sink.send(Frame::Close(1008, TOO_SLOW.to_owned()).into_message()).await
        };
        let _ = tokio::time::timeout(CLOSE_GRACE, goodbye).await;
        return;
    }
    queue.discard();
    let _ = tokio::time::timeout(CLOSE_GRACE, sink.close()).await;
}

/// Writes until the queue ends or a close frame went out. A REQ answer of many events becomes a
/// few large writes instead of one syscall (and TCP segment) per event.
async fn write_all(sink: &mut Sink, queue: &mut Queue) {
    while let Some(first) = queue.next().await {
        let mut next = Some(first);
        let mut fed = 0;
        while let Some(frame) = next.take() {
            let close = matches!(frame, Frame::Close(..));
            if sink.feed(frame.into_message()).await.is_err() {
                return;
            }
            if close {
                let _ = sink.flush().await;
                return;
            }
            // At most FLUSH_EVERY messages per flush, so a busy socket still flushes regularly.
            fed += 1;
            if fed < FLUSH_EVERY {
                next = queue.try_next();
            }
        }
        if sink.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_event_frame_wraps_the_shared_json_without_reserialising_it() {
        let raw: Arc<str> = r#"{"id":"x","content":"a \"b\""}"#.into();
        let frame = Frame::Event { sub_id: "s\"1".into(), raw: raw.clone() };
        assert!(frame.len() >= raw.len() + 5);
        let Message::Text(text) = frame.into_message() else { panic!("not text") };
        assert_eq!(text.as_str(), format!(r#"["EVENT","s\"1",{raw}]"#));
        let v: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
        assert_eq!(v[2]["content"], "a \"b\"");
    }

    #[test]
    fn a_push_over_the_byte_limit_overflows_and_paced_answers_wait_for_room() {
        let (out, mut queue) = channel(100);
        assert!(out.push(Frame::Text("x".repeat(60))));
        assert!(!out.has_room());
        assert!(!out.push(Frame::Text("y".repeat(60))));
        assert!(out.shared.overflow.is_cancelled());
        assert_eq!(out.queued(), 60);
        queue.discard();
        assert_eq!(out.queued(), 0);
        // One frame larger than the limit still fits an empty queue.
        let (out, _queue) = channel(10);
        assert!(out.push(Frame::Text("z".repeat(50))));
        assert!(out.push_paced(Frame::Text("w".repeat(50))));
        assert!(!out.push(Frame::Ping));
    }
}
