//! What the one-process tool's connections count: per-publisher and per-subscriber stats and the
//! shared log of send instants.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use crate::latency::{Latency, Reasons};

/// When each published event was sent, by event id: the publishers write, the subscribers read to
/// measure live delivery latency. A plain mutex: the critical sections are one hash-map operation.
#[derive(Debug, Default)]
pub struct SendLog(Mutex<HashMap<String, Instant>>);

impl SendLog {
    pub fn insert(&self, id: &str, at: Instant) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(id.to_string(), at);
        }
    }

    #[must_use]
    pub fn get(&self, id: &str) -> Option<Instant> {
        self.0.lock().ok().and_then(|m| m.get(id).copied())
    }
}

/// What one publisher connection observed.
#[derive(Debug, Clone, Default)]
pub struct PublisherStats {
    /// EVENT messages written to the socket.
    pub sent: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub reasons: Reasons,
    /// EVENTs whose OK did not arrive within `--ok-timeout` (or before the drain ended).
    pub ok_timeouts: u64,
    /// OKs for ids this connection was not waiting for (late after a timeout, or duplicates).
    pub unmatched_oks: u64,
    pub ok_latency: Latency,
    /// When this connection stopped sending and when its last OK arrived.
    pub send_end: Option<Instant>,
    pub last_ok: Option<Instant>,
    pub errors: Reasons,
    pub notices: Reasons,
}

impl PublisherStats {
    pub fn merge(&mut self, o: &Self) {
        self.sent += o.sent;
        self.accepted += o.accepted;
        self.rejected += o.rejected;
        self.reasons.merge(&o.reasons);
        self.ok_timeouts += o.ok_timeouts;
        self.unmatched_oks += o.unmatched_oks;
        self.ok_latency.merge(&o.ok_latency);
        self.send_end = self.send_end.max(o.send_end);
        self.last_ok = self.last_ok.max(o.last_ok);
        self.errors.merge(&o.errors);
        self.notices.merge(&o.notices);
    }
}

/// What one subscriber connection observed after its EOSE.
#[derive(Debug, Clone, Default)]
pub struct SubscriberStats {
    /// Receptions of events this run published (first reception per subscriber).
    pub delivered: u64,
    /// Repeated receptions of the same event on the same subscription.
    pub duplicates: u64,
    /// Events on the subscription that this run did not publish.
    pub unknown: u64,
    pub delivery_latency: Latency,
    pub errors: Reasons,
    pub notices: Reasons,
}

impl SubscriberStats {
    pub fn merge(&mut self, o: &Self) {
        self.delivered += o.delivered;
        self.duplicates += o.duplicates;
        self.unknown += o.unknown;
        self.delivery_latency.merge(&o.delivery_latency);
        self.errors.merge(&o.errors);
        self.notices.merge(&o.notices);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn publisher_merge() {
        let t = Instant::now();
        let mut a = PublisherStats { sent: 2, accepted: 1, rejected: 1, ..Default::default() };
        a.reasons.add("blocked: x");
        a.last_ok = Some(t);
        let mut b = PublisherStats { sent: 3, accepted: 3, ..Default::default() };
        b.last_ok = Some(t + Duration::from_secs(1));
        a.merge(&b);
        assert_eq!((a.sent, a.accepted, a.rejected), (5, 4, 1));
        assert_eq!(a.last_ok, Some(t + Duration::from_secs(1)));
    }

    #[test]
    fn send_log() {
        let log = SendLog::default();
        let t = Instant::now();
        log.insert("a", t);
        assert_eq!(log.get("a"), Some(t));
        assert_eq!(log.get("b"), None);
    }
}
