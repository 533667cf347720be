//! NIP-01 client and relay messages.

use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::clock::unix_now;
use crate::event::Event;
use crate::filter::Filter;
use crate::hex::is_lower_hex;
use crate::ids::{EventId, Pubkey};
use crate::limits::Limits;

/// A message from a client, parsed and checked against the limits.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessage {
    /// `["EVENT", event]`; only shape and limits are checked here, not id/signature.
    Event(Box<Event>),
    /// `["REQ", sub_id, filter...]` (at least one filter).
    Req {
        /// The client's name for the subscription.
        sub_id: String,
        /// Events matching any filter are returned.
        filters: Vec<Filter>,
    },
    /// `["COUNT", sub_id, filter...]`.
    Count {
        /// The client's name for the request.
        sub_id: String,
        /// Events matching any filter are counted.
        filters: Vec<Filter>,
    },
    /// `["CLOSE", sub_id]`.
    Close(String),
    /// `["AUTH", event]`.
    Auth(Box<Event>),
}

/// What went wrong and how the relay must answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Answer with `["NOTICE", text]` (no id or sub id could be recovered).
    Notice(String),
    /// Answer with `["OK", id, false, reason]` (an EVENT or AUTH whose id could be recovered).
    Ok {
        /// The event's id.
        id: EventId,
        /// The prefixed reason (`invalid: ...`).
        reason: String,
    },
    /// Answer with `["CLOSED", sub_id, reason]` (a REQ/COUNT whose sub id could be recovered).
    Closed {
        /// The subscription id.
        sub_id: String,
        /// The prefixed reason.
        reason: String,
    },
}

impl ClientMessage {
    /// Parses one text frame. The caller has already checked `text.len() <= limits.max_message_length`.
    /// Checks, with NIP-01 prefixes in every reason:
    /// - not JSON / not an array / first element not a string / unknown type → Notice
    ///   (`"invalid: ..."` / `"unsupported: unknown message type X"`)
    /// - wrong arity → Notice, or Closed when a sub id is readable
    /// - EVENT/AUTH: not an event object, a missing, repeated or unknown field, a field of the
    ///   wrong shape → Ok when `id` is a string of 64 lowercase hex, else Notice, with the plain
    ///   wording of `malformed::explain` (the field and what it must be); more than
    ///   `max_event_tags` tags, content over `max_content_length`, a tag element over
    ///   `max_tag_value_length`, an empty tag, a NUL character in content or tags, and (EVENT
    ///   only) a `created_at` that is negative or more than `created_at_upper_limit` seconds
    ///   ahead → Ok(invalid: ...)
    /// - REQ/COUNT: sub id empty or over `max_subid_length` → Notice; more than `max_filters`
    ///   filters → Closed(`invalid: too many filters`); each filter through `Filter::from_value` and
    ///   `Filter::validate` → Closed with that error's text.
    pub fn parse(text: &str, limits: &Limits) -> Result<Self, ParseError> {
        let parts: Vec<&RawValue> = match serde_json::from_str(text) {
            Ok(parts) => parts,
            Err(_) if serde_json::from_str::<IgnoredAny>(text).is_ok() => {
                return Err(notice("invalid: message must be a JSON array"));
            }
            Err(_) => return Err(notice("invalid: message is not valid JSON")),
        };
        let Some(first) = parts.first() else {
            return Err(notice("invalid: empty message"));
        };
        let Ok(kind) = serde_json::from_str::<String>(first.get()) else {
            return Err(notice("invalid: message type must be a string"));
        };
        match kind.as_str() {
            "EVENT" => parse_event_message(&parts, "EVENT", limits).map(ClientMessage::Event),
            "AUTH" => parse_event_message(&parts, "AUTH", limits).map(ClientMessage::Auth),
            "REQ" => parse_req(&parts, "REQ", limits)
                .map(|(sub_id, filters)| ClientMessage::Req { sub_id, filters }),
            "COUNT" => parse_req(&parts, "COUNT", limits)
                .map(|(sub_id, filters)| ClientMessage::Count { sub_id, filters }),
            "CLOSE" => {
                if parts.len() != 2 {
                    return Err(notice("invalid: CLOSE needs exactly one subscription id"));
                }
                sub_id(parts[1], limits).map(ClientMessage::Close)
            }
            other => Err(notice(&format!("unsupported: unknown message type {}", shorten(other, 32)))),
        }
    }
}

