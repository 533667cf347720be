//! NIP-86 community management (`<p>.v1.manage`): each method under the membership rules that
//! already govern `POST/DELETE /api/members` (`rules::manage` over `rules::members`), so one rule
//! set decides both. Only the community's owner and admins call; every change is audited in its
//! own transaction. The event methods are `events.rs`; the statements, `sql.rs` (membership's are
//! `members/sql.rs`, redactions' `channel/sql.rs`).

pub mod events;
pub mod sql;

use buzz_bus::{AccessChanged, Actor, BusError};
use buzz_core::nip86::{Call, SUPPORTED};
use buzz_core::{CommunityId, Pubkey};
use buzz_store::Role;
use serde_json::{json, Value};
use sqlx::{PgConnection, PgPool};

use crate::error::{WriteError, WriteResult};
use crate::manage::sql::{self as mstore, storage, ProfileField};
use crate::members::sql as members_sql;
use crate::rules::{manage as rule, members};

/// What a call answered, and the access changes to publish after its commit (in order).
#[derive(Debug, Default)]
pub struct Managed {
    /// The JSON-RPC `result`.
    pub result: Value,
    /// Published on `<p>.v1.access.<community>` after the commit.
    pub access: Vec<AccessChanged>,
}

fn answered(result: Value) -> Managed {
    Managed { result, access: Vec::new() }
}

/// Runs `call` for `actor` in `community`: the caller's role first (owner or admin, else
/// `restricted`, whether a member or not), then the method.
#[tracing::instrument(name = "db.transaction", skip_all, fields(db.system = "postgresql", db.operation = "manage", method = call.method(), otel.kind = "client"))]
pub async fn handle(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    call: &Call,
) -> WriteResult<Managed> {
    let mut tx = pool.begin().await?;
    // A NIP-98 session acts as its own key (an agent's owner never lends it management).
    let me = rule::manager(buzz_store::access::community_role(&mut tx, community, &actor.pubkey).await?)?;
    let managed = method(&mut tx, community, actor, me, call).await?;
    if call.changes() {
        let params = serde_json::to_value(call).map_err(|_| BusError::internal())?;
        mstore::audit(&mut tx, community, &actor.pubkey, call.method(), &params).await.map_err(storage)?;
    }
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(managed)
}

/// The method of `call`, by `actor` whose role is `me`, in the call's transaction.
async fn method(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    me: Role,
    call: &Call,
) -> WriteResult<Managed> {
    let done = || answered(json!(true));
    Ok(match call {
        Call::SupportedMethods => answered(json!(SUPPORTED)),
        Call::ListEventsNeedingModeration => answered(json!([])),
        Call::ListBannedPubkeys => {
            answered(Value::Array(mstore::banned(tx, community).await.map_err(storage)?))
        }
        Call::ListAllowedPubkeys => answered(Value::Array(mstore::members(tx, community).await?)),
        Call::BanPubkey { pubkey, reason } => {
            ban(tx, community, actor, me, pubkey, reason.as_deref()).await?
        }
        Call::UnbanPubkey { pubkey, .. } => {
            rule::unban(mstore::unban(tx, community, pubkey).await.map_err(storage)?)?;
            done()
        }
        Call::AllowPubkey { pubkey, .. } => {
            allow(tx, community, me, pubkey).await?;
            done()
        }
        Call::UnallowPubkey { pubkey, .. } => unallow(tx, community, me, pubkey).await?,
        Call::BanEvent { id, reason } => {
            events::ban(tx, community, actor, id, reason.as_deref()).await?;
            done()
        }
        Call::UnbanEvent { id, .. } | Call::AllowEvent { id, .. } => {
            events::unban(tx, community, actor, id).await?;
            done()
        }
        Call::ListBannedEvents => answered(events::list(tx, community, actor).await?),
        Call::AllowKind { kind } | Call::DisallowKind { kind } => {
            let allow = matches!(call, Call::AllowKind { .. });
            mstore::set_kind(tx, community, *kind, allow).await.map_err(storage)?;
            done()
        }
        Call::ListAllowedKinds => answered(json!(mstore::kinds(tx, community).await.map_err(storage)?.0)),
        Call::ListDisallowedKinds => answered(json!(mstore::kinds(tx, community).await.map_err(storage)?.1)),
        Call::BlockIp { ip, reason } => {
            mstore::block_ip(tx, community, &ip.to_string(), reason.as_deref()).await.map_err(storage)?;
            done()
        }
        Call::UnblockIp { ip, .. } => {
            rule::unblock(mstore::unblock_ip(tx, community, &ip.to_string()).await.map_err(storage)?)?;
            done()
        }
        Call::ListBlockedIps => answered(mstore::blocked_ips(tx, community).await.map_err(storage)?),
        Call::ChangeRelayName { name } => profile(tx, community, ProfileField::Name, name).await?,
        Call::ChangeRelayDescription { description } => {
            profile(tx, community, ProfileField::Description, description).await?
        }
        Call::ChangeRelayIcon { icon } => profile(tx, community, ProfileField::Icon, icon).await?,
    })
}

