//! One publisher connection: signs kind-9 events in a helper task, sends them paced or as fast
//! as the in-flight bound allows, and times each EVENT → OK.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_core::Keys;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant as TokioInstant, MissedTickBehavior};

use crate::client::{next_frame, Conn, Frame, Sink};
use crate::nostr::{self, RelayMsg};
use crate::single::stats::{PublisherStats, SendLog};

/// Events signed ahead of sending, per publisher.
const SIGN_AHEAD: usize = 16;

pub struct PublisherPlan {
    pub index: usize,
    pub keys: Keys,
    pub channel: String,
    /// Gap between sends for this connection when paced.
    pub interval: Option<Duration>,
    /// When this connection sends its first event.
    pub start: Instant,
    /// No sends at or after this instant.
    pub send_deadline: Instant,
    /// Events this connection sends at most.
    pub quota: Option<u64>,
    pub in_flight: usize,
    pub ok_timeout: Duration,
    pub drain_timeout: Duration,
    pub content_bytes: usize,
}

/// Signs events ahead of the send loop into a bounded channel (a task of its own, so signing
/// overlaps waiting for OKs); stops when the receiver is dropped or the quota is reached.
fn spawn_signer(plan: &PublisherPlan) -> mpsc::Receiver<(String, String)> {
    let (tx, rx) = mpsc::channel(SIGN_AHEAD);
    let (keys, channel, index, quota, filler) =
        (plan.keys.clone(), plan.channel.clone(), plan.index, plan.quota, plan.content_bytes);
    tokio::spawn(async move {
        let mut seq = 0u64;
        while quota.is_none_or(|q| seq < q) {
            // One signature is tens of microseconds: short enough to run on a runtime worker.
            let ev = nostr::chat_event(&keys, &channel, index, seq, filler);
            if tx.send((ev.id.to_string(), nostr::event_msg(&ev))).await.is_err() {
                break;
            }
            seq += 1;
        }
    });
    rx
}

/// Waits for the pacing instant (if any) and then for the next signed event.
async fn next_event(
    rx: &mut mpsc::Receiver<(String, String)>,
    pace_at: Option<Instant>,
) -> Option<(String, String)> {
    if let Some(at) = pace_at {
        sleep_until(TokioInstant::from_std(at)).await;
    }
    rx.recv().await
}

/// One publisher's loop state: what it counted, what awaits its OK, when it stops.
struct Loop {
    st: PublisherStats,
    /// Sent EVENTs awaiting their OK, by id, with their send instant.
    pending: HashMap<String, Instant>,
    /// When paced: the next send instant.
    next_at: Option<Instant>,
    /// Set when sending ended (window over, quota reached, nothing left to sign): the end of
    /// the wait for outstanding OKs.
    drain_deadline: Option<Instant>,
}

/// Whether the loop goes on.
#[derive(PartialEq, Eq)]
enum Step {
    Go,
    Stop,
}

