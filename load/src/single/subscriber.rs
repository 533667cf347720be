//! One subscriber connection (already subscribed, past EOSE): counts live deliveries of this run's
//! events and times each from the publisher's send instant.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::client::{next_frame, Conn};
use crate::nostr::{self, RelayMsg};
use crate::single::stats::{SendLog, SubscriberStats};

/// Reads until `stop` turns true or the connection ends. `delivered` is the run-wide counter the
/// orchestrator watches to end the drain early.
pub async fn run(
    conn: Conn,
    log: Arc<SendLog>,
    delivered: Arc<AtomicU64>,
    mut stop: watch::Receiver<bool>,
) -> SubscriberStats {
    let Conn { mut sink, mut stream, .. } = conn;
    let mut st = SubscriberStats::default();
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        if *stop.borrow() {
            break;
        }
        tokio::select! {
            biased;
            frame = next_frame(&mut stream) => match frame {
                Ok(Some(f)) => match f.msg {
                    RelayMsg::Event { sub, id, .. } if sub == nostr::SUB_ID => match log.get(&id) {
                        Some(sent_at) => {
                            if seen.insert(id) {
                                st.delivery_latency.record(f.at.saturating_duration_since(sent_at));
                                st.delivered += 1;
                                delivered.fetch_add(1, Ordering::Relaxed);
                            } else {
                                st.duplicates += 1;
                            }
                        }
                        None => st.unknown += 1,
                    },
                    RelayMsg::Closed { sub, message } if sub == nostr::SUB_ID => {
                        st.errors.add(&format!("subscription closed: {message}"));
                        break;
                    }
                    RelayMsg::Notice(n) => st.notices.add(&n),
                    _ => {}
                },
                Ok(None) => {
                    st.errors.add("subscriber: relay closed the connection");
                    break;
                }
                Err(e) => {
                    st.errors.add(&format!("subscriber: {e}"));
                    break;
                }
            },
            changed = stop.changed() => {
                if changed.is_err() {
                    break;
                }
            }
        }
    }
    let close = async {
        let _ = futures::SinkExt::send(&mut sink, nostr::close_msg(nostr::SUB_ID).into()).await;
        let _ = futures::SinkExt::close(&mut sink).await;
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), close).await;
    st
}