/// `banpubkey`: the ban, and the key's membership ended (the removal rule of `DELETE
/// /api/members`).
async fn ban(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    me: Role,
    pubkey: &Pubkey,
    reason: Option<&str>,
) -> WriteResult<Managed> {
    // Before the target's role is read: an add of the key waits for this ban's commit.
    buzz_store::bans::lock_membership_to_ban(tx, community, pubkey).await?;
    let target = buzz_store::access::community_role(tx, community, pubkey).await?;
    rule::ban(me, target, *pubkey == actor.pubkey)?;
    mstore::ban(tx, community, pubkey, reason, &actor.pubkey).await.map_err(storage)?;
    let mut access = Vec::new();
    if members_sql::remove_member(tx, community, pubkey).await? {
        access.push(AccessChanged::MemberRemoved { pubkey: pubkey.clone() });
    }
    // Also for a key that is no member (an agent's): a socket that missed the broadcast
    // (at most once) re-checks its key with the next live event of the new version.
    buzz_store::access::bump_access_version(tx, community).await?;
    access.push(AccessChanged::Banned { pubkey: pubkey.clone() });
    Ok(Managed { result: json!(true), access })
}

/// `unallowpubkey`: the membership ended, under the removal rule of `DELETE /api/members`.
async fn unallow(
    tx: &mut PgConnection,
    community: CommunityId,
    me: Role,
    pubkey: &Pubkey,
) -> WriteResult<Managed> {
    let target = buzz_store::access::community_role(tx, community, pubkey).await?;
    members::remove(me, target)?;
    members_sql::remove_member(tx, community, pubkey).await?;
    buzz_store::access::bump_access_version(tx, community).await?;
    Ok(Managed { result: json!(true), access: vec![AccessChanged::MemberRemoved { pubkey: pubkey.clone() }] })
}

/// `allowpubkey`: membership as role member, under the rule of `POST /api/members`; a key that
/// already has a role keeps it, a banned key is refused (under its membership lock, so a ban
/// committing meanwhile is seen).
async fn allow(
    conn: &mut PgConnection,
    community: CommunityId,
    me: Role,
    pubkey: &Pubkey,
) -> WriteResult<()> {
    buzz_store::bans::lock_membership(conn, community, pubkey).await?;
    members::not_banned(buzz_store::bans::any_banned(conn, community, &[pubkey]).await?)?;
    let previous = buzz_store::access::community_role(conn, community, pubkey).await?;
    if rule::allow(me, previous)? {
        members_sql::put_member(conn, community, pubkey, Role::Member).await?;
    }
    Ok(())
}

async fn profile(
    conn: &mut PgConnection,
    community: CommunityId,
    field: ProfileField,
    value: &str,
) -> WriteResult<Managed> {
    mstore::set_profile(conn, community, field, value).await?;
    Ok(answered(json!(true)))
}
