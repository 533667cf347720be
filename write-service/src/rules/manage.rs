//! NIP-86 community management: each method under the membership rules of `POST/DELETE
//! /api/members` ([`super::members`]) and the channel's message-removal rule of kind 9005
//! ([`super::moderation::decide_redaction`]), so one rule set decides both surfaces. Only the
//! community's owner and admins call.

use buzz_bus::Actor;
use buzz_core::{ChannelId, Pubkey};
use buzz_store::access::WriteDenial;
use buzz_store::Role;

use super::members::{grant, may_remove};
use super::moderation::{decide_redaction, ModerationView};
use super::Refusal;

/// The caller's community role, when it manages the community: an owner or an admin (a member
/// or not, anyone else is refused alike).
pub fn manager(role: Option<Role>) -> Result<Role, Refusal> {
    role.filter(|r| r.is_admin()).ok_or(Refusal::NotCommunityManager)
}

/// `banpubkey` of a key whose role is `target` (`None`: no member, an agent's key for one): `me`
/// may remove it, and nobody bans their own key.
pub fn ban(me: Role, target: Option<Role>, own_key: bool) -> Result<(), Refusal> {
    if target.is_some_and(|t| !may_remove(me, t)) || own_key {
        return Err(Refusal::MemberNotRemovable);
    }
    Ok(())
}

/// `unbanpubkey`: the key was banned.
pub fn unban(was_banned: bool) -> Result<(), Refusal> {
    if was_banned {
        Ok(())
    } else {
        Err(Refusal::NotBanned)
    }
}

/// `allowpubkey` of an unbanned key whose role is `previous`: true when it is to be added as a
/// member (a key that already has a role keeps it), under the rule of `POST /api/members`.
pub fn allow(me: Role, previous: Option<Role>) -> Result<bool, Refusal> {
    if previous.is_some() {
        return Ok(false);
    }
    grant(me, None, Role::Member)?;
    Ok(true)
}

/// `unblockip`: the address was blocked.
pub fn unblock(was_blocked: bool) -> Result<(), Refusal> {
    if was_blocked {
        Ok(())
    } else {
        Err(Refusal::NotBlocked)
    }
}

/// The event a `banevent`/`unbanevent` names, as the store found it: its author and channel,
/// and what else the store said (`T`). An event in no channel is answered as none.
pub fn event_in_channel<T>(
    found: Option<(Pubkey, Option<ChannelId>, T)>,
) -> Result<(Pubkey, ChannelId, T), Refusal> {
    match found {
        Some((author, Some(channel_id), more)) => Ok((author, channel_id, more)),
        _ => Err(Refusal::NoSuchEvent),
    }
}

/// The removal rule of kind 9005 for the event's author in its channel, decided on the locked
/// channel; what the caller may not read is "no such event", like an event that does not exist.
pub fn redaction(actor: &Actor, channel_id: ChannelId, view: &ModerationView<'_>) -> Result<(), Refusal> {
    decide_redaction(actor, channel_id, view).map_err(|r| match r {
        Refusal::Denied(WriteDenial::NotFound) => Refusal::NoSuchEvent,
        other => other,
    })
}

/// `unbanevent` of a banned current artifact revision: its ban retired the artifact (it left the
/// current-state index), which only a new revision brings back, so the call is refused saying so.
pub fn unban_event(current_revision: bool) -> Result<(), Refusal> {
    if current_revision {
        Err(Refusal::CurrentRevisionBanned)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use buzz_core::Keys;
    use buzz_store::access::Standing;

    use super::*;

    #[test]
    fn a_ban_follows_the_removal_rule_and_never_names_the_callers_own_key() {
        assert_eq!(manager(Some(Role::Member)), Err(Refusal::NotCommunityManager));
        assert_eq!(ban(Role::Admin, Some(Role::Admin), false), Err(Refusal::MemberNotRemovable));
        assert_eq!(ban(Role::Owner, None, true), Err(Refusal::MemberNotRemovable));
        assert_eq!(ban(Role::Admin, None, false), Ok(()));
        assert_eq!(ban(Role::Admin, Some(Role::Member), false), Ok(()));
    }

    #[test]
    fn an_allowed_key_keeps_a_role_it_has_and_is_otherwise_added_as_a_member() {
        assert_eq!(allow(Role::Admin, Some(Role::Admin)), Ok(false));
        assert_eq!(allow(Role::Admin, None), Ok(true));
        assert_eq!(allow(Role::Member, None), Err(Refusal::RoleNotGrantable));
    }

    #[test]
    fn an_event_the_caller_cannot_read_is_no_such_event() {
        let actor = Actor::session(Keys::generate().pubkey());
        let hidden = ModerationView { channel: None, ..ModerationView::default() };
        assert_eq!(redaction(&actor, ChannelId::from_u128(1), &hidden), Err(Refusal::NoSuchEvent));
        let author = actor.pubkey.clone();
        let view = ModerationView {
            channel: Some(crate::rules::open_channel(ChannelId::from_u128(1))),
            standing: Standing { community_member: true, ..Standing::default() },
            redacted_author: Some(&author),
            ..ModerationView::default()
        };
        assert_eq!(redaction(&actor, ChannelId::from_u128(1), &view), Ok(()));
        let nowhere: Option<(Pubkey, Option<ChannelId>, ())> = Some((author.clone(), None, ()));
        assert_eq!(event_in_channel(nowhere), Err(Refusal::NoSuchEvent));
        assert_eq!(unban_event(true), Err(Refusal::CurrentRevisionBanned));
    }
}
