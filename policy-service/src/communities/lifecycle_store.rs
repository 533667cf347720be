//! SQL of the community lifecycle: changing host and owner, and deleting a community.
//!
//! Both follow the NIP-FI lock order of `nip_fi/store.rs`: community deletion lock (shared for a change,
//! exclusive for a deletion) → `communities` row → host lease (exclusive, for the old and the new
//! host in name order). Receipts (`community_auth_upgrades`) have no foreign key to
//! `communities` and are never deleted here.

use buzz_core::{CommunityId, Lifecycle, Pubkey};
use sqlx::{PgConnection, PgPool};

use crate::communities::store::{self, Community};
use crate::nip_fi::store as fi_store;

/// Why a lifecycle change was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// No community has that id (404).
    #[error("no such community")]
    NotFound,
    /// The community is being deleted (409 `lifecycle_conflict`).
    #[error("the community is being deleted")]
    Lifecycle,
    /// The new host is bound to another community (409 `host_conflict`).
    #[error("the host is bound to another community")]
    HostConflict,
    /// The store failed (503).
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
}

/// What `PATCH /operator/communities/{id}` changes; `None` keeps the current value.
pub struct Change<'a> {
    /// The new host (normalised and validated like create).
    pub host: Option<&'a str>,
    /// The new owner's public key.
    pub owner: Option<&'a Pubkey>,
}

/// Changes the community's host and/or owner in one transaction and answers the community.
pub async fn change(pool: &PgPool, id: CommunityId, change: &Change<'_>) -> Result<Community, ChangeError> {
    let mut tx = pool.begin().await?;
    fi_store::lock_deletion(&mut tx, id, false).await?;
    let row: Option<(String, Pubkey, Lifecycle)> =
        sqlx::query_as("SELECT host, owner_pubkey, lifecycle FROM communities WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    let (host, owner, lifecycle) = row.ok_or(ChangeError::NotFound)?;
    if lifecycle == Lifecycle::Deleting {
        return Err(ChangeError::Lifecycle);
    }
    if let Some(new_host) = change.host.filter(|h| *h != host) {
        move_host(&mut tx, id, &host, new_host).await?;
    }
    if let Some(new_owner) = change.owner.filter(|o| **o != owner) {
        transfer_owner(&mut tx, id, new_owner).await?;
    }
    tx.commit().await?;
    store::get(pool, id).await?.ok_or(ChangeError::NotFound)
}

/// Rebinds the community from `old` to `new`, holding both hosts' leases so no gateway is
/// leased either host mid-change.
async fn move_host(
    conn: &mut PgConnection,
    id: CommunityId,
    old: &str,
    new: &str,
) -> Result<(), ChangeError> {
    let mut hosts = [old, new];
    hosts.sort_unstable();
    for h in hosts {
        fi_store::lock_host_lease(conn, h).await?;
    }
    let updated =
        sqlx::query("UPDATE communities SET host = $2 WHERE id = $1").bind(id).bind(new).execute(conn).await;
    match updated {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(ChangeError::HostConflict),
        Err(e) => Err(e.into()),
    }
}

/// Makes `owner` the single owner; the previous owner stays in the community as an admin. A
/// NIP-86 ban of the new owner is lifted (nobody bans the owner; a key is never both banned and
/// a member), under the key's membership lock like every change that gives a key a role.
async fn transfer_owner(conn: &mut PgConnection, id: CommunityId, owner: &Pubkey) -> Result<(), sqlx::Error> {
    buzz_store::bans::lock_membership(conn, id, owner).await?;
    if buzz_store::bans::lift(conn, id, owner).await? {
        tracing::info!(community = %id, owner = %owner, "the new owner's community ban was lifted");
    }
    sqlx::query("UPDATE communities SET owner_pubkey = $2 WHERE id = $1")
        .bind(id)
        .bind(owner)
        .execute(&mut *conn)
        .await?;
    sqlx::query("UPDATE community_members SET role = 'admin' WHERE community_id = $1 AND role = 'owner'")
        .bind(id)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO community_members (community_id, pubkey, role) VALUES ($1, $2, 'owner') \
         ON CONFLICT (community_id, pubkey) DO UPDATE SET role = 'owner'",
    )
    .bind(id)
    .bind(owner)
    .execute(&mut *conn)
    .await?;
    buzz_store::access::bump_access_version(conn, id).await?;
    Ok(())
}

/// Records the deletion intent (`lifecycle = 'deleting'`) and commits it: from then on no lease,
/// policy change or host/owner change is granted. `None` when there is no such community.
pub async fn mark_deleting(pool: &PgPool, id: CommunityId) -> Result<Option<String>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    fi_store::lock_deletion(&mut tx, id, true).await?;
    let host: Option<String> =
        sqlx::query_scalar("UPDATE communities SET lifecycle = 'deleting' WHERE id = $1 RETURNING host")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(host)
}

/// Every community-keyed table with a foreign key to `communities`; their children (channel
/// members, tags, read markers, mentions, revisions) go by cascade.
const DATA_TABLES: [&str; 6] =
    ["events", "channels", "tokens", "artifacts", "community_fi_bindings", "community_members"];

/// Removes the community's data (not its row) in one transaction.
pub async fn remove_data(pool: &PgPool, id: CommunityId) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    fi_store::lock_deletion(&mut tx, id, true).await?;
    for table in DATA_TABLES {
        sqlx::query(&format!("DELETE FROM {table} WHERE community_id = $1"))
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}

/// Removes the community row itself, last; only a row already marked `deleting`.
pub async fn remove_row(pool: &PgPool, id: CommunityId) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM communities WHERE id = $1 AND lifecycle = 'deleting'")
        .bind(id)
        .execute(pool)
        .await
        .map(|_| ())
}
