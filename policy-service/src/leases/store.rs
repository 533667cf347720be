//! The host lease as the policy-service reads it for gateways: the active community bound to a
//! host with its profile, kind rules and FI issuers, read under the host lease lock that an
//! optional→required NIP-FI transition holds while it drains (`nip_fi/store.rs`, the lock order).

use std::time::Duration;

use sqlx::{PgConnection, PgPool};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::nip_fi::store::{Current, CURRENT_COLUMNS, LOCK_HOST_LEASE};

/// A community's NIP-11 profile columns (schema 2), read through `to_jsonb` of the row so that
/// the same statement answers `NULL`s on the 0.1.0 schema, which lacks them (expand/contract:
/// this build runs on both; docs/operations.md "Changing the schema").
pub const PROFILE_COLUMNS: &str = "to_jsonb(communities) ->> 'name' AS profile_name, \
     to_jsonb(communities) ->> 'description' AS profile_description, \
     to_jsonb(communities) ->> 'icon' AS profile_icon, \
     nullif(to_jsonb(communities) -> 'allowed_kinds', 'null') AS allowed_kinds, \
     nullif(to_jsonb(communities) -> 'disallowed_kinds', 'null') AS disallowed_kinds, \
     nullif(to_jsonb(communities) -> 'blocked_ips', 'null') AS blocked_ips";

/// [`Current`] and the community's profile, as a host lease answers them.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LeaseRow {
    /// The stored policy.
    #[sqlx(flatten)]
    pub current: Current,
    /// NIP-11 `name`, when set.
    pub profile_name: Option<String>,
    /// NIP-11 `description`, when set.
    pub profile_description: Option<String>,
    /// NIP-11 `icon`, when set.
    pub profile_icon: Option<String>,
    /// NIP-86 kind allowlist (schema 4; `NULL` before it and when unset).
    pub allowed_kinds: Option<sqlx::types::Json<Vec<u32>>>,
    /// NIP-86 disallowed kinds.
    pub disallowed_kinds: Option<sqlx::types::Json<Vec<u32>>>,
    /// NIP-86 blocked addresses, `[{"ip", "reason"}]`.
    pub blocked_ips: Option<sqlx::types::Json<Vec<crate::leases::rules::BlockedIp>>>,
}

impl LeaseRow {
    /// The profile of the lease.
    #[must_use]
    pub fn profile(&self) -> buzz_bus::CommunityProfile {
        buzz_bus::CommunityProfile {
            name: self.profile_name.clone(),
            description: self.profile_description.clone(),
            icon: self.profile_icon.clone(),
        }
    }

    /// The blocked addresses of the lease.
    #[must_use]
    pub fn blocked_ips(&self) -> Vec<std::net::IpAddr> {
        crate::leases::rules::blocked(self.blocked_ips.as_ref())
    }

    /// The kind rules of the lease.
    #[must_use]
    pub fn kinds(&self) -> buzz_core::nip86::KindRules {
        crate::leases::rules::kind_rules(self.allowed_kinds.as_ref(), self.disallowed_kinds.as_ref())
    }
}

/// What a host lease read found.
#[derive(Debug)]
pub enum Lease {
    /// The active community bound to the host, and its bound FI issuers.
    Bound(Box<LeaseRow>, Vec<String>),
    /// No active community is bound to the host.
    Unknown,
    /// An optional→required transition is draining this host's leases, and this request may not
    /// wait for it: [`DRAIN_WAITERS`] requests already wait, or the drain outlasted [`LEASE_WAIT`].
    Draining,
}

/// The longest a lease request waits for a drain of its host to end: the drain
/// ([`crate::nip_fi::store::DRAIN`]) and its commit. An answer later than a second after the
/// gateway asked is not used by it anyway.
pub const LEASE_WAIT: Duration = Duration::from_millis(1500);
/// Pause between tries of a drained host's lease; no pool connection is held meanwhile.
const LEASE_RETRY: Duration = Duration::from_millis(50);
/// Lease requests of one replica that may wait for drains at once (each keeps one of the lease
/// subject's 64 handler slots); beyond that a drained host's lease is answered "draining" at once,
/// so leases of every other host keep their slots and the pool's connections.
pub const DRAIN_WAITERS: usize = 16;

/// The active community bound to `host` and its bound FI issuers, read after taking the host
/// lease shared: while an optional→required transition drains it, the lease is tried again
/// every [`LEASE_RETRY`] without holding a pool connection (a waiting request must never starve
/// other hosts' leases of the pool), taking one of `waiters`' permits, up to [`LEASE_WAIT`].
pub async fn lease(pool: &PgPool, host: &str, waiters: &Semaphore) -> Result<Lease, sqlx::Error> {
    let deadline = Instant::now() + LEASE_WAIT;
    let mut waiting = None;
    loop {
        let mut tx = pool.begin().await?;
        let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock_shared($1, hashtext($2))")
            .bind(LOCK_HOST_LEASE)
            .bind(host)
            .fetch_one(&mut *tx)
            .await?;
        if free {
            let lease = read_lease(&mut tx, host).await?;
            tx.commit().await?;
            return Ok(lease);
        }
        // Back to the pool before waiting.
        tx.rollback().await?;
        if waiting.is_none() {
            let Ok(permit) = waiters.try_acquire() else { return Ok(Lease::Draining) };
            waiting = Some(permit);
        }
        if Instant::now() + LEASE_RETRY > deadline {
            return Ok(Lease::Draining);
        }
        tokio::time::sleep(LEASE_RETRY).await;
    }
}

/// The active community bound to `host`, for a gateway whose FI mode is `off`: its identity
/// and profile only, without its FI bindings and without the host lease lock (a drain does not
/// hold it up): "off does not require an FI policy read". Its issuers are empty.
pub async fn identity(pool: &PgPool, host: &str) -> Result<Lease, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    Ok(match bound_row(&mut conn, host).await? {
        Some(row) => Lease::Bound(Box::new(row), Vec::new()),
        None => Lease::Unknown,
    })
}

async fn bound_row(conn: &mut PgConnection, host: &str) -> Result<Option<LeaseRow>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {CURRENT_COLUMNS}, {PROFILE_COLUMNS} FROM communities WHERE host = $1 AND lifecycle = 'active'"
    ))
    .bind(host)
    .fetch_optional(conn)
    .await
}

async fn read_lease(tx: &mut PgConnection, host: &str) -> Result<Lease, sqlx::Error> {
    let Some(row) = bound_row(&mut *tx, host).await? else { return Ok(Lease::Unknown) };
    let issuers: Vec<String> = sqlx::query_scalar(
        "SELECT issuer FROM community_fi_bindings WHERE community_id = $1 ORDER BY issuer",
    )
    .bind(row.current.community_id)
    .fetch_all(&mut *tx)
    .await?;
    Ok(Lease::Bound(Box::new(row), issuers))
}
