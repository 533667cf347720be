//! Host → community answers for gateways on `<p>.v1.policy.lease`.

use buzz_bus::{LeaseReply, LeaseRequest};

use crate::leases::store::{self, Lease};

/// host → community, for gateways. Unknown hosts answer `community: None`. A gateway in FI mode
/// `off` asks for the identity only: no FI policy read, no drain wait. Otherwise, while an
/// optional→required NIP-FI transition drains the host's leases, the read waits without a pool
/// connection (one of `waiters`' permits) and then answers the committed state, or answers
/// `unavailable: host is draining` (see `store::lease`). Counted in `buzz_policy_leases_total`
/// by outcome (`bound`, `unknown`, `draining`, `error`).
pub async fn handle_lease(
    pool: &sqlx::PgPool,
    lease_ms: u64,
    waiters: &tokio::sync::Semaphore,
    req: &LeaseRequest,
) -> Result<LeaseReply, buzz_bus::BusError> {
    // Optional leases last at most one second (the drain waits 1.1 s).
    let lease_ms = lease_ms.min(1000);
    let Some(host) = buzz_core::host::normalize_host(&req.host) else {
        metrics::counter!("buzz_policy_leases_total", "outcome" => "unknown").increment(1);
        return Ok(LeaseReply { community: None, lease_ms });
    };
    let read = if req.identity_only {
        store::identity(pool, &host).await
    } else {
        store::lease(pool, &host, waiters).await
    };
    let (outcome, answer) = match read {
        Ok(Lease::Bound(row, fi_issuers)) => {
            let profile = row.profile();
            let kinds = row.kinds();
            let blocked_ips = row.blocked_ips();
            let c = row.current;
            let community = buzz_bus::CommunityLease {
                community_id: c.community_id,
                host: c.host,
                owner_pubkey: c.owner_pubkey,
                requires_nip_fi: c.requires_nip_fi,
                policy_generation: c.policy_generation,
                fi_issuers,
                profile,
                kinds,
                blocked_ips,
            };
            ("bound", Ok(LeaseReply { community: Some(community), lease_ms }))
        }
        Ok(Lease::Unknown) => ("unknown", Ok(LeaseReply { community: None, lease_ms })),
        Ok(Lease::Draining) => ("draining", Err(buzz_bus::BusError::unavailable("host is draining"))),
        Err(e) => {
            tracing::error!(error = %e, "host lease lookup failed");
            ("error", Err(buzz_bus::BusError::unavailable("policy store unavailable")))
        }
    };
    metrics::counter!("buzz_policy_leases_total", "outcome" => outcome).increment(1);
    answer
}
