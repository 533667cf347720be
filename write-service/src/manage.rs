//! NIP-86 community management (`<p>.v1.manage`): each method mapped onto the membership rules
//! that already govern `POST/DELETE /api/members` (`members.rs`), so one rule set decides both.
//! Only the community's owner and admins call; every change is audited in its own transaction.

use buzz_bus::{AccessChanged, Actor, BusError};
use buzz_core::nip86::{Call, SUPPORTED};
use buzz_core::{CommunityId, Pubkey};
use buzz_store::Role;
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::error::{WriteError, WriteResult};
use crate::manage_store::{self as mstore, storage, ProfileField};
use crate::rules::{manage as rule, members};
use crate::store;

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
    let managed = match call {
        Call::SupportedMethods => answered(json!(SUPPORTED)),
        Call::ListEventsNeedingModeration => answered(json!([])),
        Call::ListBannedPubkeys => {
            answered(Value::Array(mstore::banned(&mut tx, community).await.map_err(storage)?))
        }
        Call::ListAllowedPubkeys => answered(Value::Array(mstore::members(&mut tx, community).await?)),
        Call::BanPubkey { pubkey, reason } => {
            // Before the target's role is read: an add of the key waits for this ban's commit.
            buzz_store::bans::lock_membership_to_ban(&mut tx, community, pubkey).await?;
            let target = buzz_store::access::community_role(&mut tx, community, pubkey).await?;
            rule::ban(me, target, *pubkey == actor.pubkey)?;
            mstore::ban(&mut tx, community, pubkey, reason.as_deref(), &actor.pubkey)
                .await
                .map_err(storage)?;
            let mut access = Vec::new();
            if store::remove_member(&mut tx, community, pubkey).await? {
                access.push(AccessChanged::MemberRemoved { pubkey: pubkey.clone() });
            }
            // Also for a key that is no member (an agent's): a socket that missed the broadcast
            // (at most once) re-checks its key with the next live event of the new version.
            buzz_store::access::bump_access_version(&mut tx, community).await?;
            access.push(AccessChanged::Banned { pubkey: pubkey.clone() });
            Managed { result: json!(true), access }
        }
        Call::UnbanPubkey { pubkey, .. } => {
            rule::unban(mstore::unban(&mut tx, community, pubkey).await.map_err(storage)?)?;
            answered(json!(true))
        }
        Call::AllowPubkey { pubkey, .. } => {
            allow(&mut tx, community, me, pubkey).await?;
            answered(json!(true))
        }
        Call::UnallowPubkey { pubkey, .. } => {
            let target = buzz_store::access::community_role(&mut tx, community, pubkey).await?;
            members::remove(me, target)?;
            store::remove_member(&mut tx, community, pubkey).await?;
            buzz_store::access::bump_access_version(&mut tx, community).await?;
            Managed {
                result: json!(true),
                access: vec![AccessChanged::MemberRemoved { pubkey: pubkey.clone() }],
            }
        }
        Call::BanEvent { id, reason } => {
            crate::manage_events::ban(&mut tx, community, actor, id, reason.as_deref()).await?;
            answered(json!(true))
        }
        Call::UnbanEvent { id, .. } | Call::AllowEvent { id, .. } => {
            crate::manage_events::unban(&mut tx, community, actor, id).await?;
            answered(json!(true))
        }
        Call::ListBannedEvents => answered(crate::manage_events::list(&mut tx, community, actor).await?),
        Call::AllowKind { kind } | Call::DisallowKind { kind } => {
            let allow = matches!(call, Call::AllowKind { .. });
            mstore::set_kind(&mut tx, community, *kind, allow).await.map_err(storage)?;
            answered(json!(true))
        }
        Call::ListAllowedKinds => {
            answered(json!(mstore::kinds(&mut tx, community).await.map_err(storage)?.0))
        }
        Call::ListDisallowedKinds => {
            answered(json!(mstore::kinds(&mut tx, community).await.map_err(storage)?.1))
        }
        Call::BlockIp { ip, reason } => {
            mstore::block_ip(&mut tx, community, &ip.to_string(), reason.as_deref())
                .await
                .map_err(storage)?;
            answered(json!(true))
        }
        Call::UnblockIp { ip, .. } => {
            rule::unblock(mstore::unblock_ip(&mut tx, community, &ip.to_string()).await.map_err(storage)?)?;
            answered(json!(true))
        }
        Call::ListBlockedIps => answered(mstore::blocked_ips(&mut tx, community).await.map_err(storage)?),
        Call::ChangeRelayName { name } => profile(&mut tx, community, ProfileField::Name, name).await?,
        Call::ChangeRelayDescription { description } => {
            profile(&mut tx, community, ProfileField::Description, description).await?
        }
        Call::ChangeRelayIcon { icon } => profile(&mut tx, community, ProfileField::Icon, icon).await?,
    };
    if call.changes() {
        let params = serde_json::to_value(call).map_err(|_| BusError::internal())?;
        mstore::audit(&mut tx, community, &actor.pubkey, call.method(), &params).await.map_err(storage)?;
    }
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(managed)
}

/// `allowpubkey`: membership as role member, under the rule of `POST /api/members`; a key that
/// already has a role keeps it, a banned key is refused (under its membership lock, so a ban
/// committing meanwhile is seen).
async fn allow(
    conn: &mut sqlx::PgConnection,
    community: CommunityId,
    me: Role,
    pubkey: &Pubkey,
) -> WriteResult<()> {
    buzz_store::bans::lock_membership(conn, community, pubkey).await?;
    members::not_banned(buzz_store::bans::any_banned(conn, community, &[pubkey]).await?)?;
    let previous = buzz_store::access::community_role(conn, community, pubkey).await?;
    if rule::allow(me, previous)? {
        store::put_member(conn, community, pubkey, Role::Member).await?;
    }
    Ok(())
}

async fn profile(
    conn: &mut sqlx::PgConnection,
    community: CommunityId,
    field: ProfileField,
    value: &str,
) -> WriteResult<Managed> {
    mstore::set_profile(conn, community, field, value).await?;
    Ok(answered(json!(true)))
}
