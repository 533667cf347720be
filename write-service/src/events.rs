//! Event writes: admission, dispatch to the event family's module, storage, and what is
//! published after commit. Kind-9 posts are handled here. The rules are `rules`'; this path
//! gathers their views one write at a time.

use buzz_bus::{Actor, Audience};
use buzz_core::{kinds, ChannelId, CommunityId, Event, Pubkey};
use buzz_store::access::{self, Standing};
use buzz_store::Role;
use sqlx::{PgConnection, PgPool};

use crate::error::{WriteError, WriteResult};
use crate::rules::admission::{self, Admitted, ChannelView};
use crate::rules::post::{self, Named};
use crate::shared::{live_event, store_and_announce, Accepted, Relay};
use crate::store;

/// Writes one client event in one transaction: admission (community active, already accepted
/// or deleted by its author, membership), the event family's checks and changes, the access version and bans its live
/// events carry; commits before answering.
#[tracing::instrument(
    name = "db.transaction",
    skip_all,
    fields(db.system = "postgresql", db.operation = "write_event", otel.kind = "client")
)]
pub async fn write_event(
    pool: &PgPool,
    community: CommunityId,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    // What needs no database is answered before a transaction is opened.
    admission::sender(&event, actor)?;
    let mut tx = pool.begin().await?;
    let bans = buzz_store::bans::table_exists(pool, &mut tx).await?;
    let keys = (actor.member_key(), &actor.pubkey);
    let (view, access_version) = store::admission(&mut tx, community, &event.id, keys, bans).await?;
    let role = match admission::admit(&event, actor, &view)? {
        Admitted::Duplicate => {
            return announce_again(&mut tx, community, actor, event, view.role, access_version).await
        }
        Admitted::Member(role) => role,
    };
    let mut accepted = match event.kind {
        kinds::CREATE_CHANNEL => {
            crate::create_channel::create_channel(&mut tx, community, actor, event, relay).await?
        }
        kinds::MESSAGE => post_message(&mut tx, community, actor, event, role).await?,
        kinds::DELETION => crate::channels::delete_own(&mut tx, community, actor, event).await?,
        kinds::ARTIFACT_REVISION => {
            crate::artifacts::write_revision(&mut tx, community, actor, event, role, relay).await?
        }
        _ => crate::channels::moderate(&mut tx, community, actor, event, relay).await?,
    };
    let version = match accepted.access_changed {
        Some(_) => access::bump_access_version(&mut tx, community).await?,
        None => access_version,
    };
    let bans_resolved = accepted.bans_resolved;
    // The primary event and the relay's own events are usually in one channel: read its bans once.
    let mut bans: Option<(ChannelId, Vec<Pubkey>)> = None;
    for live in accepted.live.iter_mut().chain(accepted.also.iter_mut()) {
        live.access_version = version;
        if let (Audience::Community, Some(channel), false) = (live.audience, live.channel_id, bans_resolved) {
            if bans.as_ref().is_none_or(|(c, _)| *c != channel) {
                let list = store::banned_members(&mut tx, community, channel).await?;
                bans = Some((channel, list));
            }
            live.banned = bans.as_ref().map(|(_, list)| list.clone()).unwrap_or_default();
        }
    }
    tx.commit().await.map_err(WriteError::Commit)?;
    Ok(accepted)
}

/// How long after its acceptance a resent kind-9 post is announced again.
const ANNOUNCE_AGAIN_WITHIN_SECS: f64 = 60.0;

/// A post already stored, sent again: `duplicate:`, and announced again (live) when it was
/// accepted within the last minute. The replica that committed it may have died before publishing
/// it (the writer got `error:` or lost its socket, and resent); the resend is then its
/// subscribers' only chance to get it live. A subscriber may receive it twice (clients drop a
/// repeated id), never silently not at all. An older resend (a client replaying its history) is
/// only answered.
async fn announce_again(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    event: Event,
    role: Option<Role>,
    access_version: i64,
) -> WriteResult<Accepted> {
    let mut accepted = Accepted::duplicate();
    if event.kind != kinds::MESSAGE
        || !store::accepted_within(tx, community, &event.id, ANNOUNCE_AGAIN_WITHIN_SECS).await?
    {
        return Ok(accepted);
    }
    let Ok(channel) = Named::parse(&event).channel else { return Ok(accepted) };
    let (Some(channel), _, banned) =
        access::channel_for_post(tx, community, channel, actor.member_key(), role).await?
    else {
        return Ok(accepted);
    };
    let mut live = live_event(community, &channel, event);
    live.access_version = access_version;
    if live.audience == Audience::Community {
        live.banned = banned;
    }
    accepted.live = Some(live);
    Ok(accepted)
}

/// Kind 9: gathers the channel of `h` (share-locked) and whether the thread root is an anchor
/// there, then applies `rules::post::decide`.
async fn post_message(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    event: Event,
    community_role: Role,
) -> WriteResult<Accepted> {
    let named = Named::parse(&event);
    let (channel, standing, banned) = match named.channel {
        Ok(id) => {
            access::channel_for_post(tx, community, id, actor.member_key(), Some(community_role)).await?
        }
        Err(_) => (None, Standing::default(), Vec::new()),
    };
    let anchor = match (&channel, &named.root) {
        (Some(c), Ok(Some(root))) => store::is_anchor(tx, community, c.id, root).await?,
        _ => false,
    };
    let (channel, root) = post::decide(&named, ChannelView { channel, standing }, anchor, actor)?;
    let mut accepted = store_and_announce(tx, community, event, &channel, root.as_ref()).await?;
    if let Some(live) = accepted.live.as_mut().filter(|l| l.audience == Audience::Community) {
        live.banned = banned;
    }
    accepted.bans_resolved = true;
    crate::read_model::on_message(tx, community, &accepted).await?;
    Ok(accepted)
}
