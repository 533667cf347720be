//! Kind 9007, channel creation: `h`, `name`, `visibility` (open/private, default open),
//! `channel_type` (stream/forum/dm, default stream), optional `ttl` seconds; a DM lists its
//! participants in `p` tags, is always private and all its participants are peers. The request
//! is checked without I/O first ([`admit`]), then against what the store says of the DM's peers
//! ([`participants`]).

use buzz_bus::{Actor, Scope};
use buzz_core::{ChannelId, Event, Pubkey};
use buzz_store::{ChannelType, Visibility};

use super::post::channel_tag;
use super::Refusal;

/// Longest channel name, in bytes (after trimming).
pub const MAX_NAME_BYTES: usize = 256;

/// A kind-9007 request that passed the checks needing no I/O.
#[derive(Debug, PartialEq, Eq)]
pub struct Spec<'a> {
    /// The channel id (`h`).
    pub id: ChannelId,
    /// The trimmed name; empty only for a DM.
    pub name: &'a str,
    /// Open or private; always private for a DM.
    pub visibility: Visibility,
    /// Stream, forum or DM.
    pub channel_type: ChannelType,
    /// Event lifetime in seconds, for a TTL channel.
    pub ttl_seconds: Option<i32>,
    /// A DM's distinct `p` keys, in tag order (may include the creator); empty otherwise.
    pub peers: Vec<Pubkey>,
}

/// Checks a kind-9007 event's tags.
fn parse(event: &Event) -> Result<Spec<'_>, Refusal> {
    let id = channel_tag(event)?;
    let channel_type = match event.tag_value("channel_type") {
        None => ChannelType::Stream,
        Some(t) => ChannelType::parse(t).ok_or(Refusal::BadChannelType)?,
    };
    let dm = channel_type == ChannelType::Dm;
    let visibility = match (event.tag_value("visibility"), dm) {
        (None | Some("private"), true) => Visibility::Private,
        (Some(_), true) => return Err(Refusal::DmAlwaysPrivate),
        (None, false) => Visibility::Open,
        (Some(v), false) => Visibility::parse(v).ok_or(Refusal::BadVisibility)?,
    };
    let name = event.tag_value("name").map(str::trim).unwrap_or_default();
    if (name.is_empty() && !dm) || name.len() > MAX_NAME_BYTES {
        return Err(Refusal::BadName);
    }
    let ttl_seconds = match event.tag_value("ttl") {
        None => None,
        Some(t) => Some(t.parse::<i32>().ok().filter(|n| *n > 0).ok_or(Refusal::BadTtl)?),
    };
    let mut peers: Vec<Pubkey> = Vec::new();
    if dm {
        for p in event.tags_named("p") {
            let key = Pubkey::parse(p.get(1).map(String::as_str).unwrap_or_default())
                .map_err(|_| Refusal::BadTargetPubkey)?;
            if !peers.contains(&key) {
                peers.push(key);
            }
        }
    }
    Ok(Spec { id, name, visibility, channel_type, ttl_seconds, peers })
}

/// The checks that need no I/O, in order: the credential may create channels, then the tags.
pub fn admit<'e>(event: &'e Event, actor: &Actor) -> Result<Spec<'e>, Refusal> {
    if !actor.has_scope(Scope::ChannelsWrite) {
        return Err(Refusal::ChannelCreateScope);
    }
    parse(event)
}

/// The channel's members: the creator (`creator`, its member key) and, for a DM, its distinct
/// peers, each a community member (`members[i]`: whether `spec.peers[i]` is one); a DM needs
/// someone besides its creator.
pub fn participants<'a>(
    creator: &'a Pubkey,
    spec: &'a Spec<'_>,
    members: &[bool],
) -> Result<Vec<&'a Pubkey>, Refusal> {
    let mut participants = vec![creator];
    for (key, member) in spec.peers.iter().zip(members) {
        if !member {
            return Err(Refusal::DmParticipantNotMember);
        }
        if !participants.contains(&key) {
            participants.push(key);
        }
    }
    if spec.channel_type == ChannelType::Dm && participants.len() < 2 {
        return Err(Refusal::DmAlone);
    }
    Ok(participants)
}

/// The channel id was free and the channel is created (`created`); a taken id (or one taken
/// before: deleted channels keep theirs) is refused.
pub fn created(created: bool) -> Result<(), Refusal> {
    if created {
        Ok(())
    } else {
        Err(Refusal::ChannelIdTaken)
    }
}

