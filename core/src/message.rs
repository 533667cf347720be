//! NIP-01 client and relay messages.

use crate::event::Event;
use crate::filter::Filter;
use crate::limits::Limits;

#[derive(Debug, Clone, PartialEq)]
pub enum ClientMessage {
    /// `["EVENT", event]`; only shape and limits are checked here, not id/signature.
    Event(Box<Event>),
    /// `["REQ", sub_id, filter...]` (at least one filter).
    Req { sub_id: String, filters: Vec<Filter> },
    /// `["COUNT", sub_id, filter...]`.
    Count { sub_id: String, filters: Vec<Filter> },
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
    Ok { id: String, reason: String },
    /// Answer with `["CLOSED", sub_id, reason]` (a REQ/COUNT whose sub id could be recovered).
    Closed { sub_id: String, reason: String },
}

impl ClientMessage {
    /// Parses one text frame. The caller has already checked `text.len() <= limits.max_message_length`.
    /// Checks, with NIP-01 prefixes in every reason:
    /// - not JSON / not an array / first element not a string / unknown type → Notice
    ///   (`"invalid: ..."` / `"unsupported: unknown message type X"`)
    /// - wrong arity → Notice, or Closed when a sub id is readable
    /// - EVENT/AUTH: not an event object, bad field types, unknown fields → Ok when `id` is a string
    ///   of 64 lowercase hex, else Notice; more than `max_event_tags` tags, content over
    ///   `max_content_length`, a tag element over `max_tag_value_length`, an empty tag → Ok(invalid: ...)
    /// - REQ/COUNT: sub id empty or over `max_subid_length` → Notice; more than `max_filters`
    ///   filters → Closed(`invalid: too many filters`); each filter through `Filter::from_value` and
    ///   `Filter::validate` → Closed with that error's text.
    pub fn parse(text: &str, limits: &Limits) -> Result<Self, ParseError> { todo!() }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayMessage {
    /// `["EVENT", sub_id, <event_json>]`; `event_json` is already-serialised event JSON, inserted verbatim.
    Event { sub_id: String, event_json: String },
    Ok { id: String, accepted: bool, message: String },
    Eose(String),
    Closed { sub_id: String, message: String },
    Notice(String),
    Auth(String),
    Count { sub_id: String, count: u64 },
}

impl RelayMessage {
    #[must_use]
    pub fn to_json(&self) -> String { todo!() }
}
