//! Channel administration (kinds 9000 put user, 9001 remove user, 9002 edit, 9005 redact, 9008
//! delete channel): gathers the locked channel and the standings the change concerns, applies
//! `rules::moderation::decide`, and makes the change. The change and its event commit together;
//! membership, visibility, archive and deletion changes are access changes.

use buzz_core::kinds::{
    CHANNEL_MEMBERS, CHANNEL_METADATA, DELETE_CHANNEL, EDIT_CHANNEL, PUT_USER, REDACT, REMOVE_USER,
};
use buzz_core::{ChannelId, CommunityId, Event, Pubkey};
use buzz_store::access::{self, Channel};
use sqlx::PgConnection;

use crate::channel::sql;
use crate::channel::state::relay_state;
use crate::engine::single::{store_and_announce, One};
use crate::engine::Accepted;
use crate::error::WriteResult;
use crate::rules::moderation::{self, Change, ModerationView};
use crate::rules::post::channel_tag;

/// Kinds 9000/9001/9002/9005/9008 (any other kind is refused by the rules).
pub(crate) async fn moderate(tx: &mut PgConnection, w: One<'_>) -> WriteResult<Accepted> {
    let One { community, actor, event, relay } = w;
    let channel_id = channel_tag(&event)?;
    let member = actor.member_key();
    let channel = sql::lock_channel(tx, community, channel_id).await?;
    let standing = access::standing(tx, community, channel_id, member).await?;
    let (view, author) = gather(tx, community, channel_id, member, &event).await?;
    let view = ModerationView { channel, standing, redacted_author: author.as_ref(), ..view };
    let (channel, change) = moderation::decide(&event, actor, channel_id, view)?;
    let (metadata, members) = apply(tx, community, channel_id, member, &channel, change).await?;
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

/// What the change concerns beyond the channel and the sender's standing there: the target's
/// roles (a put or removal), the sender's channel role (a deletion), and the author of a
/// redaction's target when it is an event of this channel (returned apart: the view borrows it).
async fn gather(
    tx: &mut PgConnection,
    community: CommunityId,
    channel_id: ChannelId,
    member: &Pubkey,
    event: &Event,
) -> WriteResult<(ModerationView<'static>, Option<Pubkey>)> {
    let mut view = ModerationView::default();
    let mut author = None;
    match event.kind {
        PUT_USER | REMOVE_USER => {
            if let Ok(target) = moderation::target_pubkey(event) {
                if event.kind == PUT_USER {
                    view.target_community_role = access::community_role(tx, community, &target).await?;
                }
                view.target_channel_role = sql::channel_role(tx, community, channel_id, &target).await?;
            }
        }
        REDACT => {
            if let Ok(target) = moderation::redaction_target(event) {
                // A redacted event may be redacted again: each redaction stands on its own.
                let found = sql::redaction_target(tx, community, &target).await?;
                author = found.filter(|(_, c, _)| *c == Some(channel_id)).map(|(author, ..)| author);
            }
        }
        DELETE_CHANNEL => view.own_role = sql::channel_role(tx, community, channel_id, member).await?,
        _ => {}
    }
    Ok((view, author))
}

/// Makes `change` in the locked channel; returns whether its metadata and its members changed
/// (the relay's 39000 and 39002 to regenerate).
async fn apply(
    tx: &mut PgConnection,
    community: CommunityId,
    channel_id: ChannelId,
    member: &Pubkey,
    channel: &Channel,
    change: Change,
) -> WriteResult<(bool, bool)> {
    Ok(match change {
        Change::PutUser { target, role } => {
            sql::add_channel_members(tx, community, channel_id, &[&target], role).await?;
            (false, true)
        }
        Change::RemoveUser { target } => {
            let removed = sql::remove_channel_member(tx, community, channel_id, &target, target != *member);
            moderation::removed(removed.await?)?;
            (false, true)
        }
        Change::Edit => {
            sql::update_channel(tx, community, channel).await?;
            (true, false)
        }
        Change::Redact { target } => {
            sql::redact_event(tx, community, &target).await?;
            (false, false)
        }
        Change::DeleteChannel => {
            sql::delete_channel(tx, community, channel_id).await?;
            (false, false)
        }
    })
}
