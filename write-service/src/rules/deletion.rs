//! Kind 5 (NIP-09): an author deletes their own live events, all in one channel they can read.
//! NIP-AR revisions are refused with a reason (NIP-AR moderation) when the sender wrote or can
//! read them; one the sender can neither read nor claim gets the answer any unknown event gets,
//! so the refusal discloses nothing about a channel the sender cannot read.

use buzz_bus::{Actor, Scope};
use buzz_core::{ChannelId, Event, EventId, Pubkey};
use buzz_store::access::{self, Channel, Standing, WriteDenial};

use super::admission::credential;
use super::moderation::UNRESTRICTED;
use super::Refusal;

/// The events a deletion names (`e` tags): one or more event ids.
pub fn named_ids(event: &Event) -> Result<Vec<EventId>, Refusal> {
    let ids: Option<Vec<EventId>> =
        event.tags_named("e").filter_map(|t| t.get(1)).map(|id| EventId::parse(id).ok()).collect();
    ids.filter(|ids| !ids.is_empty()).ok_or(Refusal::DeletionNamesNothing)
}

/// An accepted NIP-AR revision, as the database says: its author while its event is kept, and
/// its channel with the sender's standing there.
#[derive(Debug, Clone)]
pub struct RevisionView<'a> {
    /// The revision's author (`None`: retention removed its event).
    pub author: Option<&'a Pubkey>,
    /// Its channel, if live.
    pub channel: Option<&'a Channel>,
    /// The sender's standing there.
    pub standing: Standing,
}

/// What the database says about one event a deletion names.
#[derive(Debug, Clone, Default)]
pub struct TargetView<'a> {
    /// It is an accepted NIP-AR revision.
    pub revision: Option<RevisionView<'a>>,
    /// Its author and channel, while it is live (not deleted, not redacted).
    pub owner: Option<(&'a Pubkey, Option<ChannelId>)>,
}

/// The named events, in order: none is a revision the sender wrote or can read, each is the
/// sender's own, all in one channel. Returns that channel.
pub fn channel_of(event: &Event, actor: &Actor, targets: &[TargetView<'_>]) -> Result<ChannelId, Refusal> {
    let mut channel_id = None;
    for target in targets {
        if target.revision.as_ref().is_some_and(|r| known(r, actor)) {
            return Err(Refusal::RevisionDeletion);
        }
        let Some((_, channel)) = target.owner.filter(|(author, _)| **author == event.pubkey) else {
            return Err(Refusal::NotYourEvent);
        };
        if channel_id.is_some_and(|c| Some(c) != channel) {
            return Err(Refusal::DeletionSpansChannels);
        }
        channel_id = channel;
    }
    channel_id.ok_or(Refusal::NotYourEvent)
}

/// A revision the sender wrote or can read (its channel, under the sender's credential).
fn known(revision: &RevisionView<'_>, actor: &Actor) -> bool {
    revision.author == Some(&actor.pubkey)
        || revision
            .channel
            .as_ref()
            .is_some_and(|c| access::can_read(c, revision.standing, credential(actor)))
}

/// The sender can read the channel of the deleted events and the credential may write there.
pub fn deletable(channel: Option<Channel>, standing: Standing, actor: &Actor) -> Result<Channel, Refusal> {
    let Some(channel) = channel.filter(|c| access::can_read(c, standing, UNRESTRICTED)) else {
        return Err(Refusal::Denied(WriteDenial::NotFound));
    };
    if !actor.has_scope(Scope::MessagesWrite)
        || actor.channel_ids.as_ref().is_some_and(|c| !c.contains(&channel.id))
    {
        return Err(Refusal::Denied(WriteDenial::Scope));
    }
    Ok(channel)
}

#[cfg(test)]
mod tests {
    use buzz_core::Keys;

    use super::*;

    const A: ChannelId = ChannelId::from_u128(1);
    const B: ChannelId = ChannelId::from_u128(2);

    use crate::rules::open_channel as open;

    const MEMBER: Standing = Standing {
        community_member: true,
        community_admin: false,
        channel_member: false,
        channel_admin: false,
        banned: false,
    };

    #[test]
    fn a_deletion_names_well_formed_ids() {
        let keys = Keys::generate();
        assert_eq!(named_ids(&keys.sign_new(5, vec![], "")), Err(Refusal::DeletionNamesNothing));
        let bad = keys.sign_new(5, vec![vec!["e".into(), "x".into()]], "");
        assert_eq!(named_ids(&bad), Err(Refusal::DeletionNamesNothing));
    }

    /// A sender, its session and an empty kind 5 of theirs.
    fn sender() -> (Pubkey, Actor, Event) {
        let keys = Keys::generate();
        (keys.pubkey(), Actor::session(keys.pubkey()), keys.sign_new(5, vec![], ""))
    }

    #[test]
    fn only_ones_own_live_events_of_one_channel_are_deleted() {
        let (me, actor, event) = sender();
        let mine = |c| TargetView { revision: None, owner: Some((&me, Some(c))) };
        assert_eq!(channel_of(&event, &actor, &[mine(A), mine(A)]), Ok(A));
        assert_eq!(channel_of(&event, &actor, &[mine(A), mine(B)]), Err(Refusal::DeletionSpansChannels));
        let other = Pubkey::parse(&"b".repeat(64)).unwrap();
        let theirs = TargetView { revision: None, owner: Some((&other, Some(A))) };
        assert_eq!(channel_of(&event, &actor, &[mine(A), theirs]), Err(Refusal::NotYourEvent));
        assert_eq!(channel_of(&event, &actor, &[TargetView::default()]), Err(Refusal::NotYourEvent));
    }

    #[test]
    fn a_revision_is_refused_with_its_reason_only_when_the_sender_wrote_or_can_read_it() {
        let (me, actor, event) = sender();
        let written = RevisionView { author: Some(&me), channel: None, standing: Standing::default() };
        let target = TargetView { revision: Some(written), owner: Some((&me, Some(A))) };
        assert_eq!(channel_of(&event, &actor, &[target]), Err(Refusal::RevisionDeletion));
        let channel = open(A);
        let readable = RevisionView { author: None, channel: Some(&channel), standing: MEMBER };
        let target = TargetView { revision: Some(readable), owner: None };
        assert_eq!(channel_of(&event, &actor, &[target]), Err(Refusal::RevisionDeletion));
        let hidden = RevisionView { author: None, channel: None, standing: MEMBER };
        let target = TargetView { revision: Some(hidden), owner: None };
        assert_eq!(channel_of(&event, &actor, &[target]), Err(Refusal::NotYourEvent), "as any unknown event");
    }

    #[test]
    fn the_channel_must_be_readable_and_the_credential_may_write_there() {
        let actor = Actor::session(Keys::generate().pubkey());
        assert_eq!(deletable(None, MEMBER, &actor), Err(Refusal::Denied(WriteDenial::NotFound)));
        let read_only = Actor { scopes: vec![Scope::MessagesRead], ..actor.clone() };
        assert_eq!(deletable(Some(open(A)), MEMBER, &read_only), Err(Refusal::Denied(WriteDenial::Scope)));
        let elsewhere = Actor { channel_ids: Some(vec![B]), ..actor.clone() };
        assert_eq!(deletable(Some(open(A)), MEMBER, &elsewhere), Err(Refusal::Denied(WriteDenial::Scope)));
        assert_eq!(deletable(Some(open(A)), MEMBER, &actor), Ok(open(A)));
    }
}
