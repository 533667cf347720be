//! Kind 9007, channel creation: `h`, `name`, `visibility` (open/private, default open),
//! `channel_type` (stream/forum/dm, default stream), optional `ttl` seconds; a DM lists its
//! participants in `p` tags, is always private and all its participants are peers. The request
//! is checked without I/O first ([`parse`]), then against the store.

use buzz_bus::{Actor, BusError, Scope};
use buzz_core::{kinds, Event};
use buzz_store::{access, ChannelType, Role, Visibility};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::WriteResult;
use crate::rules::post::channel_tag;
use crate::rules::Refusal;
use crate::shared::{store_and_announce, Accepted, Relay};
use crate::store::{self, NewChannel};

/// Longest channel name, in bytes (after trimming).
pub const MAX_NAME_BYTES: usize = 256;

/// A kind-9007 request that passed the checks needing no I/O.
#[derive(Debug, PartialEq, Eq)]
pub struct Spec<'a> {
    /// The channel id (`h`).
    pub id: Uuid,
    /// The trimmed name; empty only for a DM.
    pub name: &'a str,
    /// Open or private; always private for a DM.
    pub visibility: Visibility,
    /// Stream, forum or DM.
    pub channel_type: ChannelType,
    /// Event lifetime in seconds, for a TTL channel.
    pub ttl_seconds: Option<i32>,
    /// A DM's distinct `p` keys, in tag order (may include the creator); empty otherwise.
    pub peers: Vec<&'a str>,
}

/// Checks a kind-9007 event's tags.
pub fn parse(event: &Event) -> Result<Spec<'_>, Refusal> {
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
    let mut peers: Vec<&str> = Vec::new();
    if dm {
        for p in event.tags_named("p") {
            let key = p.get(1).map(String::as_str).unwrap_or_default();
            if !buzz_core::is_lower_hex(key, 64) {
                return Err(Refusal::BadTargetPubkey);
            }
            if !peers.contains(&key) {
                peers.push(key);
            }
        }
    }
    Ok(Spec { id, name, visibility, channel_type, ttl_seconds, peers })
}

/// Creates the channel: the creator becomes its owner (a DM's participants are all members), and
/// the relay's 39000/39002 for it are stored beside the 9007.
pub async fn create_channel(
    tx: &mut PgConnection,
    community: Uuid,
    actor: &Actor,
    event: Event,
    relay: &Relay<'_>,
) -> WriteResult<Accepted> {
    if !actor.has_scope(Scope::ChannelsWrite) {
        return Err(Refusal::ChannelCreateScope.into());
    }
    let spec = parse(&event)?;
    let dm = spec.channel_type == ChannelType::Dm;
    let mut participants: Vec<String> = vec![actor.member_key().to_owned()];
    for key in &spec.peers {
        if access::community_role(tx, community, key).await?.is_none() {
            return Err(Refusal::DmParticipantNotMember.into());
        }
        if !participants.iter().any(|k| k == key) {
            participants.push((*key).to_owned());
        }
    }
    if dm && participants.len() < 2 {
        return Err(Refusal::DmAlone.into());
    }
    let new = NewChannel {
        id: spec.id,
        name: spec.name,
        visibility: spec.visibility,
        channel_type: spec.channel_type,
        ttl_seconds: spec.ttl_seconds,
        created_by: &actor.pubkey,
    };
    if !store::create_channel(tx, community, &new).await? {
        return Err(Refusal::ChannelIdTaken.into());
    }
    let role = if dm { Role::Member } else { Role::Owner };
    store::add_channel_members(tx, community, spec.id, &participants, role).await?;
    let channel =
        access::load_channel(tx, community, spec.id, false).await?.ok_or_else(BusError::internal)?;
    let mut accepted = store_and_announce(tx, community, event, &channel, None).await?;
    let state = [kinds::CHANNEL_METADATA, kinds::CHANNEL_MEMBERS];
    accepted.also = crate::channels::relay_state(tx, community, &channel, relay, &state).await?;
    Ok(accepted)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "6f1c2a4e-8a51-4b0e-9d3f-0c1b2a3d4e5f";

    fn create(tags: &[&[&str]]) -> Event {
        let mut all = vec![vec!["h".to_owned(), H.to_owned()]];
        all.extend(tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()));
        Event {
            id: "0".repeat(64),
            pubkey: "a".repeat(64),
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
        assert_eq!((spec.visibility, spec.name, spec.peers), (Visibility::Private, "", vec![b.as_str()]));
        assert_eq!(refusal(&[&["channel_type", "dm"], &["visibility", "open"]]), Refusal::DmAlwaysPrivate);
        assert_eq!(refusal(&[&["channel_type", "dm"], &["p", "B"]]), Refusal::BadTargetPubkey);
    }
}
