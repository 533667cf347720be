//! What every client event passes before its family's rules, and the kind-9 write rule in the
//! channel a write names (kind 9 in `h`; a NIP-AR revision in `h` and, when it lives elsewhere, in
//! its artifact's home).

use buzz_bus::{Actor, Scope};
use buzz_core::{kinds, ChannelId, Event};
use buzz_store::access::{self, Channel, Credential, Standing, WriteDenial};
use buzz_store::Role;

use super::Refusal;

/// What the database says about an event before its family's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdmissionView {
    /// The community is active.
    pub active: bool,
    /// This event id was accepted before (stored, or a NIP-AR revision whose event retention
    /// removed).
    pub duplicate: bool,
    /// It was accepted and its author deleted it with kind 5 since.
    pub deleted: bool,
    /// The writer's (member key's) community role; `None` for a non-member.
    pub role: Option<Role>,
    /// A key the write acts with is banned from the community (NIP-86 `banpubkey`): the
    /// writer's own key, or the owner an agent acts for.
    pub banned: bool,
}

/// An admitted event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Already accepted: `OK true` (`duplicate:`), nothing more to decide or store.
    Duplicate,
    /// From a community member with this role: its family's rules decide.
    Member(Role),
}

/// The checks that need no database, in order: the event is the authenticated writer's, of a
/// kind clients may send. [`admit`] makes them first; a path may make them before reading.
pub fn sender(event: &Event, actor: &Actor) -> Result<(), Refusal> {
    if event.pubkey != actor.pubkey {
        return Err(Refusal::WrongAuthor);
    }
    if !kinds::accepted_from_clients(event.kind) {
        return Err(Refusal::KindNotAccepted(event.kind));
    }
    Ok(())
}

/// Admission, in order: [`sender`], community active, an event already accepted (a duplicate,
/// or refused when its author deleted it: never stored again, so the client must not be told it
/// is stored), a ban of a key the write acts with (whatever role it came in by: a member, an
/// agent, an agent of a banned owner), membership.
pub fn admit(event: &Event, actor: &Actor, view: &AdmissionView) -> Result<Admitted, Refusal> {
    sender(event, actor)?;
    if !view.active {
        return Err(Refusal::CommunityInactive);
    }
    if view.duplicate {
        return if view.deleted { Err(Refusal::DeletedByAuthor) } else { Ok(Admitted::Duplicate) };
    }
    if view.banned {
        return Err(Refusal::BannedKey);
    }
    view.role.map(Admitted::Member).ok_or(Refusal::NotCommunityMember)
}

/// What the database says about the channel a write names, for the kind-9 write rule.
#[derive(Debug, Clone)]
pub struct ChannelView {
    /// The live channel, if any.
    pub channel: Option<Channel>,
    /// The writer's standing there.
    pub standing: Standing,
}

/// The writer's credential limits (scopes and channel restriction).
#[must_use]
pub fn credential(actor: &Actor) -> Credential<'_> {
    Credential {
        can_read_messages: actor.has_scope(Scope::MessagesRead),
        can_write_messages: actor.has_scope(Scope::MessagesWrite),
        channel_ids: actor.channel_ids.as_deref(),
    }
}

/// The kind-9 write rule: the write names a channel (`named`, or why it names none) and the
/// writer may post there (`access::can_write`). Returns that channel.
pub fn writable(
    named: Result<ChannelId, &Refusal>,
    at: ChannelView,
    actor: &Actor,
) -> Result<Channel, Refusal> {
    named.map_err(Clone::clone)?;
    access::can_write(at.channel.as_ref(), at.standing, credential(actor))?;
    at.channel.ok_or(Refusal::Denied(WriteDenial::NotFound))
}

#[cfg(test)]
mod tests {
    use buzz_core::Keys;

    use super::*;

    fn event(keys: &Keys, kind: u32) -> Event {
        keys.sign_new(kind, vec![], "")
    }

    const MEMBER: AdmissionView = AdmissionView {
        active: true,
        duplicate: false,
        deleted: false,
        role: Some(Role::Member),
        banned: false,
    };

    #[test]
    fn admission_refuses_in_order_author_kind_community_deletion_ban_membership() {
        let keys = Keys::generate();
        let actor = Actor::session(keys.pubkey());
        let other = Actor::session(Keys::generate().pubkey());
        let post = event(&keys, kinds::MESSAGE);
        let inactive = AdmissionView { active: false, ..AdmissionView::default() };
        assert_eq!(admit(&post, &other, &inactive), Err(Refusal::WrongAuthor));
        assert_eq!(admit(&event(&keys, 1), &actor, &inactive), Err(Refusal::KindNotAccepted(1)));
        assert_eq!(admit(&post, &actor, &inactive), Err(Refusal::CommunityInactive));
        let deleted = AdmissionView { duplicate: true, deleted: true, ..MEMBER };
        assert_eq!(admit(&post, &actor, &deleted), Err(Refusal::DeletedByAuthor));
        let banned = AdmissionView { role: None, banned: true, ..MEMBER };
        assert_eq!(admit(&post, &actor, &banned), Err(Refusal::BannedKey));
        let outsider = AdmissionView { role: None, ..MEMBER };
        assert_eq!(admit(&post, &actor, &outsider), Err(Refusal::NotCommunityMember));
        assert_eq!(admit(&post, &actor, &MEMBER), Ok(Admitted::Member(Role::Member)));
    }

    #[test]
    fn a_ban_refuses_the_write_whatever_role_the_key_holds() {
        let (owner, agent) = (Keys::generate(), Keys::generate());
        let as_agent = Actor { agent_of: Some(owner.pubkey()), ..Actor::session(agent.pubkey()) };
        let post = event(&agent, kinds::MESSAGE);
        // An agent of a member (the owner's role admits it), a member, an admin: a ban refuses.
        for role in [Some(Role::Member), Some(Role::Admin), None] {
            let view = AdmissionView { role, banned: true, ..MEMBER };
            assert_eq!(admit(&post, &as_agent, &view), Err(Refusal::BannedKey), "{role:?}");
        }
        assert_eq!(admit(&post, &as_agent, &MEMBER), Ok(Admitted::Member(Role::Member)));
    }

    #[test]
    fn an_accepted_event_is_a_duplicate_even_for_a_former_member() {
        let keys = Keys::generate();
        let actor = Actor::session(keys.pubkey());
        let view = AdmissionView { duplicate: true, role: None, ..MEMBER };
        assert_eq!(admit(&event(&keys, kinds::MESSAGE), &actor, &view), Ok(Admitted::Duplicate));
    }

    #[test]
    fn the_write_rule_answers_a_bad_h_first_then_the_access_modules_denial() {
        let actor = Actor::session(Keys::generate().pubkey());
        let channel = Channel { archived: true, ..crate::rules::open_channel(ChannelId::from_u128(1)) };
        let member = Standing { community_member: true, ..Standing::default() };
        let at = || ChannelView { channel: Some(channel.clone()), standing: member };
        assert_eq!(writable(Err(&Refusal::BadH), at(), &actor), Err(Refusal::BadH));
        assert_eq!(writable(Ok(channel.id), at(), &actor), Err(Refusal::Denied(WriteDenial::Archived)));
        let missing = ChannelView { channel: None, standing: member };
        assert_eq!(writable(Ok(channel.id), missing, &actor), Err(Refusal::Denied(WriteDenial::NotFound)));
        let open = Channel { archived: false, ..channel.clone() };
        let at = ChannelView { channel: Some(open.clone()), standing: member };
        assert_eq!(writable(Ok(open.id), at, &actor), Ok(open));
    }
}
