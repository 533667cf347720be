//! Building the Nostr messages and events the tool sends, and parsing what relays answer.

use buzz_core::{Event, Keys};
use serde_json::{json, Value};

/// Kinds the tool sends, from `buzz_core::kinds`.
pub const CHAT_KIND: u32 = buzz_core::kinds::MESSAGE;
/// NIP-42 AUTH.
pub const AUTH_KIND: u32 = buzz_core::kinds::CLIENT_AUTH;
/// buzz-relay channel creation.
pub const CREATE_CHANNEL_KIND: u32 = buzz_core::kinds::CREATE_CHANNEL;
/// The subscription id every subscriber uses.
pub const SUB_ID: &str = "s";

/// A channel id for plain mode: 64 random lowercase hex characters.
#[must_use]
pub fn plain_channel_id() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// A channel id for buzz mode: a new UUID v4.
#[must_use]
pub fn buzz_channel_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The kind-9 chat event a publisher sends: unique content (`conn`/`seq`) plus `filler` bytes.
#[must_use]
pub fn chat_event(keys: &Keys, channel: &str, conn: usize, seq: u64, filler: usize) -> Event {
    let mut content = format!("load {conn} {seq} ");
    content.extend(std::iter::repeat_n('x', filler));
    keys.sign_new(CHAT_KIND, vec![vec!["h".into(), channel.into()]], &content)
}

/// A kind-9 chat event with `content` in `channel`.
#[must_use]
pub fn keys_event(keys: &Keys, channel: &str, content: &str) -> Event {
    keys.sign_new(CHAT_KIND, vec![vec!["h".into(), channel.into()]], content)
}

/// The NIP-42 AUTH event answering `challenge` on a connection whose Host is `host`.
#[must_use]
pub fn auth_event(keys: &Keys, host: &str, challenge: &str) -> Event {
    let tags = vec![vec!["relay".into(), format!("ws://{host}")], vec!["challenge".into(), challenge.into()]];
    keys.sign_new(AUTH_KIND, tags, "")
}

/// The buzz-relay kind-9007 event that creates a stream channel named `name` with `visibility`.
fn stream_channel_event(keys: &Keys, channel: &str, name: &str, visibility: &str) -> Event {
    let tags = vec![
        vec!["h".into(), channel.into()],
        vec!["name".into(), name.into()],
        vec!["visibility".into(), visibility.into()],
        vec!["channel_type".into(), "stream".into()],
    ];
    keys.sign_new(CREATE_CHANNEL_KIND, tags, "")
}

/// The buzz-relay kind-9007 event that creates an open stream channel.
#[must_use]
pub fn create_channel_event(keys: &Keys, channel: &str) -> Event {
    stream_channel_event(keys, channel, "load", "open")
}

/// The kind-9007 event that creates a members-only (private) stream channel.
#[must_use]
pub fn create_private_channel_event(keys: &Keys, channel: &str) -> Event {
    stream_channel_event(keys, channel, "load-private", "private")
}

/// The kind-9000 event that puts `pubkey` into `channel` as a member.
#[must_use]
pub fn put_user_event(keys: &Keys, channel: &str, pubkey: &str) -> Event {
    let tags = vec![vec!["h".into(), channel.into()], vec!["p".into(), pubkey.into(), "member".into()]];
    keys.sign_new(buzz_core::kinds::PUT_USER, tags, "")
}

/// `["EVENT", <event>]`.
#[must_use]
pub fn event_msg(ev: &Event) -> String {
    format!("[\"EVENT\",{}]", ev.to_json())
}

/// `["AUTH", <event>]`.
#[must_use]
pub fn auth_msg(ev: &Event) -> String {
    format!("[\"AUTH\",{}]", ev.to_json())
}

/// `["REQ", sub, {"kinds":[9],"#h":[channel],"since":since}]`.
#[must_use]
pub fn req_msg(sub: &str, channel: &str, since: i64) -> String {
    json!(["REQ", sub, {"kinds": [CHAT_KIND], "#h": [channel], "since": since}]).to_string()
}

