//! Query slots of one key over all its sockets on this gateway: each key gets one semaphore of
//! `max_inflight_queries_per_key` permits, shared by its sockets while any of them holds it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use buzz_core::Pubkey;
use tokio::sync::Semaphore;

/// Keys with sockets on this gateway, each with its query semaphore.
#[derive(Default)]
pub struct KeySlots {
    keys: Mutex<HashMap<Pubkey, Weak<Semaphore>>>,
}

impl KeySlots {
    /// The semaphore of `key` (created with `permits` when no socket of the key holds it).
    pub fn of(&self, key: &Pubkey, permits: usize) -> Arc<Semaphore> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sem) = keys.get(key).and_then(Weak::upgrade) {
            return sem;
        }
        // Entries of keys nobody holds any more are swept when the map has doubled.
        if keys.len() >= 64 && keys.len().is_power_of_two() {
            keys.retain(|_, w| w.strong_count() > 0);
        }
        let sem = Arc::new(Semaphore::new(permits));
        keys.insert(key.clone(), Arc::downgrade(&sem));
        sem
    }

    /// Keys in the table (tests).
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether the table is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sockets_of_one_key_share_its_permits_and_other_keys_do_not() {
        let slots = KeySlots::default();
        let a = Pubkey::parse(&"a".repeat(64)).unwrap();
        let b = Pubkey::parse(&"b".repeat(64)).unwrap();
        let (a1, a2) = (slots.of(&a, 2), slots.of(&a, 2));
        let _p = a1.clone().try_acquire_owned().unwrap();
        let _q = a2.clone().try_acquire_owned().unwrap();
        assert!(a1.clone().try_acquire_owned().is_err(), "the key's two permits are taken");
        assert!(slots.of(&b, 2).try_acquire_owned().is_ok());
    }

    #[test]
    fn a_key_nobody_holds_starts_afresh() {
        let slots = KeySlots::default();
        let a = Pubkey::parse(&"a".repeat(64)).unwrap();
        let sem = slots.of(&a, 1);
        let permit = sem.clone().try_acquire_owned().unwrap();
        drop(permit);
        drop(sem);
        assert_eq!(slots.of(&a, 1).available_permits(), 1);
    }
}
