//! Subject names. A prefix (default `buzz`) isolates clusters that share one NATS server.

use buzz_core::CommunityId;

/// Queue groups: any replica answers any request. The write-service's group on `write`.
pub const WRITE_GROUP: &str = "write";
/// The query-service's queue group on `query`, `access` and `chat`.
pub const QUERY_GROUP: &str = "query";
/// The snapshot-service's queue group on `snapshot`.
pub const SNAPSHOT_GROUP: &str = "snapshot";
/// The policy-service's queue group on `policy.lease`.
pub const POLICY_GROUP: &str = "policy";

/// Builds every subject name under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    prefix: String,
}

impl Subjects {
    /// `prefix` must be a non-empty NATS token sequence without wildcards or spaces.
    pub fn new(prefix: &str) -> Result<Self, String> {
        let ok = !prefix.is_empty()
            && prefix.split('.').all(|t| {
                !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            });
        if ok {
            Ok(Self { prefix: prefix.to_owned() })
        } else {
            Err(format!("invalid NATS subject prefix {prefix:?}: use dot-separated [A-Za-z0-9_-] tokens"))
        }
    }
    /// The prefix, e.g. `buzz`.
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
    /// `<p>.v1.write`: [`WriteRequest`](crate::payload::WriteRequest)s, sent by the gateway (WebSocket and
    /// HTTP writes), answered by the write-service (queue group `write`).
    #[must_use]
    pub fn write(&self) -> String {
        format!("{}.v1.write", self.prefix)
    }
    /// `<p>.v1.query`: [`QueryRequest`](crate::payload::QueryRequest)s, sent by the gateway (REQ, COUNT,
    /// `POST /query`), answered in frames by the query-service (queue group `query`).
    #[must_use]
    pub fn query(&self) -> String {
        format!("{}.v1.query", self.prefix)
    }
    /// `<p>.v1.query.cancel`: [`QueryCancel`](crate::payload::QueryCancel)s, published by the
    /// gateway when a query's socket, subscription or HTTP client is gone; every query replica
    /// subscribes (no queue group), since any of them may hold the query.
    #[must_use]
    pub fn query_cancel(&self) -> String {
        format!("{}.v1.query.cancel", self.prefix)
    }
    /// Membership and channel-read answers the gateway needs (served by the query-service). `v2`:
    /// each access request has its own reply type (`v1` answered all three with one struct).
    #[must_use]
    pub fn access(&self) -> String {
        format!("{}.v2.access", self.prefix)
    }
    /// The chat read model (summaries, mentions), served by the query-service.
    #[must_use]
    pub fn chat(&self) -> String {
        format!("{}.v1.chat", self.prefix)
    }
    /// `<p>.v1.manage`: [`ManageRequest`](crate::manage::ManageRequest)s (NIP-86), sent by the
    /// gateway, answered by the write-service (queue group `write`).
    #[must_use]
    pub fn manage(&self) -> String {
        format!("{}.v1.manage", self.prefix)
    }
    /// `<p>.v1.snapshot`: snapshot requests, sent by the gateway's `POST /query`, answered in frames by
    /// the snapshot-service (queue group `snapshot`).
    #[must_use]
    pub fn snapshot(&self) -> String {
        format!("{}.v1.snapshot", self.prefix)
    }
    /// `<p>.v1.snapshot.purge`: [`PurgeCaptures`](crate::snapshot::PurgeCaptures) of a community
    /// being deleted, sent by the policy-service's community deletion, answered by the
    /// snapshot-service (queue group `snapshot`), which alone knows how its captures are stored.
    #[must_use]
    pub fn snapshot_purge(&self) -> String {
        format!("{}.v1.snapshot.purge", self.prefix)
    }
    /// `<p>.v1.policy.lease`: host → community leases, asked by the gateway's host cache, answered by
    /// the policy-service (queue group `policy`).
    #[must_use]
    pub fn policy_lease(&self) -> String {
        format!("{}.v1.policy.lease", self.prefix)
    }
    /// `<p>.v1.live.<community>`: [`LiveEvent`](crate::payload::LiveEvent)s, published by the write-service
    /// after commit.
    #[must_use]
    pub fn live(&self, community: CommunityId) -> String {
        format!("{}.v1.live.{community}", self.prefix)
    }
    /// `<p>.v1.live.*`: every community's live events, subscribed by each gateway.
    #[must_use]
    pub fn live_all(&self) -> String {
        format!("{}.v1.live.*", self.prefix)
    }
    /// `<p>.v1.access.<community>`: [`AccessChanged`](crate::payload::AccessChanged) notices, published by
    /// the write-service when membership or channel access changes.
    #[must_use]
    pub fn access_changed(&self, community: CommunityId) -> String {
        format!("{}.v1.access.{community}", self.prefix)
    }
    /// `<p>.v1.access.*`: every community's access notices, subscribed by each gateway to drop cached
    /// answers.
    #[must_use]
    pub fn access_changed_all(&self) -> String {
        format!("{}.v1.access.*", self.prefix)
    }
    /// NIP-FI revalidation: the communities whose stored policy requires FI, fanned out by the
    /// policy-service's revalidator to every gateway.
    #[must_use]
    pub fn fi_revalidate(&self) -> String {
        format!("{}.v1.fi.revalidate", self.prefix)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_with_wildcards_or_spaces_is_refused() {
        assert!(Subjects::new("buzz").is_ok());
        assert!(Subjects::new("t.abc-1").is_ok());
        for bad in ["", "a.*", "a.>", "a b", "a..b", ".a"] {
            assert!(Subjects::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn per_community_subjects_live_under_the_wildcard_subjects() {
        let s = Subjects::new("p").unwrap();
        let c = CommunityId::nil();
        assert_eq!(s.live(c), format!("p.v1.live.{c}"));
        assert!(s.live_all().ends_with(".*"));
        assert_eq!(s.access_changed(c), format!("p.v1.access.{c}"));
        assert_ne!(s.access(), s.access_changed(c));
    }
}
