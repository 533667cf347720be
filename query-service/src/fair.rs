//! The query capacity of one replica, shared fairly between communities.
//!
//! Every community's queries draw on the same database connections. The gate lets at most
//! `running` queries hold one at once, at most `per_key_running` of them for one community, and
//! keeps at most `per_key_waiting` more of a community waiting; past that a query is refused at
//! once ([`Busy`]). A freed slot goes to the next community in turn that has a query waiting and
//! room under its share (round robin), so one community can never take every slot while another
//! waits, and a community's burst waits behind its own queries only.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// How the gate is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Queries running at once in this replica (each holds a database connection).
    pub running: usize,
    /// Queries of one community running at once.
    pub per_key_running: usize,
    /// Queries of one community waiting for a slot; one more is refused.
    pub per_key_waiting: usize,
}

/// A community already has its whole queue waiting: the query is refused, not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many queries of this community are waiting")]
pub struct Busy;

/// The gate. Cheap to share behind an `Arc`.
pub struct FairGate<K: Eq + Hash + Clone> {
    shares: Shares,
    state: Mutex<State<K>>,
}

struct State<K: Eq + Hash + Clone> {
    running: usize,
    keys: HashMap<K, KeyState<K>>,
    /// Communities with a query waiting, in turn order (each at most once).
    turn: VecDeque<K>,
}

struct KeyState<K: Eq + Hash + Clone> {
    running: usize,
    waiting: VecDeque<oneshot::Sender<Slot<K>>>,
}

/// A running slot; dropping it frees the slot for the next community in turn.
pub struct Slot<K: Eq + Hash + Clone> {
    gate: Arc<FairGate<K>>,
    key: K,
    /// Whether the gate counted this slot (a slot handed to a waiter who already left was not).
    counted: bool,
}

impl<K: Eq + Hash + Clone> FairGate<K> {
    /// A gate of `shares` (each count at least 1).
    #[must_use]
    pub fn new(shares: Shares) -> Arc<Self> {
        let shares = Shares {
            running: shares.running.max(1),
            per_key_running: shares.per_key_running.max(1),
            per_key_waiting: shares.per_key_waiting,
        };
        Arc::new(Self {
            shares,
            state: Mutex::new(State { running: 0, keys: HashMap::new(), turn: VecDeque::new() }),
        })
    }

    /// The gate's sizes.
    #[must_use]
    pub fn shares(&self) -> Shares {
        self.shares
    }

    /// Waits for a running slot for `key`, or refuses at once when `key` already has its whole
    /// queue waiting. Dropping the returned future gives up the place in the queue.
    pub async fn acquire(self: &Arc<Self>, key: K) -> Result<Slot<K>, Busy> {
        let rx = {
            let mut st = self.lock();
            let State { running, keys, turn } = &mut *st;
            let k =
                keys.entry(key.clone()).or_insert_with(|| KeyState { running: 0, waiting: VecDeque::new() });
            if *running < self.shares.running
                && k.running < self.shares.per_key_running
                && k.waiting.is_empty()
            {
                *running += 1;
                k.running += 1;
                return Ok(Slot { gate: self.clone(), key, counted: true });
            }
            k.waiting.retain(|w| !w.is_closed());
            if k.waiting.len() >= self.shares.per_key_waiting {
                if k.running == 0 && k.waiting.is_empty() {
                    keys.remove(&key);
                }
                return Err(Busy);
            }
            let (tx, rx) = oneshot::channel();
            k.waiting.push_back(tx);
            if !turn.contains(&key) {
                turn.push_back(key.clone());
            }
            rx
        };
        // The slot travels in the channel: if this future is dropped after it was handed over,
        // dropping the channel drops the slot, which frees it again.
        rx.await.map_err(|_| Busy)
    }

