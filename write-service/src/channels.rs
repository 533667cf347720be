//! Channel administration (kinds 9000, 9001, 9002, 9005, 9008), NIP-09 deletion of one's own
//! events (kind 5), and the relay-signed channel state (39000 metadata, 39002 members).

use buzz_bus::{Actor, LiveEvent};
use buzz_core::kinds::{
    CHANNEL_MEMBERS, CHANNEL_METADATA, DELETE_CHANNEL, EDIT_CHANNEL, PUT_USER, REDACT, REMOVE_USER,
};
use buzz_core::{CommunityId, Event};
use buzz_store::access::{self, Channel};
use buzz_store::relay_state::{channel_members, members_tags, metadata_tags};
use sqlx::PgConnection;

use crate::error::WriteResult;
use crate::rules::deletion::{self, RevisionView, TargetView};
use crate::rules::moderation::{self, Change, ModerationView};
use crate::rules::post::channel_tag;
use crate::shared::{live_event, store_and_announce, Accepted, Relay};
use crate::store;

/// Kinds 9000/9001/9002/9005/9008: gathers the locked channel and the standings the change
/// concerns, applies `rules::moderation::decide`, and makes the change. The change and its event
/// commit together; membership, visibility, archive and deletion changes are access changes.
pub async fn moderate(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    let channel_id = channel_tag(&event)?;
    let member = actor.member_key();
    let channel = store::lock_channel(tx, community, channel_id).await?;
    let standing = access::standing(tx, community, channel_id, member).await?;
    let author;
    let mut view = ModerationView { channel, standing, ..ModerationView::default() };
    match event.kind {
        PUT_USER | REMOVE_USER => {
            if let Ok(target) = moderation::target_pubkey(&event) {
                if event.kind == PUT_USER {
                    view.target_community_role = access::community_role(tx, community, &target).await?;
                }
                view.target_channel_role = store::channel_role(tx, community, channel_id, &target).await?;
            }
        }
        REDACT => {
            if let Ok(target) = moderation::redaction_target(&event) {
                // A redacted event may be redacted again: each redaction stands on its own.
                let found = crate::redactions::target(tx, community, &target).await?;
                author = found.filter(|(_, c, _)| *c == Some(channel_id)).map(|(author, ..)| author);
                view.redacted_author = author.as_ref();
            }
        }
        DELETE_CHANNEL => view.own_role = store::channel_role(tx, community, channel_id, member).await?,
        _ => {}
    }
    let (channel, change) = moderation::decide(&event, actor, channel_id, view)?;
    let (metadata, members) = match change {
        Change::PutUser { target, role } => {
            store::add_channel_members(tx, community, channel_id, &[&target], role).await?;
            (false, true)
        }
        Change::RemoveUser { target } => {
            let removed = store::remove_channel_member(tx, community, channel_id, &target, target != *member);
            moderation::removed(removed.await?)?;
            (false, true)
        }
        Change::Edit => {
            store::update_channel(tx, community, &channel).await?;
            (true, false)
        }
        Change::Redact { target } => {
            store::redact_event(tx, community, &target).await?;
            (false, false)
        }
        Change::DeleteChannel => {
            store::delete_channel(tx, community, channel_id).await?;
            (false, false)
        }
    };
    let access_changed =
        matches!(event.kind, PUT_USER | REMOVE_USER | EDIT_CHANNEL | DELETE_CHANNEL).then_some(channel_id);
    let mut accepted = store_and_announce(tx, community, event, &channel, None).await?;
    accepted.access_changed = access_changed;
    let kinds: Vec<u32> = [(metadata, CHANNEL_METADATA), (members, CHANNEL_MEMBERS)]
        .into_iter()
        .filter_map(|(changed, kind)| changed.then_some(kind))
        .collect();
    accepted.also = relay_state(tx, community, &channel, relay, &kinds).await?;
    Ok(accepted)
}

/// Kind 5 (NIP-09): gathers what the database says about each named event and their channel,
/// applies `rules::deletion`, and deletes them.
pub async fn delete_own(
    tx: &mut PgConnection,
    community: CommunityId,
    actor: &Actor,
    event: Event,
) -> WriteResult<Accepted> {
    let ids = deletion::named_ids(&event)?;
    let mut found = Vec::with_capacity(ids.len());
    for id in &ids {
        let origin = crate::artifacts::sql::revision_origin(tx, community, id).await?;
        let revision = match origin {
            Some((channel_id, author)) => {
                let channel = access::load_channel(tx, community, channel_id, false).await?;
                let standing = access::standing(tx, community, channel_id, actor.member_key()).await?;
                Some((author, channel, standing))
            }
            None => None,
        };
        found.push((revision, store::event_owner(tx, community, id).await?));
    }
    let targets: Vec<TargetView<'_>> = found
        .iter()
        .map(|(revision, owner)| TargetView {
            revision: revision.as_ref().map(|(author, channel, standing)| RevisionView {
                author: author.as_ref(),
                channel: channel.as_ref(),
                standing: *standing,
            }),
            owner: owner.as_ref().map(|(author, channel, _)| (author, *channel)),
        })
        .collect();
    let channel_id = deletion::channel_of(&event, actor, &targets)?;
    let channel = access::load_channel(tx, community, channel_id, true).await?;
    let standing = access::standing(tx, community, channel_id, actor.member_key()).await?;
    let channel = deletion::deletable(channel, standing, actor)?;
    store::delete_events(tx, community, &ids).await?;
    store_and_announce(tx, community, event, &channel, None).await
}

/// Regenerates the relay-signed channel events of `kinds` (39000 metadata, 39002 members),
/// keeping only the newest of each.
pub async fn relay_state(
    tx: &mut PgConnection,
    community: CommunityId,
    channel: &Channel,
    relay: &Relay<'_>,
    kinds: &[u32],
) -> WriteResult<Vec<LiveEvent>> {
    let mut out = Vec::new();
    for kind in [CHANNEL_METADATA, CHANNEL_MEMBERS] {
        if !kinds.contains(&kind) {
            continue;
        }
        let tags = if kind == CHANNEL_METADATA {
            metadata_tags(channel)
        } else {
            members_tags(channel.id, channel_members(tx, community, channel.id, None).await?)
        };
        let signed = relay.keys.sign_new(kind, tags, "");
        store::drop_relay_event(tx, community, channel.id, kind, &signed.pubkey).await?;
        if store::insert_event(tx, community, &signed, Some(channel.id), None, None).await?.is_none() {
            continue;
        }
        out.push(live_event(community, channel, signed));
    }
    Ok(out)
}
