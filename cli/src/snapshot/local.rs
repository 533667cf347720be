//! The client's local writes in the order the relay acknowledged them: the local half of the
//! write boundary a snapshot reconciles against.

use std::sync::{Arc, Mutex, PoisonError};

use buzz_core::Event;

/// Writes the relay acknowledged (`OK true`), in acknowledgement order. Clones share one log:
/// the caller keeps recording while a capture runs, and the capture notes how many were
/// recorded just before its `start` was sent (its boundary).
///
/// A write not yet acknowledged is the caller's outbox, not a record: once acknowledged it is
/// recorded here, and the live subscription delivers it as well.
#[derive(Clone, Default, Debug)]
pub struct LocalWrites(Arc<Mutex<Vec<Event>>>);

impl LocalWrites {
    /// An empty log.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a write the relay acknowledged with `OK true`.
    pub fn acknowledged(&self, ev: Event) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).push(ev);
    }

    /// Writes recorded so far (the boundary's position).
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// True when nothing is recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every recorded write, in acknowledgement order.
    #[must_use]
    pub fn records(&self) -> Vec<Event> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}
