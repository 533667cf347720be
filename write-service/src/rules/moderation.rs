//! Channel administration (kinds 9000 put user, 9001 remove user, 9002 edit, 9005 redact, 9008
//! delete channel): who may change what in a channel, from the locked channel and the standings
//! the change concerns.

use buzz_bus::{Actor, Scope};
use buzz_core::kinds::{DELETE_CHANNEL, EDIT_CHANNEL, PUT_USER, REDACT, REMOVE_USER};
use buzz_core::{ChannelId, Event, EventId, Pubkey};
use buzz_store::access::{self, Channel, Credential, Standing, WriteDenial};
use buzz_store::{ChannelType, Role, Visibility};

use super::Refusal;

/// Existence is judged by the pubkey's standing; the credential only narrows what it may do.
pub const UNRESTRICTED: Credential<'static> =
    Credential { can_read_messages: true, can_write_messages: true, channel_ids: None };

/// What the database says about a channel change, under the channel's row lock.
#[derive(Debug, Clone, Default)]
pub struct ModerationView<'a> {
    /// The live channel, locked (`None`: none).
    pub channel: Option<Channel>,
    /// The sender's (member key's) standing there.
    pub standing: Standing,
    /// The sender's channel role (a channel deletion).
    pub own_role: Option<Role>,
    /// The `p` target's community role (a put).
    pub target_community_role: Option<Role>,
    /// The `p` target's channel role (a put or a removal).
    pub target_channel_role: Option<Role>,
    /// The author of the `e` target of a redaction, when it is a live event of this channel.
    pub redacted_author: Option<&'a Pubkey>,
}

/// A change the sender may make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// 9000: `target` gets `role` in the channel.
    PutUser {
        /// The member's key.
        target: Pubkey,
        /// Member or admin.
        role: Role,
    },
    /// 9001: `target` leaves the channel (by a moderator when not the sender).
    RemoveUser {
        /// The member's key.
        target: Pubkey,
    },
    /// 9002: the channel as edited.
    Edit,
    /// 9005: the event `target` is redacted.
    Redact {
        /// The event's id.
        target: EventId,
    },
    /// 9008: the channel is deleted.
    DeleteChannel,
}

/// The `p` target of a put or removal: a pubkey.
pub fn target_pubkey(event: &Event) -> Result<Pubkey, Refusal> {
    Pubkey::parse(event.tag_value("p").unwrap_or_default()).map_err(|_| Refusal::BadTargetPubkey)
}

/// The `e` target of a redaction: an event id.
pub fn redaction_target(event: &Event) -> Result<EventId, Refusal> {
    EventId::parse(event.tag_value("e").unwrap_or_default()).map_err(|_| Refusal::BadRedactTarget)
}

/// The credential's scope (its channel restriction is checked first).
fn need(actor: &Actor, scope: Scope) -> Result<(), Refusal> {
    if actor.has_scope(scope) {
        Ok(())
    } else {
        Err(Refusal::ChannelChangeScope)
    }
}

fn moderator(standing: Standing) -> Result<(), Refusal> {
    if standing.channel_admin || standing.community_admin {
        Ok(())
    } else {
        Err(Refusal::NotModerator)
    }
}

/// The decision on a channel change `event` in channel `channel_id`, in order: the channel exists
/// for the sender and the credential covers it, then the kind's own rules. Returns the channel
/// (edited, for a 9002) and the change.
pub fn decide(
    event: &Event,
    actor: &Actor,
    channel_id: ChannelId,
    mut view: ModerationView<'_>,
) -> Result<(Channel, Change), Refusal> {
    let standing = view.standing;
    let Some(mut channel) = view.channel.take().filter(|c| access::can_read(c, standing, UNRESTRICTED))
    else {
        return Err(Refusal::Denied(WriteDenial::NotFound));
    };
    if actor.channel_ids.as_ref().is_some_and(|ids| !ids.contains(&channel_id)) {
        return Err(Refusal::Denied(WriteDenial::Scope));
    }
    let dm = channel.channel_type == ChannelType::Dm;
    let change = match event.kind {
        PUT_USER | REMOVE_USER if dm => return Err(Refusal::DmParticipantsFixed),
        PUT_USER => put_user(event, actor, &view)?,
        REMOVE_USER => remove_user(event, actor, &view)?,
        EDIT_CHANNEL => {
            need(actor, Scope::ChannelsWrite)?;
            moderator(standing)?;
            edit(&mut channel, event)?;
            Change::Edit
        }
        REDACT => {
            let target = redaction_target(event)?;
            may_redact(actor, standing, view.redacted_author)?;
            Change::Redact { target }
        }
        DELETE_CHANNEL => {
            need(actor, Scope::ChannelsWrite)?;
            if view.own_role != Some(Role::Owner) && !standing.community_admin {
                return Err(Refusal::ChannelDeletion);
            }
            Change::DeleteChannel
        }
        kind => return Err(Refusal::KindNotAccepted(kind)),
    };
    Ok((channel, change))
}