    /// Queries running now, and those waiting (tests and metrics).
    #[must_use]
    pub fn load(&self) -> (usize, usize) {
        let st = self.lock();
        (st.running, st.keys.values().map(|k| k.waiting.iter().filter(|w| !w.is_closed()).count()).sum())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Frees `key`'s slot and hands free slots to waiting communities in turn.
    fn release(self: &Arc<Self>, key: &K) {
        let mut st = self.lock();
        let State { running, keys, turn } = &mut *st;
        *running -= 1;
        if let Some(k) = keys.get_mut(key) {
            k.running -= 1;
        }
        // Each pass over the turn order either hands out a slot or drops a community without a
        // live waiter or without room; it ends when no slot is free or nobody can take one.
        let mut skipped = 0;
        while *running < self.shares.running && skipped < turn.len() {
            let Some(next) = turn.pop_front() else { break };
            let Some(k) = keys.get_mut(&next) else { continue };
            if k.running >= self.shares.per_key_running {
                turn.push_back(next);
                skipped += 1;
                continue;
            }
            while let Some(w) = k.waiting.pop_front() {
                let slot = Slot { gate: self.clone(), key: next.clone(), counted: true };
                match w.send(slot) {
                    Ok(()) => {
                        *running += 1;
                        k.running += 1;
                        skipped = 0;
                        break;
                    }
                    // The waiter gave up: its slot was never counted, so dropping it releases
                    // nothing (a release would lock the gate again from inside this loop).
                    Err(mut slot) => slot.counted = false,
                }
            }
            if k.waiting.is_empty() {
                if k.running == 0 {
                    keys.remove(&next);
                }
            } else {
                turn.push_back(next);
            }
        }
        if let Some(k) = keys.get(key) {
            if k.running == 0 && k.waiting.is_empty() {
                keys.remove(key);
            }
        }
    }
}

impl<K: Eq + Hash + Clone> Drop for Slot<K> {
    fn drop(&mut self) {
        if self.counted {
            self.gate.release(&self.key);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn gate(running: usize, per_key_running: usize, per_key_waiting: usize) -> Arc<FairGate<&'static str>> {
        FairGate::new(Shares { running, per_key_running, per_key_waiting })
    }

    async fn waits<T>(f: impl std::future::Future<Output = T>) -> bool {
        tokio::time::timeout(Duration::from_millis(20), f).await.is_err()
    }

    #[tokio::test]
    async fn a_community_past_its_share_waits_while_another_runs_at_once() {
        let g = gate(4, 2, 8);
        let a1 = g.acquire("a").await.unwrap();
        let _a2 = g.acquire("a").await.unwrap();
        assert!(waits(g.acquire("a")).await, "a third query of a waits at a share of 2");
        let _b1 = g.acquire("b").await.unwrap();
        assert_eq!(g.load().0, 3);
        drop(a1);
        assert_eq!(g.load(), (2, 0));
    }

    #[tokio::test]
    async fn a_community_with_its_queue_full_is_refused_at_once_and_others_are_not() {
        let g = gate(1, 1, 2);
        let _a = g.acquire("a").await.unwrap();
        let w1 = tokio::spawn({
            let g = g.clone();
            async move { g.acquire("a").await.map(|_| ()) }
        });
        let w2 = tokio::spawn({
            let g = g.clone();
            async move { g.acquire("a").await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(g.acquire("a").await.err(), Some(Busy));
        assert!(waits(g.acquire("b")).await, "b waits for the one slot but is not refused");
        w1.abort();
        w2.abort();
    }

    #[tokio::test]
    async fn freed_slots_go_round_robin_between_waiting_communities() {
        let g = gate(1, 1, 16);
        let first = g.acquire("a").await.unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // a queues three queries before b queues its one: b still runs second.
        for key in ["a", "a", "a", "b"] {
            let (g, order) = (g.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _slot = g.acquire(key).await.unwrap();
                order.lock().unwrap().push(key);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec!["a", "b", "a", "a"]);
        assert_eq!(g.load(), (0, 0));
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_leaves_no_slot_behind() {
        let g = gate(1, 1, 4);
        let held = g.acquire("a").await.unwrap();
        assert!(waits(g.acquire("b")).await);
        // The abandoned waiter's place is skipped; the slot goes to the next live one.
        let c = tokio::spawn({
            let g = g.clone();
            async move { g.acquire("c").await.is_ok() }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(held);
        assert!(c.await.unwrap());
        assert_eq!(g.load(), (0, 0));
        let _again = g.acquire("b").await.unwrap();
    }

    #[tokio::test]
    async fn the_whole_capacity_is_used_when_only_one_community_asks_up_to_its_share() {
        let g = gate(8, 3, 8);
        let held: Vec<_> = futures::future::join_all((0..3).map(|_| g.acquire("a"))).await;
        assert!(held.iter().all(Result::is_ok));
        assert!(waits(g.acquire("a")).await);
        assert_eq!(g.load().0, 3);
    }
}
