//! NIP-FI SQL: receipts, the accepting transaction with the spec's lock order and bindings; the
//! host lease that the drain excludes is read in `leases/store.rs`.
//!
//! Locks (PostgreSQL advisory locks are shared by every policy-service replica), always taken in
//! this order: operation UUID (exclusive) → community deletion (shared; deletion takes it
//! exclusive) → `communities` row `FOR NO KEY UPDATE` → host lease (exclusive; issuing a lease
//! tries it shared, and waits for a drain without holding a connection: `leases::store::lease`).

use std::time::Duration;

use buzz_core::{CommunityId, Lifecycle, Pubkey};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::nip_fi::request::PolicyRequest;

/// Advisory lock classes (the first key of `pg_advisory_xact_lock(int, int)`).
const LOCK_OPERATION: i32 = 0x4649_0001;
const LOCK_DELETION: i32 = 0x4649_0002;
pub(crate) const LOCK_HOST_LEASE: i32 = 0x4649_0003;

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

pub(crate) const CURRENT_COLUMNS: &str =
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

/// Communities whose stored policy requires FI, read without row locks (the revalidator).
pub async fn required_communities(pool: &PgPool) -> Result<Vec<(CommunityId, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, policy_generation FROM communities WHERE requires_nip_fi AND lifecycle = 'active' ORDER BY id",
    )
    .fetch_all(pool)
    .await
}