/// A message to a client, serialised by [`RelayMessage::to_json`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayMessage {
    /// `["EVENT", sub_id, <event_json>]`; `event_json` is already-serialised event JSON, inserted verbatim.
    Event {
        /// The subscription the event answers.
        sub_id: String,
        /// The event, serialised.
        event_json: String,
    },
    /// `["OK", id, accepted, message]`: the outcome of an EVENT or AUTH.
    Ok {
        /// The event's id.
        id: EventId,
        /// Whether the event was stored (or the AUTH accepted).
        accepted: bool,
        /// Empty, or a prefixed reason (`duplicate:`, `invalid:`, ...).
        message: String,
    },
    /// `["EOSE", sub_id]`: stored events end, live ones follow.
    Eose(String),
    /// `["CLOSED", sub_id, message]`: the relay ended a subscription.
    Closed {
        /// The subscription id.
        sub_id: String,
        /// The prefixed reason.
        message: String,
    },
    /// `["NOTICE", text]`.
    Notice(String),
    /// `["AUTH", challenge]` (NIP-42).
    Auth(String),
    /// `["COUNT", sub_id, {"count": n}]`.
    Count {
        /// The request's id.
        sub_id: String,
        /// Matching events.
        count: u64,
    },
}

impl RelayMessage {
    /// The message as the JSON array sent on the socket.
    #[must_use]
    pub fn to_json(&self) -> String {
        match self {
            RelayMessage::Event { sub_id, event_json } => {
                format!("[\"EVENT\",{},{event_json}]", json_str(sub_id))
            }
            RelayMessage::Ok { id, accepted, message } => {
                format!("[\"OK\",{},{accepted},{}]", json_str(id.as_str()), json_str(message))
            }
            RelayMessage::Eose(sub_id) => format!("[\"EOSE\",{}]", json_str(sub_id)),
            RelayMessage::Closed { sub_id, message } => {
                format!("[\"CLOSED\",{},{}]", json_str(sub_id), json_str(message))
            }
            RelayMessage::Notice(message) => format!("[\"NOTICE\",{}]", json_str(message)),
            RelayMessage::Auth(challenge) => format!("[\"AUTH\",{}]", json_str(challenge)),
            RelayMessage::Count { sub_id, count } => {
                format!("[\"COUNT\",{},{{\"count\":{count}}}]", json_str(sub_id))
            }
        }
    }
}

fn notice(text: &str) -> ParseError {
    ParseError::Notice(text.to_owned())
}

/// A JSON string literal for `s` (serde_json escaping).
fn json_str(s: &str) -> String {
    // Serialising a string cannot fail.
    serde_json::to_string(s).unwrap_or_default()
}

/// At most `max` characters of `s`, for echoing client input back in a reason.
fn shorten(s: &str, max: usize) -> &str {
    s.char_indices().nth(max).map_or(s, |(i, _)| &s[..i])
}

fn sub_id(raw: &RawValue, limits: &Limits) -> Result<String, ParseError> {
    let Ok(id) = serde_json::from_str::<String>(raw.get()) else {
        return Err(notice("invalid: subscription id must be a string"));
    };
    if id.is_empty() || id.chars().count() > limits.max_subid_length {
        return Err(notice(&format!(
            "invalid: subscription id must be 1 to {} characters",
            limits.max_subid_length
        )));
    }
    Ok(id)
}

