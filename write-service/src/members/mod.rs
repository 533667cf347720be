//! Community membership changes requested over `POST/DELETE /api/members`, under
//! `rules::members`; the statements (NIP-86 makes them too) are `sql.rs`.

pub mod sql;

use buzz_bus::{Actor, WriteOk};
use buzz_core::{CommunityId, Pubkey};
use buzz_store::Role;
use sqlx::PgPool;

use crate::error::{WriteError, WriteResult};
use crate::rules::members;

/// The common start of a membership change: scope and the actor's role (owner or admin), inside
/// the transaction that will make the change (the target key's shape is its type's).
async fn begin_as_manager(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
) -> WriteResult<(sqlx::Transaction<'static, sqlx::Postgres>, Role)> {
    members::scope(actor)?;
    let mut tx = pool.begin().await?;
    let role = buzz_store::access::community_role(&mut tx, community, actor.member_key()).await?;
    Ok((tx, members::manager(role)?))
}

/// `POST /api/members`: grants `role` to `pubkey` when the actor's role may (`rules::members`).
#[tracing::instrument(
    name = "db.transaction",
    skip_all,
    fields(db.system = "postgresql", db.operation = "put_member", otel.kind = "client")
)]
pub async fn put_member(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    pubkey: &Pubkey,
    role: buzz_bus::Role,
) -> WriteResult<WriteOk> {
    let role = stored_role(role);
    let (mut tx, me) = begin_as_manager(pool, community, actor).await?;
    // A ban committing meanwhile is seen (`buzz_store::bans::lock_membership`).
    buzz_store::bans::lock_membership(&mut tx, community, pubkey).await?;
    let previous = buzz_store::access::community_role(&mut tx, community, pubkey).await?;
    members::grant(me, previous, role)?;
    members::not_banned(buzz_store::bans::any_banned(&mut tx, community, &[pubkey]).await?)?;
    sql::put_member(&mut tx, community, pubkey, role).await?;
    tx.commit().await.map_err(WriteError::Commit)?;
    let unchanged = previous == Some(role);
    Ok(WriteOk { duplicate: unchanged, message: String::new(), data: None })
}

/// `DELETE /api/members/{pubkey}`: owners remove anyone but the owner, admins remove members.
/// True when a membership was removed.
#[tracing::instrument(
    name = "db.transaction",
    skip_all,
    fields(db.system = "postgresql", db.operation = "remove_member", otel.kind = "client")
)]
pub async fn remove_member(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    pubkey: &Pubkey,
) -> WriteResult<bool> {
    let (mut tx, me) = begin_as_manager(pool, community, actor).await?;
    let target = buzz_store::access::community_role(&mut tx, community, pubkey).await?;
    members::remove(me, target)?;
    let removed = sql::remove_member(&mut tx, community, pubkey).await?;
    buzz_store::access::bump_access_version(&mut tx, community).await?;
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(removed)
}

/// A community role as the bus carries it, as it is stored.
fn stored_role(role: buzz_bus::Role) -> buzz_store::Role {
    match role {
        buzz_bus::Role::Member => buzz_store::Role::Member,
        buzz_bus::Role::Admin => buzz_store::Role::Admin,
        buzz_bus::Role::Owner => buzz_store::Role::Owner,
    }
}