/// 9000: a moderator adds a community member (or changes a member's role) as member or admin;
/// the channel owner's role never changes.
fn put_user(event: &Event, actor: &Actor, view: &ModerationView<'_>) -> Result<Change, Refusal> {
    need(actor, Scope::ChannelsWrite)?;
    moderator(view.standing)?;
    let target = target_pubkey(event)?;
    let role = match event.tags_named("p").next().and_then(|t| t.get(2)) {
        None => Role::Member,
        Some(r) => Role::parse(r).filter(|r| *r != Role::Owner).ok_or(Refusal::BadChannelRole)?,
    };
    if view.target_community_role.is_none() {
        return Err(Refusal::TargetNotCommunityMember);
    }
    if view.target_channel_role == Some(Role::Owner) {
        return Err(Refusal::OwnerRoleFixed);
    }
    Ok(Change::PutUser { target, role })
}

/// 9001: a member leaves, or a moderator removes someone (a channel owner only by a community
/// owner or admin).
fn remove_user(event: &Event, actor: &Actor, view: &ModerationView<'_>) -> Result<Change, Refusal> {
    let target = target_pubkey(event)?;
    if target == *actor.member_key() {
        need(actor, Scope::MessagesWrite)?;
    } else {
        need(actor, Scope::ChannelsWrite)?;
        moderator(view.standing)?;
        if view.target_channel_role == Some(Role::Owner) && !view.standing.community_admin {
            return Err(Refusal::OwnerRemoval);
        }
    }
    Ok(Change::RemoveUser { target })
}

/// The channel's message-removal rule (kind 9005 and NIP-86 `banevent`/`unbanevent`): an author
/// removes their own event, a channel or community moderator anyone's. `author`: the event's,
/// when it is an event of this channel.
fn may_redact(actor: &Actor, standing: Standing, author: Option<&Pubkey>) -> Result<(), Refusal> {
    let Some(author) = author else { return Err(Refusal::NoSuchEvent) };
    if *author == actor.pubkey {
        need(actor, Scope::MessagesWrite)
    } else {
        need(actor, Scope::ChannelsWrite)?;
        moderator(standing)
    }
}

/// A redaction that comes without a kind-9005 event (NIP-86 `banevent`, `unbanevent`): the
/// channel must exist for the sender and the credential cover it, as for every channel change,
/// then [`may_redact`] decides. The view's `redacted_author` is the target's.
pub fn decide_redaction(
    actor: &Actor,
    channel_id: ChannelId,
    view: &ModerationView<'_>,
) -> Result<(), Refusal> {
    let standing = view.standing;
    if !view.channel.as_ref().is_some_and(|c| access::can_read(c, standing, UNRESTRICTED)) {
        return Err(Refusal::Denied(WriteDenial::NotFound));
    }
    if actor.channel_ids.as_ref().is_some_and(|ids| !ids.contains(&channel_id)) {
        return Err(Refusal::Denied(WriteDenial::Scope));
    }
    may_redact(actor, standing, view.redacted_author)
}

/// A 9001's removal found an active membership to end (`removed`); none is refused.
pub fn removed(removed: bool) -> Result<(), Refusal> {
    if removed {
        Ok(())
    } else {
        Err(Refusal::TargetNotChannelMember)
    }
}

/// 9002: any of `name`, `visibility` (not for DMs), `archived` ("true"/"false").
fn edit(channel: &mut Channel, event: &Event) -> Result<(), Refusal> {
    let mut changed = false;
    if let Some(name) = event.tag_value("name") {
        let name = name.trim();
        if name.is_empty() || name.len() > 256 {
            return Err(Refusal::BadName);
        }
        channel.name = name.to_owned();
        changed = true;
    }
    if let Some(v) = event.tag_value("visibility") {
        if channel.channel_type == ChannelType::Dm {
            return Err(Refusal::DmAlwaysPrivate);
        }
        channel.visibility = Visibility::parse(v).ok_or(Refusal::BadVisibility)?;
        changed = true;
    }
    if let Some(a) = event.tag_value("archived") {
        channel.archived = match a {
            "true" => true,
            "false" => false,
            _ => return Err(Refusal::BadArchived),
        };
        changed = true;
    }
    if changed {
        Ok(())
    } else {
        Err(Refusal::EmptyEdit)
    }
}

#[cfg(test)]
mod tests;