fn parse_req(parts: &[&RawValue], kind: &str, limits: &Limits) -> Result<(String, Vec<Filter>), ParseError> {
    let Some(raw_id) = parts.get(1) else {
        return Err(notice(&format!("invalid: {kind} needs a subscription id")));
    };
    let sub_id = sub_id(raw_id, limits)?;
    let raw_filters = &parts[2..];
    let closed = |reason: String| ParseError::Closed { sub_id: sub_id.clone(), reason };
    if raw_filters.is_empty() {
        return Err(closed(format!("invalid: {kind} needs at least one filter")));
    }
    if raw_filters.len() > limits.max_filters {
        return Err(closed("invalid: too many filters".into()));
    }
    let mut filters = Vec::with_capacity(raw_filters.len());
    for raw in raw_filters {
        let value: serde_json::Value = serde_json::from_str(raw.get())
            .map_err(|_| closed("invalid: filter is not valid JSON".into()))?;
        let filter = Filter::from_value(&value).map_err(|e| closed(e.to_string()))?;
        filter.validate(limits).map_err(|e| closed(e.to_string()))?;
        filters.push(filter);
    }
    Ok((sub_id, filters))
}

fn parse_event_message(parts: &[&RawValue], kind: &str, limits: &Limits) -> Result<Box<Event>, ParseError> {
    if parts.len() != 2 {
        return Err(notice(&format!("invalid: {kind} needs exactly one event")));
    }
    let raw = parts[1].get();
    let wire: WireEvent = match serde_json::from_str(raw) {
        Ok(event) => event,
        Err(_) => return Err(malformed_event(raw, kind, limits)),
    };
    let Ok(id) = EventId::try_from(wire.id) else {
        return Err(notice("invalid: event id must be 64 lowercase hex"));
    };
    let Ok(pubkey) = Pubkey::try_from(wire.pubkey) else {
        return Err(ParseError::Ok { id, reason: format!("invalid: {}", crate::refusal::BAD_PUBKEY) });
    };
    let event = Event {
        id,
        pubkey,
        created_at: wire.created_at,
        kind: wire.kind,
        tags: wire.tags,
        content: wire.content,
        sig: wire.sig,
    };
    let reject = |reason: String| ParseError::Ok { id: event.id.clone(), reason };
    if !is_lower_hex(&event.sig, 128) {
        return Err(reject("invalid: sig must be 128 lowercase hex".into()));
    }
    if event.tags.len() > limits.max_event_tags {
        return Err(reject(format!("invalid: too many tags (max {})", limits.max_event_tags)));
    }
    if event.content.len() > limits.max_content_length {
        return Err(reject(format!("invalid: content longer than {} bytes", limits.max_content_length)));
    }
    if event.tags.iter().any(Vec::is_empty) {
        return Err(reject("invalid: empty tag".into()));
    }
    if event.tags.iter().flatten().any(|el| el.len() > limits.max_tag_value_length) {
        return Err(reject(format!(
            "invalid: tag element longer than {} bytes",
            limits.max_tag_value_length
        )));
    }
    if let Some(part) = event.nul_part() {
        return Err(reject(format!("invalid: {part} must not contain NUL (U+0000)")));
    }
    // AUTH events have their own, narrower window (NIP-42).
    if kind == "EVENT" {
        crate::event::check_created_at(event.created_at, unix_now(), limits.created_at_upper_limit)
            .map_err(|why| reject(format!("invalid: {why}")))?;
    }
    Ok(Box::new(event))
}

/// An event as the client sent it, before its id and pubkey are checked: the checks answer in a
/// fixed order (a bad id is a NOTICE, a bad pubkey an `OK false` for the id), which deserialising
/// into [`Event`] directly would not keep.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WireEvent {
    id: String,
    pubkey: String,
    created_at: i64,
    kind: u32,
    tags: Vec<Vec<String>>,
    content: String,
    sig: String,
}

/// The answer to an event that did not deserialise (`malformed::explain`): `OK false` when a
/// well-formed id can be read, else a NOTICE.
fn malformed_event(raw: &str, kind: &str, limits: &Limits) -> ParseError {
    let upper_limit = (kind == "EVENT").then_some(limits.created_at_upper_limit);
    let malformed::Malformed { id, reason } = malformed::explain(raw, upper_limit);
    match id {
        Some(id) => ParseError::Ok { id, reason },
        None => ParseError::Notice(reason),
    }
}

pub mod malformed;
#[cfg(test)]
mod malformed_tests;
#[cfg(test)]
mod reply_tests;
#[cfg(test)]
mod tests;
