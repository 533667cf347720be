//! One publisher connection: signs kind-9 events in a helper task, sends them paced or as fast
//! as the in-flight bound allows, and times each EVENT → OK.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_core::Keys;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant as TokioInstant, MissedTickBehavior};

use crate::client::{next_frame, Conn};
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

pub async fn run(conn: Conn, plan: PublisherPlan, log: Arc<SendLog>) -> PublisherStats {
    let Conn { mut sink, mut stream, .. } = conn;
    let mut st = PublisherStats::default();
    let mut rx = spawn_signer(&plan);
    let mut pending: HashMap<String, Instant> = HashMap::new();
    let mut next_at = plan.interval.map(|_| plan.start);
    let mut drain_deadline: Option<Instant> = None;
    let mut sweep = tokio::time::interval(Duration::from_millis(100));
    sweep.set_missed_tick_behavior(MissedTickBehavior::Delay);
    sleep_until(TokioInstant::from_std(plan.start)).await;

    loop {
        let sending = drain_deadline.is_none();
        if !sending && pending.is_empty() {
            break;
        }
        let can_send = sending && pending.len() < plan.in_flight;
        tokio::select! {
            biased;
            frame = next_frame(&mut stream) => match frame {
                Ok(Some(f)) => match f.msg {
                    RelayMsg::Ok { id, accepted, message } => match pending.remove(&id) {
                        Some(sent_at) => {
                            st.ok_latency.record(f.at.saturating_duration_since(sent_at));
                            st.last_ok = Some(f.at);
                            if accepted {
                                st.accepted += 1;
                            } else {
                                st.rejected += 1;
                                st.reasons.add(&message);
                            }
                        }
                        None => st.unmatched_oks += 1,
                    },
                    RelayMsg::Notice(n) => st.notices.add(&n),
                    RelayMsg::Closed { message, .. } => st.notices.add(&format!("CLOSED: {message}")),
                    _ => {}
                },
                Ok(None) => {
                    st.errors.add("publisher: relay closed the connection");
                    break;
                }
                Err(e) => {
                    st.errors.add(&format!("publisher: {e}"));
                    break;
                }
            },
            () = sleep_until(TokioInstant::from_std(plan.send_deadline)), if sending => {
                drain_deadline = Some(Instant::now() + plan.drain_timeout);
            }
            () = sleep_until(TokioInstant::from_std(drain_deadline.unwrap_or(plan.send_deadline))), if !sending => {
                break;
            }
            _ = sweep.tick() => {
                let now = Instant::now();
                let before = pending.len();
                pending.retain(|_, sent| now.saturating_duration_since(*sent) < plan.ok_timeout);
                st.ok_timeouts += (before - pending.len()) as u64;
            }
            next = next_event(&mut rx, next_at), if can_send => match next {
                Some((id, msg)) => {
                    let now = Instant::now();
                    log.insert(&id, now);
                    pending.insert(id, now);
                    match tokio::time::timeout(plan.ok_timeout, futures::SinkExt::send(&mut sink, msg.into())).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            st.errors.add(&format!("publisher: websocket send: {e}"));
                            break;
                        }
                        Err(_) => {
                            st.errors.add("publisher: websocket send blocked past --ok-timeout");
                            break;
                        }
                    }
                    st.sent += 1;
                    if let (Some(at), Some(gap)) = (next_at.as_mut(), plan.interval) {
                        *at += gap;
                    }
                    if plan.quota.is_some_and(|q| st.sent >= q) {
                        drain_deadline = Some(Instant::now() + plan.drain_timeout);
                    }
                }
                None => drain_deadline = Some(Instant::now() + plan.drain_timeout),
            },
        }
        if st.send_end.is_none() && drain_deadline.is_some() {
            st.send_end = Some(Instant::now());
        }
    }
    st.send_end.get_or_insert_with(Instant::now);
    // Whatever is still pending never got its OK in time.
    st.ok_timeouts += pending.len() as u64;
    drop(rx);
    let _ = tokio::time::timeout(Duration::from_secs(1), futures::SinkExt::close(&mut sink)).await;
    st
}
