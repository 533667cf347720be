//! Community membership changes requested over `POST/DELETE /api/members`.

use buzz_bus::{Actor, Scope, WriteOk};
use buzz_core::{CommunityId, Pubkey};
use buzz_store::Role;
use sqlx::PgPool;

use crate::error::{WriteError, WriteResult};
use crate::rules::Refusal;
use crate::store;

/// Who may grant what: owners grant admin or member; admins grant member. Nobody grants owner
/// (the owner is set when the operator provisions the community) and nobody changes the owner.
pub(crate) fn may_grant(actor: Role, target_previous: Option<Role>, role: Role) -> bool {
    match actor {
        Role::Owner => role != Role::Owner && target_previous != Some(Role::Owner),
        Role::Admin => role == Role::Member && target_previous.is_none_or(|r| r == Role::Member),
        Role::Member => false,
    }
}

/// Who may remove whom: owners anyone but the owner, admins members (the rule of `DELETE
/// /api/members`, NIP-86 `unallowpubkey` and `banpubkey`).
pub(crate) fn may_remove(actor: Role, target: Role) -> bool {
    match actor {
        Role::Owner => target != Role::Owner,
        Role::Admin => target == Role::Member,
        Role::Member => false,
    }
}

fn actor_role(role: Option<Role>) -> Result<Role, Refusal> {
    role.filter(|r| r.is_admin()).ok_or(Refusal::NotMemberManager)
}

/// The common start of a membership change: scope and the actor's role (owner or admin), inside
/// the transaction that will make the change (the target key's shape is its type's).
async fn begin_as_manager(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
) -> WriteResult<(sqlx::Transaction<'static, sqlx::Postgres>, Role)> {
    if !actor.has_scope(Scope::MembersWrite) {
        return Err(Refusal::MembersScope.into());
    }
    let mut tx = pool.begin().await?;
    let role = buzz_store::access::community_role(&mut tx, community, actor.member_key()).await?;
    Ok((tx, actor_role(role)?))
}

/// `POST /api/members`: grants `role` to `pubkey` when the actor's role may (see `may_grant`).
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
    let role = crate::shared::stored_role(role);
    let (mut tx, me) = begin_as_manager(pool, community, actor).await?;
    // A ban committing meanwhile is seen (`buzz_store::bans::lock_membership`).
    buzz_store::bans::lock_membership(&mut tx, community, pubkey).await?;
    let previous = buzz_store::access::community_role(&mut tx, community, pubkey).await?;
    if !may_grant(me, previous, role) {
        return Err(Refusal::RoleNotGrantable.into());
    }
    if buzz_store::bans::any_banned(&mut tx, community, &[pubkey]).await? {
        return Err(Refusal::BannedKey.into());
    }
    store::put_member(&mut tx, community, pubkey, role).await?;
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
    let Some(target) = target else {
        return Err(Refusal::NoSuchMember.into());
    };
    if !may_remove(me, target) {
        return Err(Refusal::MemberNotRemovable.into());
    }
    let removed = store::remove_member(&mut tx, community, pubkey).await?;
    buzz_store::access::bump_access_version(&mut tx, community).await?;
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_grant_admins_admins_grant_members_and_nobody_grants_owner() {
        assert!(may_grant(Role::Owner, None, Role::Admin));
        assert!(may_grant(Role::Owner, Some(Role::Admin), Role::Member));
        assert!(!may_grant(Role::Owner, None, Role::Owner));
        assert!(!may_grant(Role::Owner, Some(Role::Owner), Role::Member));
        assert!(may_grant(Role::Admin, None, Role::Member));
        assert!(!may_grant(Role::Admin, None, Role::Admin));
        assert!(!may_grant(Role::Admin, Some(Role::Admin), Role::Member));
        assert!(!may_grant(Role::Member, None, Role::Member));
    }
}
