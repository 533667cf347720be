//! The SQL of NIP-86 community management (migration 0004): community bans, the audit log and
//! the community's NIP-11 profile. Before 0004 has run, a missing table reads as "nobody is
//! banned" (`buzz_store::bans`) and a change fails as [`SchemaPending`](crate::error::WriteError).

use buzz_bus::{BusError, ErrorCode};
use buzz_core::{ChannelId, CommunityId, EventId, Pubkey};
use serde_json::Value;
use sqlx::PgConnection;

use crate::error::WriteError;

/// True for "relation does not exist" (42P01) or "column does not exist" (42703): the 0004
/// migration has not run yet.
#[must_use]
pub fn is_schema_pending(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if matches!(db.code().as_deref(), Some("42P01" | "42703")))
}

/// `allowkind` (`allow`) or `disallowkind`: `kind` joins one list and leaves the other.
pub async fn set_kind(
    conn: &mut PgConnection,
    community: CommunityId,
    kind: u32,
    allow: bool,
) -> Result<(), sqlx::Error> {
    let (to, from) =
        if allow { ("allowed_kinds", "disallowed_kinds") } else { ("disallowed_kinds", "allowed_kinds") };
    let sql = format!(
        "UPDATE communities SET {to} = (SELECT array_agg(DISTINCT k ORDER BY k) \
                FROM unnest(coalesce({to}, '{{}}') || $2::bigint) k), \
            {from} = array_remove({from}, $2::bigint) WHERE id = $1"
    );
    sqlx::query(&sql).bind(community).bind(i64::from(kind)).execute(conn).await?;
    Ok(())
}

/// `blockip`: `ip` joins `blocked_ips` (again: its reason is replaced).
pub async fn block_ip(
    conn: &mut PgConnection,
    community: CommunityId,
    ip: &str,
    reason: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE communities SET blocked_ips = coalesce((SELECT jsonb_agg(e) FROM jsonb_array_elements(blocked_ips) e \
                WHERE e ->> 'ip' <> $2), '[]'::jsonb) || jsonb_build_array(jsonb_build_object('ip', $2::text, 'reason', $3::text)) \
         WHERE id = $1",
    )
    .bind(community)
    .bind(ip)
    .bind(reason)
    .execute(conn)
    .await?;
    Ok(())
}

/// `unblockip`: false when `ip` was not blocked.
pub async fn unblock_ip(
    conn: &mut PgConnection,
    community: CommunityId,
    ip: &str,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query(
        "UPDATE communities SET blocked_ips = coalesce((SELECT jsonb_agg(e) FROM jsonb_array_elements(blocked_ips) e \
                WHERE e ->> 'ip' <> $2), '[]'::jsonb) \
         WHERE id = $1 AND blocked_ips @> jsonb_build_array(jsonb_build_object('ip', $2::text))",
    )
    .bind(community)
    .bind(ip)
    .execute(conn)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// `[{ip, reason}]` of the community's blocked addresses.
pub async fn blocked_ips(conn: &mut PgConnection, community: CommunityId) -> Result<Value, sqlx::Error> {
    sqlx::query_scalar("SELECT coalesce(blocked_ips, '[]'::jsonb) FROM communities WHERE id = $1")
        .bind(community)
        .fetch_one(conn)
        .await
}

/// The community's (allowed, disallowed) kinds.
pub async fn kinds(
    conn: &mut PgConnection,
    community: CommunityId,
) -> Result<(Vec<i64>, Vec<i64>), sqlx::Error> {
    sqlx::query_as(
        "SELECT coalesce(allowed_kinds, '{}'), coalesce(disallowed_kinds, '{}') FROM communities WHERE id = $1",
    )
    .bind(community)
    .fetch_one(conn)
    .await
}

/// A statement failed: before migration 0004 a NIP-86 change is refused with what to do.
#[must_use]
pub fn storage(e: sqlx::Error) -> WriteError {
    if is_schema_pending(&e) {
        let text = "NIP-86 community management needs schema version 4: run `buzz migrate`";
        return WriteError::Refused(BusError::new(ErrorCode::Unavailable, text));
    }
    WriteError::Storage(e)
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

/// Records that `banevent` redacted `id` (again: the reason and who are replaced).
pub async fn ban_event(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
    reason: Option<&str>,
    by: &Pubkey,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO community_event_bans (community_id, event_id, reason, banned_by) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (community_id, event_id) DO UPDATE SET reason = EXCLUDED.reason, \
         banned_by = EXCLUDED.banned_by, banned_at = now()",
    )
    .bind(community)
    .bind(id)
    .bind(reason)
    .bind(by)
    .execute(conn)
    .await?;
    Ok(())
}

/// A banned event still stored (not deleted): its author and channel, and whether it is an
/// artifact's current revision.
pub async fn banned_event(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
) -> Result<Option<(Pubkey, Option<ChannelId>, bool)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT e.pubkey, e.channel_id, EXISTS (SELECT 1 FROM artifacts a \
                WHERE a.community_id = e.community_id AND a.current_revision = e.id) \
         FROM community_event_bans b JOIN events e ON e.community_id = b.community_id AND e.id = b.event_id \
         WHERE b.community_id = $1 AND b.event_id = $2 AND e.deleted_at IS NULL",
    )
    .bind(community)
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Lifts the redaction `banevent` made (unless a kind-9005 redaction stands) and forgets the ban.
pub async fn unban_event(
    conn: &mut PgConnection,
    community: CommunityId,
    id: &EventId,
) -> Result<(), sqlx::Error> {
    crate::channel::sql::lift_ban(conn, community, id).await?;
    sqlx::query("DELETE FROM community_event_bans WHERE community_id = $1 AND event_id = $2")
        .bind(community)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Every banned event still stored: id, reason, channel, oldest ban first.
pub async fn banned_events(
    conn: &mut PgConnection,
    community: CommunityId,
) -> Result<Vec<(EventId, Option<String>, Option<ChannelId>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT b.event_id, b.reason, e.channel_id FROM community_event_bans b \
         JOIN events e ON e.community_id = b.community_id AND e.id = b.event_id \
         WHERE b.community_id = $1 AND e.deleted_at IS NULL ORDER BY b.banned_at, b.event_id",
    )
    .bind(community)
    .fetch_all(conn)
    .await
}
