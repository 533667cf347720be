//! The SQL of NIP-86 community management (migration 0004): community bans, the audit log and
//! the community's NIP-11 profile. Before 0004 has run, a missing table reads as "nobody is
//! banned" and a change fails as [`SchemaPending`](crate::error::WriteError).

use buzz_core::{CommunityId, Pubkey};
use serde_json::Value;
use sqlx::PgConnection;

/// True for "relation does not exist" (42P01): the 0004 migration has not run yet.
#[must_use]
pub fn is_schema_pending(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("42P01"))
}

/// Whether `pubkey` is banned from `community` (no: before migration 0004).
pub async fn is_banned(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<bool, sqlx::Error> {
    let found: Result<Option<i32>, _> =
        sqlx::query_scalar("SELECT 1 FROM community_bans WHERE community_id = $1 AND pubkey = $2")
            .bind(community)
            .bind(pubkey)
            .fetch_optional(conn)
            .await;
    match found {
        Ok(row) => Ok(row.is_some()),
        Err(e) if is_schema_pending(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Bans `pubkey` (again: the reason and who banned are replaced).
pub async fn ban(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
    reason: Option<&str>,
    by: &Pubkey,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO community_bans (community_id, pubkey, reason, banned_by) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (community_id, pubkey) DO UPDATE SET reason = EXCLUDED.reason, \
         banned_by = EXCLUDED.banned_by, banned_at = now()",
    )
    .bind(community)
    .bind(pubkey)
    .bind(reason)
    .bind(by)
    .execute(conn)
    .await?;
    Ok(())
}

/// Lifts the ban of `pubkey`; false when there was none.
pub async fn unban(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query("DELETE FROM community_bans WHERE community_id = $1 AND pubkey = $2")
        .bind(community)
        .bind(pubkey)
        .execute(conn)
        .await?
        .rows_affected();
    Ok(n == 1)
}

/// `[{pubkey, reason}]` of the community's bans, oldest first.
pub async fn banned(conn: &mut PgConnection, community: CommunityId) -> Result<Vec<Value>, sqlx::Error> {
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT pubkey, reason FROM community_bans WHERE community_id = $1 ORDER BY banned_at, pubkey",
    )
    .bind(community)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(pubkey, reason)| serde_json::json!({ "pubkey": pubkey, "reason": reason }))
        .collect())
}

/// `[{pubkey, role}]` of the community's members, oldest first.
pub async fn members(conn: &mut PgConnection, community: CommunityId) -> Result<Vec<Value>, sqlx::Error> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT pubkey, role FROM community_members WHERE community_id = $1 ORDER BY added_at, pubkey",
    )
    .bind(community)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|(pubkey, role)| serde_json::json!({ "pubkey": pubkey, "role": role })).collect())
}

/// A profile column of the community's NIP-11 document for its host.
#[derive(Debug, Clone, Copy)]
pub enum ProfileField {
    /// `name`.
    Name,
    /// `description`.
    Description,
    /// `icon`.
    Icon,
}

/// Sets one profile field of the community (validated by `buzz_core::nip86`; the columns' checks
/// hold the same bounds).
pub async fn set_profile(
    conn: &mut PgConnection,
    community: CommunityId,
    field: ProfileField,
    value: &str,
) -> Result<(), sqlx::Error> {
    let sql = match field {
        ProfileField::Name => "UPDATE communities SET name = $2 WHERE id = $1",
        ProfileField::Description => "UPDATE communities SET description = $2 WHERE id = $1",
        ProfileField::Icon => "UPDATE communities SET icon = $2 WHERE id = $1",
    };
    sqlx::query(sql).bind(community).bind(value).execute(conn).await?;
    Ok(())
}

/// Records a change: who (`actor`), what (`method`, `params`); when is the commit's `now()`.
pub async fn audit(
    conn: &mut PgConnection,
    community: CommunityId,
    actor: &Pubkey,
    method: &str,
    params: &Value,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO community_audit (community_id, actor, method, params) VALUES ($1, $2, $3, $4)")
        .bind(community)
        .bind(actor)
        .bind(method)
        .bind(params)
        .execute(conn)
        .await?;
    Ok(())
}
