//! All SQL of the policy-service.

use buzz_bus::CommunityLease;
use buzz_core::{CommunityId, Lifecycle, Pubkey};
use serde::Serialize;
use sqlx::PgPool;

/// A community row, as the operator API answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Community {
    /// The community's id.
    pub community_id: CommunityId,
    /// The host it is bound to.
    pub host: String,
    /// Its owner's key.
    pub owner_pubkey: Pubkey,
    /// Where it is in its life.
    pub lifecycle: Lifecycle,
    /// The stored policy requires NIP-FI.
    pub requires_nip_fi: bool,
    /// The policy version, bumped on each accepted NIP-FI change.
    pub policy_generation: i64,
    /// Days revision history is kept; `None` keeps it forever.
    pub retention_days: Option<i32>,
    /// Its host's NIP-11 `name`, when set (schema 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its host's NIP-11 `description`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its host's NIP-11 `icon`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// NIP-86 kind allowlist (schema 4), for the host lease; not part of the operator's answer.
    #[serde(skip)]
    pub allowed_kinds: Option<sqlx::types::Json<Vec<u32>>>,
    /// NIP-86 disallowed kinds, for the host lease.
    #[serde(skip)]
    pub disallowed_kinds: Option<sqlx::types::Json<Vec<u32>>>,
    /// NIP-86 blocked addresses, for the host lease.
    #[serde(skip)]
    pub blocked_ips: Option<sqlx::types::Json<Vec<crate::leases::rules::BlockedIp>>>,
}

/// Why a community could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// The id exists with another host, owner or retention.
    #[error("the community id is in use with other settings")]
    CommunityConflict,
    /// The host is already bound to another community.
    #[error("the host is bound to another community")]
    HostConflict,
    /// The database failed.
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
}

/// The profile columns are read through `to_jsonb` of the row, which answers `NULL` on the 0.1.0
/// schema that lacks them (this build runs on both; docs/operations.md "Changing the schema").
const COLUMNS: &str = "id AS community_id, host, owner_pubkey, lifecycle, requires_nip_fi, \
                       policy_generation, retention_days, to_jsonb(communities) ->> 'name' AS name, \
                       to_jsonb(communities) ->> 'description' AS description, \
                       to_jsonb(communities) ->> 'icon' AS icon, \
                       nullif(to_jsonb(communities) -> 'allowed_kinds', 'null') AS allowed_kinds, \
                       nullif(to_jsonb(communities) -> 'disallowed_kinds', 'null') AS disallowed_kinds, \
                       nullif(to_jsonb(communities) -> 'blocked_ips', 'null') AS blocked_ips";

/// The community `id`, `None` when it does not exist.
pub async fn get(pool: &PgPool, id: CommunityId) -> Result<Option<Community>, sqlx::Error> {
    sqlx::query_as(&format!("SELECT {COLUMNS} FROM communities WHERE id = $1"))
        .bind(id)
        .fetch_optional(pool)
        .await
}

/// What the operator provisions: `retention_days` is `None` when the request did not name it
/// (a new community then keeps revision history forever, and an existing one is not compared).
pub struct NewCommunity<'a> {
    /// The community's id.
    pub id: CommunityId,
    /// The host to bind it to.
    pub host: &'a str,
    /// The owner's key (hex); also made its first member.
    pub owner: &'a str,
    /// `Some(None)`: keep history forever; `Some(Some(d))`: `d` days; `None`: not named.
    pub retention_days: Option<Option<i32>>,
}