#[cfg(test)]
mod tests {
    use buzz_core::kinds;

    use super::*;

    const H: &str = "6f1c2a4e-8a51-4b0e-9d3f-0c1b2a3d4e5f";

    fn create(tags: &[&[&str]]) -> Event {
        let mut all = vec![vec!["h".to_owned(), H.to_owned()]];
        all.extend(tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()));
        Event {
            id: buzz_core::EventId::parse(&"0".repeat(64)).unwrap(),
            pubkey: Pubkey::parse(&"a".repeat(64)).unwrap(),
            created_at: 1,
            kind: kinds::CREATE_CHANNEL,
            tags: all,
            content: String::new(),
            sig: "0".repeat(128),
        }
    }

    fn refusal(tags: &[&[&str]]) -> Refusal {
        parse(&create(tags)).expect_err("refused")
    }

    #[test]
    fn a_named_channel_defaults_to_an_open_stream() {
        let event = create(&[&["name", "  general "]]);
        let spec = parse(&event).unwrap();
        assert_eq!(spec.name, "general");
        assert_eq!(
            (spec.visibility, spec.channel_type, spec.ttl_seconds),
            (Visibility::Open, ChannelType::Stream, None)
        );
        assert!(spec.peers.is_empty());
    }

    #[test]
    fn every_tag_value_is_checked() {
        assert_eq!(refusal(&[&["name", "x"], &["channel_type", "room"]]), Refusal::BadChannelType);
        assert_eq!(refusal(&[&["name", "x"], &["visibility", "public"]]), Refusal::BadVisibility);
        assert_eq!(refusal(&[&["name", "   "]]), Refusal::BadName);
        assert_eq!(refusal(&[&["name", &"n".repeat(257)]]), Refusal::BadName);
        for ttl in ["0", "-5", "1.5", "x"] {
            assert_eq!(refusal(&[&["name", "x"], &["ttl", ttl]]), Refusal::BadTtl);
        }
        let mut nil = create(&[&["name", "x"]]);
        nil.tags[0][1] = "00000000-0000-0000-0000-000000000000".into();
        assert_eq!(parse(&nil).unwrap_err(), Refusal::BadH);
    }

    #[test]
    fn a_dm_is_private_needs_no_name_and_lists_distinct_well_formed_peers() {
        let b = "b".repeat(64);
        let event = create(&[&["channel_type", "dm"], &["p", &b], &["p", &b]]);
        let spec = parse(&event).unwrap();
        let peers = vec![Pubkey::parse(&b).unwrap()];
        assert_eq!((spec.visibility, spec.name, spec.peers), (Visibility::Private, "", peers));
        assert_eq!(refusal(&[&["channel_type", "dm"], &["visibility", "open"]]), Refusal::DmAlwaysPrivate);
        assert_eq!(refusal(&[&["channel_type", "dm"], &["p", "B"]]), Refusal::BadTargetPubkey);
    }

    #[test]
    fn only_a_credential_with_channels_write_creates() {
        let event = create(&[&["name", "x"]]);
        let sender = Pubkey::parse(&"a".repeat(64)).unwrap();
        let read_only = Actor { scopes: vec![Scope::MessagesWrite], ..Actor::session(sender.clone()) };
        assert_eq!(admit(&event, &read_only), Err(Refusal::ChannelCreateScope));
        assert!(admit(&event, &Actor::session(sender)).is_ok());
    }

    #[test]
    fn every_dm_participant_is_a_community_member_and_someone_else_is_in_it() {
        let (me, b) = (Pubkey::parse(&"a".repeat(64)).unwrap(), Pubkey::parse(&"b".repeat(64)).unwrap());
        let event = create(&[&["channel_type", "dm"], &["p", me.as_str()], &["p", b.as_str()]]);
        let spec = parse(&event).unwrap();
        assert_eq!(participants(&me, &spec, &[true, false]), Err(Refusal::DmParticipantNotMember));
        assert_eq!(participants(&me, &spec, &[true, true]), Ok(vec![&me, &b]));
        let alone = create(&[&["channel_type", "dm"], &["p", me.as_str()]]);
        let spec = parse(&alone).unwrap();
        assert_eq!(participants(&me, &spec, &[true]), Err(Refusal::DmAlone));
        let stream = create(&[&["name", "x"]]);
        assert_eq!(participants(&me, &parse(&stream).unwrap(), &[]), Ok(vec![&me]));
    }
}
