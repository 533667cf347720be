//! Kind 9: what a post names (its channel `h`, the thread it replies in) and the decision after
//! admission: the kind-9 write rule in `h`, then the thread root.

use buzz_bus::Actor;
use buzz_core::{ChannelId, Event, EventId};
use buzz_store::access::Channel;

use super::admission::{writable, ChannelView};
use super::Refusal;

/// `h` as a lowercase, hyphenated, non-nil UUID.
pub fn channel_tag(event: &Event) -> Result<ChannelId, Refusal> {
    let h = event.tag_value("h").ok_or(Refusal::MissingH)?;
    ChannelId::parse(h).map_err(|_| Refusal::BadH)
}

/// The anchor of a thread reply: the `e` tag marked `root` (`["e", <id>, <relay>, "root"]`).
/// More than one root, or a malformed id, is invalid.
pub fn thread_root(event: &Event) -> Result<Option<EventId>, Refusal> {
    let mut roots = event.tags_named("e").filter(|t| t.get(3).map(String::as_str) == Some("root"));
    let Some(first) = roots.next() else { return Ok(None) };
    if roots.next().is_some() {
        return Err(Refusal::TwoRoots);
    }
    let id = first.get(1).map(String::as_str).unwrap_or_default();
    EventId::parse(id).map(Some).map_err(|_| Refusal::BadThreadRoot)
}

/// What a kind 9 names, parsed once without the database.
#[derive(Debug, Clone)]
pub struct Named {
    /// The channel it is written in (`h`), or why it names none.
    pub channel: Result<ChannelId, Refusal>,
    /// The conversation anchor it replies to, or why it names a bad one.
    pub root: Result<Option<EventId>, Refusal>,
}

impl Named {
    /// Parses `h` and the thread root of `event`.
    #[must_use]
    pub fn parse(event: &Event) -> Self {
        Self { channel: channel_tag(event), root: thread_root(event) }
    }
}

/// The kind-9 decision once admitted, in order: `h`, the write rule there, the thread root (a
/// well-formed id of a conversation anchor in that channel: `anchor`). Returns the channel and
/// root to store the post with.
pub fn decide(
    named: &Named,
    at: ChannelView,
    anchor: bool,
    actor: &Actor,
) -> Result<(Channel, Option<EventId>), Refusal> {
    let channel = writable(named.channel.as_ref().copied(), at, actor)?;
    let root = named.root.clone()?;
    if root.is_some() && !anchor {
        return Err(Refusal::ThreadRootNotAnchor);
    }
    Ok((channel, root))
}

#[cfg(test)]
mod tests {
    use buzz_core::Keys;
    use buzz_store::access::{Standing, WriteDenial};

    use super::*;

    fn post(keys: &Keys, tags: &[&[&str]]) -> Event {
        keys.sign_new(9, tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()).collect(), "hi")
    }

    fn open() -> Channel {
        crate::rules::open_channel(ChannelId::from_u128(7))
    }

    #[test]
    fn h_must_be_a_channel_id() {
        let keys = Keys::generate();
        assert_eq!(channel_tag(&post(&keys, &[])), Err(Refusal::MissingH));
        assert_eq!(channel_tag(&post(&keys, &[&["h", "x"]])), Err(Refusal::BadH));
        let h = ChannelId::from_u128(7).to_string();
        assert_eq!(channel_tag(&post(&keys, &[&["h", &h]])), Ok(ChannelId::from_u128(7)));
    }

    #[test]
    fn a_reply_names_one_well_formed_root() {
        let keys = Keys::generate();
        let id = "ab".repeat(32);
        let root: &[&str] = &["e", &id, "", "root"];
        assert_eq!(thread_root(&post(&keys, &[root, root])), Err(Refusal::TwoRoots));
        assert_eq!(thread_root(&post(&keys, &[&["e", "xyz", "", "root"]])), Err(Refusal::BadThreadRoot));
        assert_eq!(thread_root(&post(&keys, &[&["e", &id]])), Ok(None));
        assert_eq!(thread_root(&post(&keys, &[root])), Ok(Some(EventId::parse(&id).unwrap())));
    }

    #[test]
    fn a_post_is_refused_for_h_then_the_write_rule_then_its_root() {
        let keys = Keys::generate();
        let actor = Actor::session(keys.pubkey());
        let channel = open();
        let h = channel.id.to_string();
        let id = "ab".repeat(32);
        let member = Standing { community_member: true, ..Standing::default() };
        let at = || ChannelView { channel: Some(channel.clone()), standing: member };
        let bad_h = post(&keys, &[&["h", "x"], &["e", "xyz", "", "root"]]);
        assert_eq!(decide(&Named::parse(&bad_h), at(), false, &actor).err(), Some(Refusal::BadH));
        let bad_root = post(&keys, &[&["h", &h], &["e", "xyz", "", "root"]]);
        let nowhere = ChannelView { channel: None, standing: member };
        assert_eq!(
            decide(&Named::parse(&bad_root), nowhere, false, &actor).err(),
            Some(Refusal::Denied(WriteDenial::NotFound))
        );
        assert_eq!(decide(&Named::parse(&bad_root), at(), false, &actor).err(), Some(Refusal::BadThreadRoot));
        let reply = post(&keys, &[&["h", &h], &["e", &id, "", "root"]]);
        assert_eq!(
            decide(&Named::parse(&reply), at(), false, &actor).err(),
            Some(Refusal::ThreadRootNotAnchor)
        );
        assert_eq!(
            decide(&Named::parse(&reply), at(), true, &actor),
            Ok((channel.clone(), Some(EventId::parse(&id).unwrap())))
        );
        let top = post(&keys, &[&["h", &h]]);
        assert_eq!(decide(&Named::parse(&top), at(), false, &actor), Ok((channel.clone(), None)));
    }
}
