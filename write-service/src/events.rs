//! Event writes: admission, dispatch to the event family's module, storage, and what is
//! published after commit. Kind-9 posts are handled here.

use buzz_bus::{Actor, Audience, BusError};
use buzz_core::{kinds, Event, EventId, Pubkey};
use buzz_store::{access, Role};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::error::{WriteError, WriteResult};
use crate::shared::{already_accepted, channel_tag, credential, store_and_announce, Accepted, Relay};
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
    community: Uuid,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    if event.pubkey != actor.pubkey {
        return Err(WriteError::restricted("event pubkey is not the authenticated pubkey"));
    }
    if !kinds::accepted_from_clients(event.kind) {
        return Err(WriteError::blocked(format!("kind {} is not accepted by this relay", event.kind)));
    }
    let mut tx = pool.begin().await?;
    let Some(admission) = store::admission(&mut tx, community, &event.id, actor.member_key()).await? else {
        return Err(WriteError::restricted("community is not active"));
    };
    if admission.duplicate {
        return already_accepted(admission.deleted);
    }
    let Some(role) = admission.role else {
        return Err(WriteError::restricted("not a member of this community"));
    };
    let access_version = admission.access_version;
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
    let mut bans: Option<(Uuid, Vec<Pubkey>)> = None;
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

async fn post_message(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    event: Event,
    community_role: Role,
) -> WriteResult<Accepted> {
    let channel_id = channel_tag(&event)?;
    let (channel, standing, banned) =
        access::channel_for_post(tx, community, channel_id, actor.member_key(), Some(community_role)).await?;
    access::can_write(channel.as_ref(), standing, credential(actor))?;
    let channel = channel.ok_or_else(BusError::internal)?;
    let root = thread_root(&event)?;
    if let Some(root) = &root {
        if !store::is_anchor(tx, community, channel.id, root).await? {
            return Err(WriteError::invalid("thread root must be a conversation anchor in this channel"));
        }
    }
    let mut accepted = store_and_announce(tx, community, event, &channel, root.as_ref()).await?;
    if let Some(live) = accepted.live.as_mut().filter(|l| l.audience == Audience::Community) {
        live.banned = banned;
    }
    accepted.bans_resolved = true;
    crate::read_model::on_message(tx, community, &accepted).await?;
    Ok(accepted)
}

/// The anchor of a thread reply: the `e` tag marked `root` (`["e", <id>, <relay>, "root"]`).
/// More than one root, or a malformed id, is invalid.
pub fn thread_root(event: &Event) -> Result<Option<EventId>, BusError> {
    let mut roots = event.tags_named("e").filter(|t| t.get(3).map(String::as_str) == Some("root"));
    let Some(first) = roots.next() else { return Ok(None) };
    if roots.next().is_some() {
        return Err(BusError::invalid("a reply names exactly one root"));
    }
    EventId::parse(first.get(1).map(String::as_str).unwrap_or_default())
        .map(Some)
        .map_err(|_| BusError::invalid("thread root must be a 64-char lowercase hex event id"))
}