/// Creates the community and its owner membership in one transaction. Re-creating an identical
/// community is idempotent (`Ok((c, false))`).
pub async fn create(pool: &PgPool, new: &NewCommunity<'_>) -> Result<(Community, bool), CreateError> {
    let (id, host, owner) = (new.id, new.host, new.owner);
    let mut tx = pool.begin().await?;
    let inserted = sqlx::query(
        "INSERT INTO communities (id, host, owner_pubkey, retention_days) VALUES ($1, $2, $3, $4) \
         ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(host)
    .bind(owner)
    .bind(new.retention_days.flatten())
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 0 {
        tx.rollback().await?;
        let same_retention = |c: &Community| new.retention_days.is_none_or(|r| r == c.retention_days);
        return match get(pool, id).await? {
            Some(c) if c.host == host && c.owner_pubkey == owner && same_retention(&c) => Ok((c, false)),
            Some(_) => Err(CreateError::CommunityConflict),
            None => Err(CreateError::HostConflict),
        };
    }
    sqlx::query("INSERT INTO community_members (community_id, pubkey, role) VALUES ($1, $2, 'owner')")
        .bind(id)
        .bind(owner)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    let c = get(pool, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    Ok((c, true))
}

/// What `PATCH /operator/communities` changes; a field left `None` is not named (kept). An inner
/// `None` clears the setting (retention: keep forever; profile: the relay's default).
#[derive(Debug, Default)]
pub struct Changes {
    /// Days revision history is kept.
    pub retention_days: Option<Option<i32>>,
    /// NIP-11 `name`.
    pub name: Option<Option<String>>,
    /// NIP-11 `description`.
    pub description: Option<Option<String>>,
    /// NIP-11 `icon`.
    pub icon: Option<Option<String>>,
}

impl Changes {
    /// Names a profile field (these need schema 2).
    #[must_use]
    pub fn names_profile(&self) -> bool {
        self.name.is_some() || self.description.is_some() || self.icon.is_some()
    }
}

/// Why a community could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// A profile field was named on a database the 0.2.0 migrate Job has not reached yet.
    #[error("the community profile needs schema version 2: run `buzz migrate` (the chart's migrate Job)")]
    SchemaPending,
    /// The database failed.
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
}

/// Applies `changes` to community `id`; `None` when there is no such community. The
/// write-service's retention sweeper reads the retention on its next pass; gateways see a new
/// profile with their next host lease (at most a second later).
pub async fn update(
    pool: &PgPool,
    id: CommunityId,
    changes: &Changes,
) -> Result<Option<Community>, UpdateError> {
    let mut sets = vec!["id = id".to_owned()];
    let named = [
        ("retention_days", changes.retention_days.is_some()),
        ("name", changes.name.is_some()),
        ("description", changes.description.is_some()),
        ("icon", changes.icon.is_some()),
    ];
    for (i, (column, _)) in named.iter().enumerate().filter(|(_, (_, on))| *on) {
        sets.push(format!("{column} = ${}", i + 2));
    }
    let sql = format!("UPDATE communities SET {} WHERE id = $1 RETURNING {COLUMNS}", sets.join(", "));
    let result = sqlx::query_as(&sql)
        .bind(id)
        .bind(changes.retention_days.flatten())
        .bind(changes.name.clone().flatten())
        .bind(changes.description.clone().flatten())
        .bind(changes.icon.clone().flatten())
        .fetch_optional(pool)
        .await;
    match result {
        // 42703 undefined_column: the 0.1.0 schema, before this release's migration.
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42703") => {
            Err(UpdateError::SchemaPending)
        }
        other => Ok(other?),
    }
}

/// The active community bound to `host`.
pub async fn lease(pool: &PgPool, host: &str) -> Result<Option<CommunityLease>, sqlx::Error> {
    let row: Option<Community> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM communities WHERE host = $1 AND lifecycle = 'active'"
    ))
    .bind(host)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|c| CommunityLease {
        blocked_ips: crate::leases::rules::blocked(c.blocked_ips.as_ref()),
        kinds: crate::leases::rules::kind_rules(c.allowed_kinds.as_ref(), c.disallowed_kinds.as_ref()),
        community_id: c.community_id,
        host: c.host,
        owner_pubkey: c.owner_pubkey,
        requires_nip_fi: c.requires_nip_fi,
        policy_generation: c.policy_generation,
        fi_issuers: Vec::new(),
        profile: buzz_bus::CommunityProfile { name: c.name, description: c.description, icon: c.icon },
    }))
}
