//! Issuer bindings `community_fi_bindings(community_id, issuer)`: bind, and unbind unless the
//! current enable holds the binding.

use buzz_core::CommunityId;
use sqlx::PgPool;

use crate::nip_fi::store;

/// Why a bind or unbind failed.
#[derive(Debug)]
pub enum BindingError {
    /// The community does not exist.
    CommunityNotFound,
    /// Unbind of an issuer that is not bound.
    BindingNotFound,
    /// Bind to a community whose lifecycle is not `active`.
    Lifecycle,
    /// The community's current required policy was accepted with this issuer.
    Held,
    /// The database failed.
    Sql(sqlx::Error),
}

impl From<sqlx::Error> for BindingError {
    fn from(e: sqlx::Error) -> Self {
        Self::Sql(e)
    }
}

/// Binds; `Ok(true)` when new, `Ok(false)` when it already existed. Adds no trust.
pub async fn bind(pool: &PgPool, community_id: CommunityId, issuer: &str) -> Result<bool, BindingError> {
    let mut tx = pool.begin().await?;
    store::lock_deletion(&mut tx, community_id, false).await?;
    let lifecycle: Option<buzz_core::Lifecycle> =
        sqlx::query_scalar("SELECT lifecycle FROM communities WHERE id = $1 FOR KEY SHARE")
            .bind(community_id)
            .fetch_optional(&mut *tx)
            .await?;
    match lifecycle {
        None => return Err(BindingError::CommunityNotFound),
        Some(buzz_core::Lifecycle::Active) => {}
        Some(_) => return Err(BindingError::Lifecycle),
    }
    let inserted = sqlx::query(
        "INSERT INTO community_fi_bindings (community_id, issuer) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )
    .bind(community_id)
    .bind(issuer)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(inserted == 1)
}

/// Unbinds. The community row is locked first, so an enable in flight (which holds the row and
/// the binding) finishes before this decides.
pub async fn unbind(pool: &PgPool, community_id: CommunityId, issuer: &str) -> Result<(), BindingError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL lock_timeout = '10s'").execute(&mut *tx).await?;
    store::lock_deletion(&mut tx, community_id, false).await?;
    let cur = store::lock_community(&mut tx, community_id).await?.ok_or(BindingError::CommunityNotFound)?;
    if cur.requires_nip_fi {
        let held: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM community_auth_upgrades WHERE community_id = $1 AND accepted_policy_generation = $2 \
             AND desired_requires_nip_fi AND expected_issuer = $3 LIMIT 1",
        )
        .bind(community_id)
        .bind(cur.policy_generation)
        .bind(issuer)
        .fetch_optional(&mut *tx)
        .await?;
        if held.is_some() {
            return Err(BindingError::Held);
        }
    }
    let removed = sqlx::query("DELETE FROM community_fi_bindings WHERE community_id = $1 AND issuer = $2")
        .bind(community_id)
        .bind(issuer)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if removed == 0 {
        return Err(BindingError::BindingNotFound);
    }
    tx.commit().await?;
    Ok(())
}

/// Whether `issuer` is bound to the community.
pub async fn exists(pool: &PgPool, community_id: CommunityId, issuer: &str) -> Result<bool, sqlx::Error> {
    let found: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM community_fi_bindings WHERE community_id = $1 AND issuer = $2")
            .bind(community_id)
            .bind(issuer)
            .fetch_optional(pool)
            .await?;
    Ok(found.is_some())
}