/// `["REQ", sub, {"kinds":[9],"#h":[channel],"since":since,"limit":0}]`: live events only, of
/// `created_at` `since` or later (a write resent late keeps its older `created_at`).
#[must_use]
pub fn live_req_msg(sub: &str, channel: &str, since: i64) -> String {
    json!(["REQ", sub, {"kinds": [CHAT_KIND], "#h": [channel], "since": since, "limit": 0}]).to_string()
}

/// `["REQ", sub, {"kinds":[9],"since":since,"limit":0}]`: live chat of every channel the reader
/// may read (no `#h`).
#[must_use]
pub fn broad_live_req_msg(sub: &str, since: i64) -> String {
    json!(["REQ", sub, {"kinds": [CHAT_KIND], "since": since, "limit": 0}]).to_string()
}

/// `["REQ", sub, {"kinds":[9],"#h":[channel],"since":since,"until":until,"limit":limit}]`: one
/// page of a replay (a relay answers the newest `limit` of the window; page back with `until`).
#[must_use]
pub fn req_page_msg(sub: &str, channel: &str, since: i64, until: i64, limit: u32) -> String {
    json!(["REQ", sub, {"kinds": [CHAT_KIND], "#h": [channel], "since": since, "until": until, "limit": limit}])
        .to_string()
}

/// `["CLOSE", sub]`.
#[must_use]
pub fn close_msg(sub: &str) -> String {
    json!(["CLOSE", sub]).to_string()
}

/// One relay-to-client message, reduced to what the tool needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayMsg {
    /// `["EVENT", sub, event]`: only the event id and `created_at` are kept.
    Event {
        sub: String,
        id: String,
        created_at: i64,
    },
    Ok {
        id: String,
        accepted: bool,
        message: String,
    },
    Eose(String),
    Closed {
        sub: String,
        message: String,
    },
    Notice(String),
    Auth(String),
    /// Anything else (COUNT, unknown types, malformed frames), as received.
    Other(String),
}

fn str_at(v: &[Value], i: usize) -> Option<String> {
    v.get(i).and_then(Value::as_str).map(str::to_string)
}

