//! NIP-FI SQL: receipts, the accepting transaction with the spec's lock order, bindings, and the
//! host lease that the drain excludes.
//!
//! Locks (PostgreSQL advisory locks are shared by every policy-service replica), always taken in
//! this order: operation UUID (exclusive) → community deletion (shared; deletion takes it
//! exclusive) → `communities` row `FOR NO KEY UPDATE` → host lease (exclusive; issuing a lease
//! tries it shared, and waits for a drain without holding a connection: [`lease`]).

use std::time::Duration;

use buzz_core::{CommunityId, Lifecycle, Pubkey};
use sqlx::{PgConnection, PgPool};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use uuid::Uuid;

use crate::fi_request::PolicyRequest;

/// Advisory lock classes (the first key of `pg_advisory_xact_lock(int, int)`).
const LOCK_OPERATION: i32 = 0x4649_0001;
const LOCK_DELETION: i32 = 0x4649_0002;
const LOCK_HOST_LEASE: i32 = 0x4649_0003;

/// How long an optional→required transition waits, holding the host lease exclusively, for the
/// optional leases issued before it (at most 1 s each) to lapse.
pub const DRAIN: Duration = Duration::from_millis(1100);

/// An accepted enable or disable (`community_auth_upgrades` row).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Receipt {
    /// The request's idempotency key.
    pub operation_id: Uuid,
    /// The target community.
    pub community_id: CommunityId,
    /// The host the request expected.
    pub expected_host: String,
    /// The actor the mediating client claimed.
    pub actor_pubkey: Pubkey,
    /// The owner the request expected.
    pub expected_owner_pubkey: Pubkey,
    /// The issuer an enable required; `None` for a disable.
    pub expected_issuer: Option<String>,
    /// The operator key that signed the request.
    pub operator_pubkey: Pubkey,
    /// The policy generation the acceptance produced.
    pub accepted_policy_generation: i64,
    /// The requested `requires_nip_fi` (true = enable).
    pub desired_requires_nip_fi: bool,
    /// The generation precondition; `None` for the legacy form.
    pub expected_policy_generation: Option<i64>,
    /// The `requires_nip_fi` precondition; `None` for the legacy form.
    pub expected_requires_nip_fi: Option<bool>,
    /// When it was accepted (unix seconds).
    pub accepted_at: i64,
}

impl Receipt {
    /// Whether `req` from `operator` means exactly what this receipt recorded: the full tuple,
    /// the action, both preconditions, the request form and the operator.
    #[must_use]
    pub fn same_meaning(&self, req: &PolicyRequest, operator: &Pubkey) -> bool {
        self.community_id == req.community_id
            && self.expected_host == req.expected_host
            && self.actor_pubkey == req.actor_pubkey
            && self.expected_owner_pubkey == req.expected_owner_pubkey
            && self.expected_issuer == req.expected_issuer
            && self.desired_requires_nip_fi == req.desired
            && self.expected_policy_generation == req.expected_generation
            && self.expected_requires_nip_fi == req.expected_required
            && self.operator_pubkey == *operator
    }

    /// Whether it was accepted through the legacy form (no CAS preconditions).
    #[must_use]
    pub fn is_legacy(&self) -> bool {
        self.expected_policy_generation.is_none()
    }
}

const RECEIPT_COLUMNS: &str = "operation_id, community_id, expected_host, actor_pubkey, \
    expected_owner_pubkey, expected_issuer, operator_pubkey, accepted_policy_generation, \
    desired_requires_nip_fi, expected_policy_generation, expected_requires_nip_fi, \
    extract(epoch FROM accepted_at)::bigint AS accepted_at";

/// The current stored policy of a community, as the writer sees it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Current {
    /// The community.
    pub community_id: CommunityId,
    /// Its bound host.
    pub host: String,
    /// Its owner's key.
    pub owner_pubkey: Pubkey,
    /// Where it is in its life.
    pub lifecycle: Lifecycle,
    /// The stored policy requires NIP-FI.
    pub requires_nip_fi: bool,
    /// The policy version, bumped on each accepted change.
    pub policy_generation: i64,
}

const CURRENT_COLUMNS: &str =
    "id AS community_id, host, owner_pubkey, lifecycle, requires_nip_fi, policy_generation";

/// The receipt stored under `operation_id`, if any.
pub async fn receipt<'c, E>(db: E, operation_id: Uuid) -> Result<Option<Receipt>, sqlx::Error>
where
    E: sqlx::PgExecutor<'c>,
{
    sqlx::query_as(&format!("SELECT {RECEIPT_COLUMNS} FROM community_auth_upgrades WHERE operation_id = $1"))
        .bind(operation_id)
        .fetch_optional(db)
        .await
}

/// The community's current policy, `None` when it does not exist.
pub async fn current(pool: &PgPool, community_id: CommunityId) -> Result<Option<Current>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {CURRENT_COLUMNS} FROM communities WHERE id = $1"))
        .bind(community_id)
        .fetch_optional(pool)
        .await
}

