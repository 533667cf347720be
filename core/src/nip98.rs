//! NIP-98 HTTP auth (kind 27235): header decoding and request binding checks.

use crate::event::Event;

pub const HTTP_AUTH_KIND: u32 = 27235;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Nip98Error {
    #[error("missing authorization")]
    Missing,
    #[error("malformed authorization: {0}")]
    Malformed(String),
    #[error("invalid signature")]
    BadSignature,
    #[error("wrong kind")]
    WrongKind,
    #[error("url mismatch")]
    UrlMismatch,
    #[error("method mismatch")]
    MethodMismatch,
    #[error("payload mismatch")]
    PayloadMismatch,
    #[error("expired or future timestamp")]
    Stale,
}

/// Decodes `Nostr <base64 of event JSON>` into an event and verifies its id and signature.
pub fn decode_header(value: &str) -> Result<Event, Nip98Error> { todo!() }

/// Checks kind 27235, `u` tag == `expected_url` exactly (the caller builds it as
/// `<scheme>://<host><path>[?<query>]`; the caller decides which schemes it accepts by calling this
/// once per candidate), `method` tag == `method` (case-insensitive), `created_at` within `window_secs`
/// of `now`, and when `body` is non-empty a `payload` tag equal to lowercase sha256 hex of the body
/// (when body is empty a present `payload` must equal sha256 of empty).
pub fn validate(event: &Event, method: &str, expected_url: &str, body: &[u8], now: i64, window_secs: i64) -> Result<(), Nip98Error> { todo!() }
