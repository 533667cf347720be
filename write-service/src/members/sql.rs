//! The statements of community membership, which `POST/DELETE /api/members` and NIP-86
//! (`allowpubkey`, `banpubkey`, `unallowpubkey`) share.

use buzz_core::{CommunityId, Pubkey};
use buzz_store::Role;
use sqlx::PgConnection;

/// Inserts or changes a community member's role; returns the previous role.
pub async fn put_member(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
    role: Role,
) -> Result<Option<Role>, sqlx::Error> {
    let previous: Option<Role> = sqlx::query_scalar(
        "SELECT role FROM community_members WHERE community_id = $1 AND pubkey = $2 FOR UPDATE",
    )
    .bind(community)
    .bind(pubkey)
    .fetch_optional(&mut *conn)
    .await?;
    sqlx::query(
        "INSERT INTO community_members (community_id, pubkey, role) VALUES ($1, $2, $3) \
         ON CONFLICT (community_id, pubkey) DO UPDATE SET role = EXCLUDED.role",
    )
    .bind(community)
    .bind(pubkey)
    .bind(role)
    .execute(conn)
    .await?;
    Ok(previous)
}

/// Removes a community member and their channel memberships; false when not a member.
pub async fn remove_member(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query("DELETE FROM community_members WHERE community_id = $1 AND pubkey = $2")
        .bind(community)
        .bind(pubkey)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    sqlx::query(
        "UPDATE channel_members SET removed_at = now() WHERE community_id = $1 AND pubkey = $2 AND removed_at IS NULL",
    )
    .bind(community)
    .bind(pubkey)
    .execute(conn)
    .await?;
    Ok(n == 1)
}
