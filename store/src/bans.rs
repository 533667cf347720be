//! NIP-86 community bans (`community_bans`, migration 0004) as every service reads them, and the
//! lock that keeps a ban and a membership of one key from committing side by side.
//!
//! A ban holds for the key itself in every role it could enter by (docs/design.md "NIP-86
//! community management"): the gateway asks at AUTH (`AccessRequest::Member` answers `banned`),
//! the write-service refuses every write acting with a banned key (`rules::admission`), and
//! `banpubkey` and every path that gives a key a community role take [`lock_membership`] first,
//! so that a key is never left both banned and a member.
//!
//! Before migration 0004 there is no table and nobody is banned: the table is looked up first
//! (a statement naming a missing table would abort the caller's transaction), and [`table_exists`]
//! remembers, per database, once it has seen it (the schema only expands).

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use buzz_core::{CommunityId, Pubkey};
use sqlx::{PgConnection, PgPool};

use crate::Role;

/// The advisory lock class of a (community, key) membership (`pg_advisory_xact_lock(int, int)`;
/// the policy-service's NIP-FI classes are `0x4649_000N`).
const LOCK_MEMBERSHIP: i32 = 0x4d45_0001;

/// The databases (host, port, name) in which `community_bans` was seen.
static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Whether `pool`'s database has `community_bans` (migration 0004 has run). Asked on `conn` (one
/// of `pool`'s, already held: no second connection is taken) until it answers yes, then
/// remembered for that database.
pub async fn table_exists(pool: &PgPool, conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let options = pool.connect_options();
    let database = format!(
        "{}:{}/{}",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or_default()
    );
    if SEEN.lock().unwrap_or_else(PoisonError::into_inner).contains(&database) {
        return Ok(true);
    }
    let found: bool =
        sqlx::query_scalar("SELECT to_regclass('community_bans') IS NOT NULL").fetch_one(conn).await?;
    if found {
        SEEN.lock().unwrap_or_else(PoisonError::into_inner).insert(database);
    }
    Ok(found)
}

/// Whether any of `keys` is banned from `community` (none before migration 0004).
pub async fn any_banned(
    conn: &mut PgConnection,
    community: CommunityId,
    keys: &[&Pubkey],
) -> Result<bool, sqlx::Error> {
    let migrated: bool =
        sqlx::query_scalar("SELECT to_regclass('community_bans') IS NOT NULL").fetch_one(&mut *conn).await?;
    if !migrated {
        return Ok(false);
    }
    let keys: Vec<&str> = keys.iter().map(|k| k.as_str()).collect();
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM community_bans WHERE community_id = $1 AND pubkey = ANY($2))",
    )
    .bind(community)
    .bind(keys)
    .fetch_one(conn)
    .await
}

/// `pubkey`'s community role and whether it is banned, in one statement; `bans`: migration 0004
/// has run ([`table_exists`]), else nobody is banned.
pub async fn role_and_ban(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
    bans: bool,
) -> Result<(Option<Role>, bool), sqlx::Error> {
    let banned = if bans {
        "EXISTS (SELECT 1 FROM community_bans WHERE community_id = $1 AND pubkey = $2)"
    } else {
        "false"
    };
    sqlx::query_as(&format!(
        "SELECT (SELECT role FROM community_members WHERE community_id = $1 AND pubkey = $2), {banned}"
    ))
    .bind(community)
    .bind(pubkey)
    .fetch_one(conn)
    .await
}

/// Lifts the ban of `pubkey` (an operator made it the owner); false when there was none.
pub async fn lift(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<bool, sqlx::Error> {
    if !any_banned(conn, community, &[pubkey]).await? {
        return Ok(false);
    }
    sqlx::query("DELETE FROM community_bans WHERE community_id = $1 AND pubkey = $2")
        .bind(community)
        .bind(pubkey)
        .execute(conn)
        .await?;
    Ok(true)
}

/// [`lock_membership`] for `banpubkey`, which also bumps the community's access version: the
/// community row first, in the order of the operator's owner change (row, then membership), so
/// that the two never wait for each other.
pub async fn lock_membership_to_ban(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1 FROM communities WHERE id = $1 FOR NO KEY UPDATE")
        .bind(community)
        .execute(&mut *conn)
        .await?;
    lock_membership(conn, community, pubkey).await
}

/// Serialises, until the transaction ends, every change of `pubkey`'s standing in `community`
/// that could leave it both banned and a member: `banpubkey` ([`lock_membership_to_ban`]) and
/// whatever gives it a role. Without it an add that read "not banned" before a concurrent ban
/// committed would commit a membership beside the ban (the ban's removal found no membership to
/// remove). A transaction that also locks the community row takes that first.
pub async fn lock_membership(
    conn: &mut PgConnection,
    community: CommunityId,
    pubkey: &Pubkey,
) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
        .bind(LOCK_MEMBERSHIP)
        .bind(format!("{community}:{pubkey}"))
        .execute(conn)
        .await?;
    Ok(())
}
