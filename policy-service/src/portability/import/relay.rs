//! The relay's own events in an import (issue 37 item 3): this relay signs only what it derives
//! itself. The header's `relay_pubkey` comes from the file, so an event by that key (or by this
//! relay's own key) proves nothing; such an event is kept only as a slot for one this relay
//! derives again, under its own key, with the file's `created_at`:
//!
//! - 39000/39002 channel state: the tags come from the imported channel and member tables
//!   (`buzz_store::relay_state`, what the write-service signs), never from the file; one of each
//!   kind per channel, in a channel the file holds;
//! - a 45011 removal: the tags `d`, `h`, `e` of the move it reports, rebuilt
//!   (`buzz_core::nipar::removal_tags`), and the import is refused unless the imported revision
//!   records hold that move (checked once they are in, `sql::UNRECORDED_REMOVAL`).
//!
//! Any other event by those keys, and any event of a kind the relay never accepts from a client,
//! is refused (400): nothing is imported.

use buzz_core::kinds::{accepted_from_clients, ARTIFACT_REMOVAL, CHANNEL_MEMBERS, CHANNEL_METADATA};
use buzz_core::{ids::parse_uuid, ChannelId, CommunityId, Event, Keys, Pubkey, UnsignedEvent};
use buzz_store::relay_state::{channel, channel_members, members_tags, metadata_tags};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::portability::import::input::{invalid, ImportError};

/// What an event of the file is to this relay.
#[derive(Debug, PartialEq, Eq)]
pub enum Origin {
    /// A client's event, stored as it is.
    Client,
    /// Channel state (39000 or 39002) of `channel`, derived from the tables.
    ChannelState {
        /// 39000 or 39002.
        kind: u32,
        /// The channel (the event's `d` and its channel column).
        channel: ChannelId,
    },
    /// The removal a move of artifact `d` left in `source`, the revision `replaced` replaced.
    Removal {
        /// The artifact.
        d: Uuid,
        /// The channel the artifact moved out of.
        source: ChannelId,
        /// The revision the move replaced.
        replaced: String,
    },
}

/// Decides what `event` (stored in `channel`) is, `relay_keys` being the file header's key and
/// this relay's; `Err` says why it is refused.
pub fn origin(event: &Event, channel: Option<Uuid>, relay_keys: [&Pubkey; 2]) -> Result<Origin, String> {
    let id = event.id.as_str();
    if !relay_keys.contains(&&event.pubkey) {
        if accepted_from_clients(event.kind) {
            return Ok(Origin::Client);
        }
        return Err(format!("event {id}: kind {} is never accepted from a client", event.kind));
    }
    let refused = || {
        format!(
            "event {id}: a kind-{} event by the export's relay key that this relay does not derive \
             (only 39000/39002 channel state and 45011 removals of recorded moves are)",
            event.kind
        )
    };
    let channel = channel.map(ChannelId).ok_or_else(refused)?;
    if !event.content.is_empty() {
        return Err(refused());
    }
    let here = channel.to_string();
    match (event.kind, event.tags.as_slice()) {
        (CHANNEL_METADATA | CHANNEL_MEMBERS, [d, ..]) if value(d, "d") == Some(here.as_str()) => {
            Ok(Origin::ChannelState { kind: event.kind, channel })
        }
        (ARTIFACT_REMOVAL, [d, h, e]) if value(h, "h") == Some(here.as_str()) => {
            let d = value(d, "d").and_then(parse_uuid);
            let replaced = value(e, "e").filter(|v| buzz_core::EventId::parse(v).is_ok());
            match (d, replaced) {
                (Some(d), Some(replaced)) => {
                    Ok(Origin::Removal { d, source: channel, replaced: replaced.to_owned() })
                }
                _ => Err(refused()),
            }
        }
        _ => Err(refused()),
    }
}

/// The value of `tag` when it is exactly `[name, value]`.
fn value<'t>(tag: &'t [String], name: &str) -> Option<&'t str> {
    match tag {
        [n, v] if n == name => Some(v),
        _ => None,
    }
}

/// One derived event: the file's id it replaces, and what the end checks need.
pub struct Derived {
    /// The file's event id.
    pub old: String,
    /// The event this relay signed.
    pub event: Event,
    /// One per channel and kind, or per removed revision: two claims of one slot are refused.
    pub slot: String,
    /// A removal's `d`, source `h` and replaced `e`.
    pub removal: Option<(Uuid, Uuid, String)>,
}

/// Derives the relay's own events of an import.
pub struct Deriver<'k> {
    relay: &'k Keys,
    header: Pubkey,
    /// The longest line: a derived 39002 longer than the file could carry is refused, and no more
    /// members are read than such a list could hold.
    max_line: usize,
}

/// The fewest bytes one member takes in a 39002's JSON (`["p","<64 hex>","owner"],`).
const MEMBER_BYTES: usize = 78;

