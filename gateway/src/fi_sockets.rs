//! Revalidation of existing sockets: every socket registers here with whether it is
//! FI-admitted; on `<p>.v1.fi.revalidate` (the policy-service's sweep of communities whose stored
//! policy requires FI) this gateway closes every non-FI socket of those communities, unless
//! `BUZZ_NIP_FI_MODE=off`. FI-admitted sockets stay until their own deadline. A community that
//! is no longer listed (disable) gets nothing: no socket is reopened or logged out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use buzz_fi::revalidate::Revalidate;
use buzz_fi::Mode;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// One socket: whether FI-admitted, and the token that closes it.
type Entry = (bool, CancellationToken);

/// This gateway's sockets by community, each with whether it is FI-admitted.
#[derive(Default)]
pub struct FiSockets {
    sockets: Mutex<HashMap<Uuid, HashMap<u64, Entry>>>,
    next_id: AtomicU64,
}

/// Removes the socket when dropped.
pub struct FiRegistration {
    sockets: Arc<FiSockets>,
    community: Uuid,
    id: u64,
    /// Cancelled when revalidation closes this socket.
    pub revoked: CancellationToken,
}

impl Drop for FiRegistration {
    fn drop(&mut self) {
        if let Ok(mut map) = self.sockets.sockets.lock() {
            if let Some(c) = map.get_mut(&self.community) {
                c.remove(&self.id);
                if c.is_empty() {
                    map.remove(&self.community);
                }
            }
        }
    }
}

impl FiSockets {
    /// Registers a socket of `community`; it stays registered while the returned guard lives.
    pub fn register(self: &Arc<Self>, community: Uuid, fi_admitted: bool) -> FiRegistration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let revoked = CancellationToken::new();
        if let Ok(mut map) = self.sockets.lock() {
            map.entry(community).or_default().insert(id, (fi_admitted, revoked.clone()));
        }
        FiRegistration { sockets: self.clone(), community, id, revoked }
    }

    /// Closes every non-FI socket of `community`; returns how many were told to close.
    pub fn close_non_fi(&self, community: Uuid) -> usize {
        let Ok(map) = self.sockets.lock() else { return 0 };
        let Some(sockets) = map.get(&community) else { return 0 };
        let mut closed = 0;
        for (fi_admitted, token) in sockets.values() {
            if !fi_admitted && !token.is_cancelled() {
                token.cancel();
                closed += 1;
            }
        }
        closed
    }
}

/// Acts on every revalidation message until `shutdown`.
pub async fn run(
    nats: async_nats::Client,
    subject: String,
    mode: Mode,
    sockets: Arc<FiSockets>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut sub = nats.subscribe(subject).await?;
    loop {
        let msg = tokio::select! {
            () = shutdown.cancelled() => break,
            m = sub.next() => match m { Some(m) => m, None => break },
        };
        let sweep: Revalidate = match serde_json::from_slice(&msg.payload) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "undecodable fi revalidation");
                continue;
            }
        };
        if mode == Mode::Off {
            continue;
        }
        for c in sweep.required {
            let closed = sockets.close_non_fi(c.community_id);
            if closed > 0 {
                metrics::counter!("buzz_gateway_fi_revalidation_closes_total").increment(closed as u64);
                tracing::info!(community = %c.community_id, closed, "closed non-fi sockets of a community that requires fi");
            }
        }
    }
    Ok(())
}
