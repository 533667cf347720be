//! Live fan-out: one NATS subscription per gateway for every community, dispatched to the sockets
//! of that community on this gateway. Each socket does its own filter and access matching.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use buzz_bus::{AccessChanged, LiveEvent};
use buzz_core::CommunityId;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often the live loop looks at its NATS connection.
const BUS_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// What the bus tells a socket.
#[derive(Debug, Clone)]
pub enum Push {
    /// A live event, with its event JSON serialised once for every socket.
    Event(Arc<LiveEvent>, Arc<str>),
    /// Cached access answers of the community are stale.
    Access(Arc<AccessChanged>),
}

/// A socket's live queue and the token cancelled when it falls behind.
type Socket = (mpsc::Sender<Push>, CancellationToken);

/// Sockets by community.
#[derive(Default)]
pub struct Registry {
    sockets: RwLock<HashMap<CommunityId, HashMap<u64, Socket>>>,
    next_id: AtomicU64,
}

/// Removes the socket from the registry when dropped.
pub struct Registration {
    registry: Arc<Registry>,
    community: CommunityId,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut map) = self.registry.sockets.write() {
            if let Some(c) = map.get_mut(&self.community) {
                c.remove(&self.id);
                if c.is_empty() {
                    map.remove(&self.community);
                }
            }
        }
    }
}

impl Registry {
    /// `lagged` is cancelled when the socket falls behind live traffic.
    pub fn register(
        self: &Arc<Self>,
        community: CommunityId,
        tx: mpsc::Sender<Push>,
        lagged: CancellationToken,
    ) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut map) = self.sockets.write() {
            map.entry(community).or_default().insert(id, (tx, lagged));
        }
        Registration { registry: self.clone(), community, id }
    }

    /// Hands `push` to every socket of `community`. A socket whose queue is full is told to close
    /// (it is too slow to follow live traffic; it recovers by replaying after reconnecting).
    pub fn dispatch(&self, community: CommunityId, push: &Push) -> usize {
        let Ok(map) = self.sockets.read() else { return 0 };
        let Some(sockets) = map.get(&community) else { return 0 };
        let mut delivered = 0;
        for (tx, lagged) in sockets.values() {
            match tx.try_send(push.clone()) {
                Ok(()) => delivered += 1,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    metrics::counter!("buzz_live_overflow_total").increment(1);
                    lagged.cancel();
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        delivered
    }

    /// Tells every socket that live events were lost (the gateway lost its bus): each closes, and
    /// its client reconnects and replays, as a socket too slow to follow.
    pub fn interrupt_all(&self) -> usize {
        let Ok(map) = self.sockets.read() else { return 0 };
        let mut told = 0;
        for (_, lagged) in map.values().flat_map(HashMap::values) {
            lagged.cancel();
            told += 1;
        }
        told
    }

    /// How many sockets are registered, over all communities.
    #[must_use]
    pub fn socket_count(&self) -> usize {
        self.sockets.read().map(|m| m.values().map(HashMap::len).sum()).unwrap_or(0)
    }
}

/// Subscribes to live events and access changes for all communities and dispatches them.
pub async fn run(
    nats: async_nats::Client,
    subjects: buzz_bus::Subjects,
    registry: Arc<Registry>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut live = nats.subscribe(subjects.live_all()).await?;
    let mut access = nats.subscribe(subjects.access_changed_all()).await?;
    // Core NATS keeps nothing for a disconnected client: whatever was published while the
    // connection was down is lost for this gateway's sockets, so they are told (closed) as soon
    // as the connection is seen down, and so is every socket that registers while it stays down
    // (checked every BUS_CHECK; a loss shorter than that can pass unseen).
    let mut check = tokio::time::interval(BUS_CHECK);
    let mut connected = true;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = check.tick() => {
                let now = nats.connection_state() == async_nats::connection::State::Connected;
                if !now {
                    let told = registry.interrupt_all();
                    if connected {
                        metrics::counter!("buzz_live_bus_losses_total").increment(1);
                        tracing::warn!(sockets = told, "lost the bus: live events may be missed; sockets are closed to reconnect and replay until it is back");
                    }
                }
                connected = now;
            }
            m = live.next() => {
                let Some(m) = m else { break };
                match serde_json::from_slice::<LiveEvent>(&m.payload) {
                    Ok(ev) => {
                        let json: Arc<str> = ev.event.to_json().into();
                        let community = ev.community_id;
                        registry.dispatch(community, &Push::Event(Arc::new(ev), json));
                    }
                    Err(e) => tracing::warn!(error = %e, "undecodable live event"),
                }
            }
            m = access.next() => {
                let Some(m) = m else { break };
                let community = m.subject.rsplit('.').next().and_then(|s| CommunityId::parse(s).ok());
                match (community, serde_json::from_slice::<AccessChanged>(&m.payload)) {
                    (Some(c), Ok(change)) => {
                        registry.dispatch(c, &Push::Access(Arc::new(change)));
                    }
                    _ => tracing::warn!(subject = %m.subject, "undecodable access change"),
                }
            }
        }
    }
    Ok(())
}