impl<'k> Deriver<'k> {
    /// A deriver signing with `relay` for a file whose header names `header`.
    pub fn new(relay: &'k Keys, header: Pubkey, max_line: usize) -> Self {
        Self { relay, header, max_line }
    }

    /// This relay's key (hex), the author of every derived event.
    pub fn relay_pubkey(&self) -> String {
        self.relay.public_hex()
    }

    /// The event this relay stores for the file's `event` (stored in `channel`): `None` for a
    /// client's (kept as it is), else the one it derives.
    pub async fn derive(
        &self,
        conn: &mut PgConnection,
        community: CommunityId,
        event: &Event,
        channel_id: Option<Uuid>,
    ) -> Result<Option<Derived>, ImportError> {
        let own = self.relay.pubkey();
        let (tags, slot, removal) = match origin(event, channel_id, [&self.header, &own]).map_err(invalid)? {
            Origin::Client => return Ok(None),
            Origin::ChannelState { kind, channel: ch } => {
                let Some(found) = channel(conn, community, ch).await? else {
                    return Err(invalid(format!(
                        "event {}: channel {ch} is not in the export",
                        event.id.as_str()
                    )));
                };
                let tags = if kind == CHANNEL_METADATA {
                    metadata_tags(&found)
                } else {
                    let at_most = i64::try_from(self.max_line / MEMBER_BYTES + 1).unwrap_or(i64::MAX);
                    members_tags(ch, channel_members(conn, community, ch, Some(at_most)).await?)
                };
                (tags, format!("{kind} {ch}"), None)
            }
            Origin::Removal { d, source, replaced } => {
                let tags = buzz_core::nipar::removal_tags(d, source, &replaced);
                (tags, format!("{ARTIFACT_REMOVAL} {d} {replaced}"), Some((d, source.0, replaced)))
            }
        };
        let derived = self.relay.sign(UnsignedEvent {
            pubkey: self.relay.public_hex(),
            created_at: event.created_at,
            kind: event.kind,
            tags,
            content: String::new(),
        });
        let json = derived.to_json();
        if json.len() > self.max_line {
            return Err(invalid(format!(
                "event {}: the channel state derived from the export is longer than a line ({} bytes)",
                event.id.as_str(),
                self.max_line
            )));
        }
        Ok(Some(Derived { old: event.id.as_str().to_owned(), event: derived, slot, removal }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(keys: &Keys, kind: u32, tags: &[&[&str]], content: &str) -> Event {
        let tags = tags.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()).collect();
        keys.sign_new(kind, tags, content)
    }

    #[test]
    fn only_channel_state_and_removals_by_a_relay_key_are_derived_and_clients_keep_their_kinds() {
        let (header, own, user) = (Keys::generate(), Keys::generate(), Keys::generate());
        let keys = [&header.pubkey(), &own.pubkey()];
        let ch = Uuid::new_v4();
        let c = ch.to_string();
        let d = Uuid::new_v4();
        let e = "ab".repeat(32);
        let of = |event: &Event, channel: Option<Uuid>| origin(event, channel, keys);
        assert_eq!(of(&ev(&user, 9, &[&["h", &c]], "hi"), Some(ch)), Ok(Origin::Client));
        assert!(of(&ev(&user, 1, &[], "note"), None).is_err(), "a kind no client may write");
        assert!(of(&ev(&user, 39000, &[&["d", &c]], ""), Some(ch)).is_err(), "channel state by a user");
        for relay in [&header, &own] {
            let meta = ev(relay, 39000, &[&["d", &c], &["name", "x"]], "");
            assert_eq!(of(&meta, Some(ch)), Ok(Origin::ChannelState { kind: 39000, channel: ChannelId(ch) }));
            let members = ev(relay, 39002, &[&["d", &c]], "");
            assert!(matches!(of(&members, Some(ch)), Ok(Origin::ChannelState { kind: 39002, .. })));
            let removal = ev(relay, 45011, &[&["d", &d.to_string()], &["h", &c], &["e", &e]], "");
            let want = Origin::Removal { d, source: ChannelId(ch), replaced: e.clone() };
            assert_eq!(of(&removal, Some(ch)), Ok(want));
            for kind in [9, 22242, 27235, 45010, 5] {
                assert!(of(&ev(relay, kind, &[&["h", &c]], ""), Some(ch)).is_err(), "kind {kind}");
            }
            assert!(of(&meta, None).is_err() && of(&meta, Some(Uuid::new_v4())).is_err(), "another channel");
            assert!(of(&ev(relay, 39000, &[&["d", &c]], "text"), Some(ch)).is_err(), "content");
            let extra = ev(relay, 45011, &[&["d", &d.to_string()], &["h", &c], &["e", &e], &["p", &e]], "");
            assert!(of(&extra, Some(ch)).is_err(), "a removal carries exactly d, h and e");
            let bad_e = ev(relay, 45011, &[&["d", &d.to_string()], &["h", &c], &["e", "x"]], "");
            assert!(of(&bad_e, Some(ch)).is_err());
        }
    }
}