pub async fn run(conn: Conn, plan: PublisherPlan, log: Arc<SendLog>) -> PublisherStats {
    let Conn { mut sink, mut stream, .. } = conn;
    let mut p = Loop {
        st: PublisherStats::default(),
        pending: HashMap::new(),
        next_at: plan.interval.map(|_| plan.start),
        drain_deadline: None,
    };
    let mut rx = spawn_signer(&plan);
    let mut sweep = tokio::time::interval(Duration::from_millis(100));
    sweep.set_missed_tick_behavior(MissedTickBehavior::Delay);
    sleep_until(TokioInstant::from_std(plan.start)).await;

    loop {
        let sending = p.drain_deadline.is_none();
        if !sending && p.pending.is_empty() {
            break;
        }
        let can_send = sending && p.pending.len() < plan.in_flight;
        let step = tokio::select! {
            biased;
            frame = next_frame(&mut stream) => p.on_frame(frame),
            () = sleep_until(TokioInstant::from_std(plan.send_deadline)), if sending => p.stop_sending(&plan),
            () = sleep_until(TokioInstant::from_std(p.drain_deadline.unwrap_or(plan.send_deadline))), if !sending => {
                Step::Stop
            }
            _ = sweep.tick() => p.sweep(plan.ok_timeout),
            next = next_event(&mut rx, p.next_at), if can_send => match next {
                Some((id, msg)) => p.send(&mut sink, &plan, &log, id, msg).await,
                None => p.stop_sending(&plan),
            },
        };
        if step == Step::Stop {
            break;
        }
        if p.st.send_end.is_none() && p.drain_deadline.is_some() {
            p.st.send_end = Some(Instant::now());
        }
    }
    let mut st = p.st;
    st.send_end.get_or_insert_with(Instant::now);
    // Whatever is still pending never got its OK in time.
    st.ok_timeouts += p.pending.len() as u64;
    drop(rx);
    let _ = tokio::time::timeout(Duration::from_secs(1), futures::SinkExt::close(&mut sink)).await;
    st
}

impl Loop {
    /// Sending ends now; outstanding OKs get the drain timeout.
    fn stop_sending(&mut self, plan: &PublisherPlan) -> Step {
        self.drain_deadline = Some(Instant::now() + plan.drain_timeout);
        Step::Go
    }

    /// Counts one frame from the relay; a closed or failed socket stops the loop.
    fn on_frame(&mut self, frame: anyhow::Result<Option<Frame>>) -> Step {
        let f = match frame {
            Ok(Some(f)) => f,
            Ok(None) => {
                self.st.errors.add("publisher: relay closed the connection");
                return Step::Stop;
            }
            Err(e) => {
                self.st.errors.add(&format!("publisher: {e}"));
                return Step::Stop;
            }
        };
        match f.msg {
            RelayMsg::Ok { id, accepted, message } => match self.pending.remove(&id) {
                Some(sent_at) => {
                    self.st.ok_latency.record(f.at.saturating_duration_since(sent_at));
                    self.st.last_ok = Some(f.at);
                    if accepted {
                        self.st.accepted += 1;
                    } else {
                        self.st.rejected += 1;
                        self.st.reasons.add(&message);
                    }
                }
                None => self.st.unmatched_oks += 1,
            },
            RelayMsg::Notice(n) => self.st.notices.add(&n),
            RelayMsg::Closed { message, .. } => self.st.notices.add(&format!("CLOSED: {message}")),
            _ => {}
        }
        Step::Go
    }

    /// EVENTs waiting longer than `ok_timeout` count as timed out.
    fn sweep(&mut self, ok_timeout: Duration) -> Step {
        let now = Instant::now();
        let before = self.pending.len();
        self.pending.retain(|_, sent| now.saturating_duration_since(*sent) < ok_timeout);
        self.st.ok_timeouts += (before - self.pending.len()) as u64;
        Step::Go
    }

    /// Sends one signed event; a socket that fails or blocks past `--ok-timeout` stops the loop.
    async fn send(
        &mut self,
        sink: &mut Sink,
        plan: &PublisherPlan,
        log: &SendLog,
        id: String,
        msg: String,
    ) -> Step {
        let now = Instant::now();
        log.insert(&id, now);
        self.pending.insert(id, now);
        match tokio::time::timeout(plan.ok_timeout, futures::SinkExt::send(sink, msg.into())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.st.errors.add(&format!("publisher: websocket send: {e}"));
                return Step::Stop;
            }
            Err(_) => {
                self.st.errors.add("publisher: websocket send blocked past --ok-timeout");
                return Step::Stop;
            }
        }
        self.st.sent += 1;
        if let (Some(at), Some(gap)) = (self.next_at.as_mut(), plan.interval) {
            *at += gap;
        }
        if plan.quota.is_some_and(|q| self.st.sent >= q) {
            return self.stop_sending(plan);
        }
        Step::Go
    }
}