/// The issuers bound to the community, sorted.
pub async fn bindings(pool: &PgPool, community_id: CommunityId) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT issuer FROM community_fi_bindings WHERE community_id = $1 ORDER BY issuer")
        .bind(community_id)
        .fetch_all(pool)
        .await
}

/// Takes the transaction-scoped advisory lock of `operation_id`, serialising requests under one id.
pub async fn lock_operation(conn: &mut PgConnection, operation_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(LOCK_OPERATION)
        .bind(operation_id.to_string())
        .execute(conn)
        .await
        .map(|_| ())
}

/// Shared by every community change; exclusive for its deletion.
pub async fn lock_deletion(
    conn: &mut PgConnection,
    community_id: CommunityId,
    exclusive: bool,
) -> Result<(), sqlx::Error> {
    let f = if exclusive { "pg_advisory_xact_lock" } else { "pg_advisory_xact_lock_shared" };
    sqlx::query(&format!("SELECT {f}($1, hashtext($2))"))
        .bind(LOCK_DELETION)
        .bind(community_id.to_string())
        .execute(conn)
        .await
        .map(|_| ())
}

/// The community row, locked `FOR NO KEY UPDATE`.
pub async fn lock_community(
    conn: &mut PgConnection,
    community_id: CommunityId,
) -> Result<Option<Current>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {CURRENT_COLUMNS} FROM communities WHERE id = $1 FOR NO KEY UPDATE"))
        .bind(community_id)
        .fetch_optional(conn)
        .await
}

/// Excludes new host leases until the transaction ends.
pub async fn lock_host_lease(conn: &mut PgConnection, host: &str) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(LOCK_HOST_LEASE)
        .bind(host)
        .execute(conn)
        .await
        .map(|_| ())
}

/// The binding row, locked against unbind until the transaction ends; false when absent.
pub async fn hold_binding(
    conn: &mut PgConnection,
    community_id: CommunityId,
    issuer: &str,
) -> Result<bool, sqlx::Error> {
    let found: Option<i32> = sqlx::query_scalar(
        "SELECT 1 FROM community_fi_bindings WHERE community_id = $1 AND issuer = $2 FOR KEY SHARE",
    )
    .bind(community_id)
    .bind(issuer)
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}

/// Advances the generation and sets the flag; returns the new generation.
pub async fn set_policy(
    conn: &mut PgConnection,
    community_id: CommunityId,
    required: bool,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE communities SET requires_nip_fi = $2, policy_generation = policy_generation + 1 \
         WHERE id = $1 RETURNING policy_generation",
    )
    .bind(community_id)
    .bind(required)
    .fetch_one(conn)
    .await
}

/// Stores the receipt of `req` by `operator`, accepted at `accepted_generation`, and returns it.
pub async fn insert_receipt(
    conn: &mut PgConnection,
    req: &PolicyRequest,
    operator: &Pubkey,
    accepted_generation: i64,
) -> Result<Receipt, sqlx::Error> {
    sqlx::query_as(&format!(
        "INSERT INTO community_auth_upgrades (operation_id, community_id, expected_host, actor_pubkey, \
         expected_owner_pubkey, expected_issuer, operator_pubkey, accepted_policy_generation, \
         desired_requires_nip_fi, expected_policy_generation, expected_requires_nip_fi) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {RECEIPT_COLUMNS}"
    ))
    .bind(req.operation_id)
    .bind(req.community_id)
    .bind(&req.expected_host)
    .bind(&req.actor_pubkey)
    .bind(&req.expected_owner_pubkey)
    .bind(&req.expected_issuer)
    .bind(operator)
    .bind(accepted_generation)
    .bind(req.desired)
    .bind(req.expected_generation)
    .bind(req.expected_required)
    .fetch_one(conn)
    .await
}

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
    pub blocked_ips: Option<sqlx::types::Json<Vec<crate::lease_rules::BlockedIp>>>,
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
        crate::lease_rules::blocked(self.blocked_ips.as_ref())
    }

    /// The kind rules of the lease.
    #[must_use]
    pub fn kinds(&self) -> buzz_core::nip86::KindRules {
        crate::lease_rules::kind_rules(self.allowed_kinds.as_ref(), self.disallowed_kinds.as_ref())
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

/// The longest a lease request waits for a drain of its host to end: the drain ([`DRAIN`]) and
/// its commit. An answer later than a second after the gateway asked is not used by it anyway.
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

/// Communities whose stored policy requires FI, read without row locks (the revalidator).
pub async fn required_communities(pool: &PgPool) -> Result<Vec<(CommunityId, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, policy_generation FROM communities WHERE requires_nip_fi AND lifecycle = 'active' ORDER BY id",
    )
    .fetch_all(pool)
    .await
}
