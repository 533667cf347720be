//! Revalidation of existing sockets: every socket registers here with whether it is
//! FI-admitted; on `<p>.v1.fi.revalidate` (the policy-service's sweep of communities whose stored
//! policy requires FI) this gateway closes every non-FI socket of those communities, unless
//! `BUZZ_NIP_FI_MODE=off`. FI-admitted sockets stay until their own deadline. A community that
//! is no longer listed (disable) gets nothing: no socket is reopened or logged out. The listener
//! is supervised: restarted whenever it ends, and the gateway is not ready while it is down.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buzz_core::CommunityId;
use buzz_fi::revalidate::Revalidate;
use buzz_fi::Mode;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// One socket: whether FI-admitted, and the token that closes it.
type Entry = (bool, CancellationToken);

/// This gateway's sockets by community, each with whether it is FI-admitted.
#[derive(Default)]
pub struct FiSockets {
    sockets: Mutex<HashMap<CommunityId, HashMap<u64, Entry>>>,
    next_id: AtomicU64,
    /// The revalidation listener is subscribed ([`supervise`] sets and clears it).
    listening: AtomicBool,
}

/// Removes the socket when dropped.
pub struct FiRegistration {
    sockets: Arc<FiSockets>,
    community: CommunityId,
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
    pub fn register(self: &Arc<Self>, community: CommunityId, fi_admitted: bool) -> FiRegistration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let revoked = CancellationToken::new();
        if let Ok(mut map) = self.sockets.lock() {
            map.entry(community).or_default().insert(id, (fi_admitted, revoked.clone()));
        }
        FiRegistration { sockets: self.clone(), community, id, revoked }
    }

    /// Whether the revalidation listener is subscribed and acting on sweeps.
    #[must_use]
    pub fn listening(&self) -> bool {
        self.listening.load(Ordering::Acquire)
    }

    /// Closes every non-FI socket of `community`; returns how many were told to close.
    pub fn close_non_fi(&self, community: CommunityId) -> usize {
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

/// First wait before restarting a listener that ended; doubles up to [`RESTART_MAX`].
const RESTART_FIRST: Duration = Duration::from_millis(100);
/// Longest wait between restarts.
const RESTART_MAX: Duration = Duration::from_secs(5);

/// Runs the revalidation listener until `shutdown`, subscribing with `subscribe` and restarting
/// it (with a bounded backoff) whenever it ends: its subscription closed or could not be made, or
/// it panicked. [`FiSockets::listening`] is false while it is down, and `/readyz` with it, so a
/// gateway that cannot close non-FI sockets of required communities is taken out of rotation
/// instead of silently serving them.
pub async fn supervise<S, F>(
    mut subscribe: S,
    mode: Mode,
    sockets: Arc<FiSockets>,
    shutdown: CancellationToken,
) where
    S: FnMut() -> F,
    F: Future<Output = anyhow::Result<async_nats::Subscriber>>,
{
    let mut backoff = RESTART_FIRST;
    while !shutdown.is_cancelled() {
        match subscribe().await {
            Ok(sub) => {
                sockets.listening.store(true, Ordering::Release);
                backoff = RESTART_FIRST;
                let run = tokio::spawn(listen(sub, mode, sockets.clone(), shutdown.clone()));
                let ended = run.await;
                sockets.listening.store(false, Ordering::Release);
                if shutdown.is_cancelled() {
                    break;
                }
                metrics::counter!("buzz_gateway_fi_listener_restarts_total").increment(1);
                match ended {
                    Ok(()) => tracing::error!("fi revalidation listener ended; restarting"),
                    Err(e) => tracing::error!(error = %e, "fi revalidation listener failed; restarting"),
                }
            }
            Err(e) => tracing::error!(error = %e, "fi revalidation listener cannot subscribe; retrying"),
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(RESTART_MAX);
    }
}

/// Acts on every revalidation message of `sub` until it ends or `shutdown`.
async fn listen(
    mut sub: async_nats::Subscriber,
    mode: Mode,
    sockets: Arc<FiSockets>,
    shutdown: CancellationToken,
) {
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
}
