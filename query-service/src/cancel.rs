//! Queries a gateway gave up on: the socket closed, the subscription was closed or replaced, the
//! HTTP client left. The gateway names them on `<p>.v1.query.cancel`; every replica cancels its
//! copy (waiting for a slot or running, in PostgreSQL too: see `Querier::run`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Cancellations remembered for queries not (yet) taken here: a cancel may overtake its request
/// (they travel on different subjects) or name a query another replica runs.
const REMEMBERED: usize = 4096;

/// The queries of this replica that a cancel can name.
#[derive(Default)]
pub struct Inflight {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: HashMap<Uuid, CancellationToken>,
    early: HashSet<Uuid>,
    early_order: VecDeque<Uuid>,
}

/// Keeps a query cancellable while it lives; dropping it forgets the query.
pub struct Registered<'a> {
    inflight: &'a Inflight,
    id: Uuid,
    /// Fires when the query is cancelled.
    pub token: CancellationToken,
}

impl Inflight {
    /// Registers query `id`; its token is already cancelled when a cancel for it came first.
    pub fn register(&self, id: Uuid) -> Registered<'_> {
        let token = CancellationToken::new();
        let mut st = self.lock();
        if st.early.remove(&id) {
            token.cancel();
        }
        st.running.insert(id, token.clone());
        Registered { inflight: self, id, token }
    }

    /// Cancels each of `ids` that runs here, and remembers the others for a while.
    pub fn cancel(&self, ids: &[Uuid]) {
        let mut st = self.lock();
        for id in ids {
            if let Some(token) = st.running.get(id) {
                token.cancel();
                continue;
            }
            if st.early.insert(*id) {
                st.early_order.push_back(*id);
            }
            while st.early_order.len() > REMEMBERED {
                if let Some(old) = st.early_order.pop_front() {
                    st.early.remove(&old);
                }
            }
        }
    }

    /// Queries registered now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().running.len()
    }

    /// Whether no query is registered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.inflight.lock().running.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_reaches_a_registered_query_and_one_registered_after_it() {
        let inflight = Inflight::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let ra = inflight.register(a);
        inflight.cancel(&[a, b]);
        assert!(ra.token.is_cancelled());
        let rb = inflight.register(b);
        assert!(rb.token.is_cancelled(), "a cancel that overtook its request still counts");
        drop((ra, rb));
        assert!(inflight.is_empty());
        let again = inflight.register(b);
        assert!(!again.token.is_cancelled(), "an early cancel is used once");
    }

    #[test]
    fn early_cancels_are_remembered_up_to_a_bound() {
        let inflight = Inflight::default();
        let ids: Vec<Uuid> = (0..REMEMBERED + 10).map(|_| Uuid::new_v4()).collect();
        inflight.cancel(&ids);
        assert!(!inflight.register(ids[0]).token.is_cancelled());
        assert!(inflight.register(ids[REMEMBERED + 9]).token.is_cancelled());
        assert_eq!(inflight.lock().early.len(), REMEMBERED - 1);
    }
}
