//! Host → community binding, leased from the policy-service and cached for at most the lease.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use buzz_bus::retry::Retry;
use buzz_bus::{BusError, CommunityLease, LeaseReply, LeaseRequest, Subjects};

/// Host → community leases from the policy-service, each cached until its lease ends.
pub struct HostCache {
    nats: buzz_bus::Bus,
    subjects: Subjects,
    retry: Retry,
    entries: Mutex<HashMap<String, (Option<CommunityLease>, Instant)>>,
}

/// Entries kept at most; beyond that the cache is cleared (hosts are few; this bounds abuse).
const MAX_ENTRIES: usize = 10_000;

impl HostCache {
    /// An empty cache that asks over `nats` on `subjects.policy_lease()`, retrying per `retry`.
    #[must_use]
    pub fn new(nats: buzz_bus::Bus, subjects: Subjects, retry: Retry) -> Self {
        Self { nats, subjects, retry, entries: Mutex::new(HashMap::new()) }
    }

    /// The community bound to an already-normalised host, or `None` for an unknown host.
    pub async fn lookup(&self, host: &str) -> Result<Option<CommunityLease>, BusError> {
        if let Some((lease, until)) = self.entries.lock().map_err(|_| BusError::internal())?.get(host) {
            if *until > Instant::now() {
                return Ok(lease.clone());
            }
        }
        let req = LeaseRequest { host: host.to_owned() };
        // The lease runs from when it was requested, never from when the answer arrived, so it
        // lapses before the policy-service's drain (which counts from its own later exclusion) ends.
        let requested = Instant::now();
        let reply: Result<LeaseReply, BusError> =
            buzz_bus::retry::request_retrying(&self.nats, self.subjects.policy_lease(), &req, self.retry)
                .await?;
        let reply = reply?;
        let until = requested + Duration::from_millis(reply.lease_ms.min(1000));
        let mut entries = self.entries.lock().map_err(|_| BusError::internal())?;
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(host.to_owned(), (reply.community.clone(), until));
        Ok(reply.community)
    }
}
