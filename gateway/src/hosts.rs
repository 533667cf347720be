//! Host → community binding, leased from the policy-service and cached for at most the lease.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use buzz_bus::retry::Retry;
use buzz_bus::{BusError, CommunityLease, ErrorCode, LeaseReply, LeaseRequest, Subjects};

/// Host → community leases from the policy-service, each cached until its lease ends.
pub struct HostCache {
    nats: buzz_bus::Bus,
    subjects: Subjects,
    retry: Retry,
    /// Ask for the community's identity only, no FI policy (the gateway's FI mode is `off`).
    identity_only: bool,
    entries: Mutex<HashMap<String, (Option<CommunityLease>, Instant)>>,
}

/// Entries kept at most; beyond that the cache is cleared (hosts are few; this bounds abuse).
const MAX_ENTRIES: usize = 10_000;

/// The longest lease a gateway honours: the spec's "optional cache leases last at most one
/// second", which the policy-service's 1.1 s drain outlasts.
pub const MAX_LEASE: Duration = Duration::from_millis(1000);

/// Lease requests of one lookup: an answer that arrives after its own lease ended is asked for
/// again, up to this many requests in all, and then the lookup fails closed (`timeout`).
pub const LEASE_REQUESTS: u32 = 3;

impl HostCache {
    /// An empty cache that asks over `nats` on `subjects.policy_lease()`, retrying per `retry`.
    #[must_use]
    pub fn new(nats: buzz_bus::Bus, subjects: Subjects, retry: Retry) -> Self {
        Self { nats, subjects, retry, identity_only: false, entries: Mutex::new(HashMap::new()) }
    }

    /// Asks for the community's identity only, never its FI policy (for FI mode `off`, which
    /// ignores the lease's FI fields): such a lease needs no FI policy read and never waits for
    /// a drain.
    #[must_use]
    pub fn identity_only(mut self, identity_only: bool) -> Self {
        self.identity_only = identity_only;
        self
    }

    /// The community bound to an already-normalised host, or `None` for an unknown host.
    ///
    /// A lease runs from when it was requested, never from when the answer arrived, so it lapses
    /// before the policy-service's drain (which counts from its own later exclusion) ends. An
    /// answer that arrives after its lease ended (a hedged attempt's late reply, a slow replica)
    /// is therefore never used, not even once: it may predate a drain that has since committed.
    /// It is requested again ([`LEASE_REQUESTS`] requests in all).
    pub async fn lookup(&self, host: &str) -> Result<Option<CommunityLease>, BusError> {
        if let Some((lease, until)) = self.entries.lock().map_err(|_| BusError::internal())?.get(host) {
            if *until > Instant::now() {
                return Ok(lease.clone());
            }
        }
        let req = LeaseRequest { host: host.to_owned(), identity_only: self.identity_only };
        for _ in 0..LEASE_REQUESTS {
            let requested = Instant::now();
            let reply: LeaseReply =
                buzz_bus::retry::request_retrying(&self.nats, self.subjects.policy_lease(), &req, self.retry)
                    .await?;
            let until = requested + Duration::from_millis(reply.lease_ms).min(MAX_LEASE);
            if until <= Instant::now() {
                metrics::counter!("buzz_gateway_expired_leases_total").increment(1);
                tracing::warn!(
                    host,
                    lease_ms = reply.lease_ms,
                    "host lease expired on arrival; asking again"
                );
                continue;
            }
            let mut entries = self.entries.lock().map_err(|_| BusError::internal())?;
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
            entries.insert(host.to_owned(), (reply.community.clone(), until));
            return Ok(reply.community);
        }
        Err(BusError::new(ErrorCode::Timeout, "the policy-service did not answer in time"))
    }
}