impl RelayMsg {
    /// Parses one text frame; never fails (unknown shapes become `Other`).
    #[must_use]
    pub fn parse(text: &str) -> Self {
        // Fast path for the hot message: skip the event body without building a JSON tree.
        if text.starts_with("[\"EVENT\"") {
            #[derive(serde::Deserialize)]
            struct IdOnly {
                id: String,
                #[serde(default)]
                created_at: i64,
            }
            if let Ok((_, sub, ev)) = serde_json::from_str::<(&str, String, IdOnly)>(text) {
                return Self::Event { sub, id: ev.id, created_at: ev.created_at };
            }
        }
        let parsed = (|| {
            let Value::Array(v) = serde_json::from_str::<Value>(text).ok()? else { return None };
            let kind = v.first()?.as_str()?;
            Some(match kind {
                "EVENT" => Self::Event {
                    sub: str_at(&v, 1)?,
                    id: v.get(2)?.get("id")?.as_str()?.to_string(),
                    created_at: v.get(2)?.get("created_at").and_then(Value::as_i64).unwrap_or(0),
                },
                "OK" => Self::Ok {
                    id: str_at(&v, 1)?,
                    accepted: v.get(2)?.as_bool()?,
                    message: str_at(&v, 3).unwrap_or_default(),
                },
                "EOSE" => Self::Eose(str_at(&v, 1)?),
                "CLOSED" => Self::Closed { sub: str_at(&v, 1)?, message: str_at(&v, 2).unwrap_or_default() },
                "NOTICE" => Self::Notice(str_at(&v, 1).unwrap_or_default()),
                "AUTH" => Self::Auth(str_at(&v, 1)?),
                _ => return None,
            })
        })();
        parsed.unwrap_or_else(|| Self::Other(text.chars().take(200).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids() {
        let p = plain_channel_id();
        assert!(buzz_core::EventId::parse(&p).is_ok(), "64 lowercase hex");
        assert_ne!(p, plain_channel_id());
        assert!(uuid::Uuid::parse_str(&buzz_channel_id()).is_ok());
    }

    #[test]
    fn req_shape() {
        let live: Value = serde_json::from_str(&live_req_msg("s", "abc", 42)).expect("json");
        assert_eq!((live[2]["since"].as_i64(), live[2]["limit"].as_i64()), (Some(42), Some(0)));
        let v: Value = serde_json::from_str(&req_msg("s", "abc", 42)).expect("json");
        assert_eq!(v, json!(["REQ", "s", {"kinds": [9], "#h": ["abc"], "since": 42}]));
    }

    #[test]
    fn parses_relay_messages() {
        let id = "a".repeat(64);
        assert_eq!(
            RelayMsg::parse(&format!(r#"["OK","{id}",false,"blocked: no"]"#)),
            RelayMsg::Ok { id: id.clone(), accepted: false, message: "blocked: no".into() }
        );
        assert_eq!(
            RelayMsg::parse(&format!(r#"["EVENT","s",{{"id":"{id}","kind":9,"created_at":7}}]"#)),
            RelayMsg::Event { sub: "s".into(), id: id.clone(), created_at: 7 }
        );
        assert_eq!(
            RelayMsg::parse(&format!(r#"["EVENT","s",{{"kind":9,"id":"{id}","created_at":8,"x":[1]}}]"#)),
            RelayMsg::Event { sub: "s".into(), id, created_at: 8 }
        );
        assert_eq!(RelayMsg::parse(r#"["EOSE","s"]"#), RelayMsg::Eose("s".into()));
        assert_eq!(RelayMsg::parse(r#"["AUTH","chal"]"#), RelayMsg::Auth("chal".into()));
        assert_eq!(RelayMsg::parse(r#"["NOTICE","hi"]"#), RelayMsg::Notice("hi".into()));
        assert_eq!(
            RelayMsg::parse(r#"["CLOSED","s","auth-required: x"]"#),
            RelayMsg::Closed { sub: "s".into(), message: "auth-required: x".into() }
        );
        assert!(matches!(RelayMsg::parse("nope"), RelayMsg::Other(_)));
        assert!(matches!(RelayMsg::parse(r#"["OK","x"]"#), RelayMsg::Other(_)));
    }

    // The tests below sign with buzz_core::Keys and check with buzz_core's own NIP-42 validator.

    #[test]
    fn auth_event_passes_core_checks() {
        let keys = Keys::generate();
        let ev = auth_event(&keys, "localhost:7777", "chal-1");
        assert_eq!(ev.kind, AUTH_KIND);
        assert_eq!(ev.tag_value("relay"), Some("ws://localhost:7777"));
        assert_eq!(ev.tag_value("challenge"), Some("chal-1"));
        ev.verify().expect("signature");
        let now = buzz_core::unix_now();
        buzz_core::nip42::validate_auth_event(&ev, "chal-1", "localhost:7777", now).expect("valid");
        assert!(buzz_core::nip42::validate_auth_event(&ev, "other", "localhost:7777", now).is_err());
        let msg: Value = serde_json::from_str(&auth_msg(&ev)).expect("json");
        assert_eq!(msg[0], "AUTH");
        assert_eq!(msg[1]["id"], ev.id.as_str());
    }

    #[test]
    fn chat_and_channel_events() {
        let keys = Keys::generate();
        let a = chat_event(&keys, "chan", 1, 7, 5);
        let b = chat_event(&keys, "chan", 1, 8, 5);
        assert_ne!(a.id, b.id);
        assert_eq!(a.kind, CHAT_KIND);
        assert_eq!(a.tag_value("h"), Some("chan"));
        assert_eq!(a.content, "load 1 7 xxxxx");
        a.verify().expect("signature");
        let msg: Value = serde_json::from_str(&event_msg(&a)).expect("json");
        assert_eq!(msg[0], "EVENT");
        assert_eq!(msg[1]["id"], a.id.as_str());
        let c = create_channel_event(&keys, "ch-1");
        assert_eq!(c.kind, CREATE_CHANNEL_KIND);
        assert_eq!(c.tag_value("visibility"), Some("open"));
        assert_eq!(c.tag_value("channel_type"), Some("stream"));
    }
}
