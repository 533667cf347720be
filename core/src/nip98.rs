//! NIP-98 HTTP auth (kind 27235): header decoding and request binding checks.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::event::{Event, EventError};

/// The kind of a NIP-98 HTTP authorization event.
pub const HTTP_AUTH_KIND: u32 = crate::kinds::HTTP_AUTH;

/// Why a NIP-98 `Authorization` header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Nip98Error {
    /// No `Authorization: Nostr ...` header.
    #[error("missing authorization")]
    Missing,
    /// Not base64 of an event, with the detail.
    #[error("malformed authorization: {0}")]
    Malformed(String),
    /// The id or signature does not verify.
    #[error("invalid signature")]
    BadSignature,
    /// Not kind 27235.
    #[error("wrong kind")]
    WrongKind,
    /// The `u` tag names another URL.
    #[error("url mismatch")]
    UrlMismatch,
    /// The `method` tag names another method.
    #[error("method mismatch")]
    MethodMismatch,
    /// The `payload` tag is not the sha256 of the body.
    #[error("payload mismatch")]
    PayloadMismatch,
    /// `created_at` is outside the accepted window.
    #[error("expired or future timestamp")]
    Stale,
}

/// Builds an `Authorization` header value (`Nostr <base64>`) for a request: kind 27235 with `u`,
/// `method`, for a non-empty body `payload` = sha256 hex of the body, and a random `nonce`.
/// For clients and tests.
#[must_use]
pub fn authorization_header(keys: &crate::keys::Keys, method: &str, url: &str, body: &[u8]) -> String {
    use sha2::Digest as _;
    let payload = (!body.is_empty()).then(|| hex::encode(sha2::Sha256::digest(body)));
    authorization_header_for(keys, method, url, payload.as_deref())
}

/// [`authorization_header`] for a body hashed beforehand (a file streamed as the body):
/// `payload` is the sha256 hex of the body, or `None` for an empty body.
#[must_use]
pub fn authorization_header_for(
    keys: &crate::keys::Keys,
    method: &str,
    url: &str,
    payload: Option<&str>,
) -> String {
    use base64::Engine as _;
    let mut tags = vec![vec!["u".to_owned(), url.to_owned()], vec!["method".to_owned(), method.to_owned()]];
    if let Some(payload) = payload {
        tags.push(vec!["payload".to_owned(), payload.to_owned()]);
    }
    // Every attempt gets a fresh signature: two identical requests in the same second would
    // otherwise share an event id and the second would be refused as a replay.
    tags.push(vec!["nonce".to_owned(), hex::encode(rand::random::<[u8; 16]>())]);
    let event = keys.sign_new(HTTP_AUTH_KIND, tags, "");
    format!("Nostr {}", base64::engine::general_purpose::STANDARD.encode(event.to_json()))
}

/// Decodes `Nostr <base64 of event JSON>` into an event and verifies its id and signature.
/// The scheme word is matched case-insensitively and must be followed by one space; the base64 is the
/// standard alphabet, with or without padding.
pub fn decode_header(value: &str) -> Result<Event, Nip98Error> {
    let value = value.trim();
    if value.is_empty() {
        return Err(Nip98Error::Missing);
    }
    let (scheme, encoded) = value.split_once(' ').ok_or_else(|| malformed("expected \"Nostr <base64>\""))?;
    if !scheme.eq_ignore_ascii_case("nostr") {
        return Err(malformed("scheme is not Nostr"));
    }
    if encoded.len() > MAX_ENCODED_LEN {
        return Err(malformed("header too long"));
    }
    let json = BASE64.decode(encoded).map_err(|_| malformed("not standard base64"))?;
    let event: Event = serde_json::from_slice(&json).map_err(|_| malformed("not a valid event"))?;
    match event.verify() {
        Ok(()) => Ok(event),
        Err(EventError::Malformed(why)) => Err(Nip98Error::Malformed(why)),
        Err(EventError::IdMismatch | EventError::BadSignature) => Err(Nip98Error::BadSignature),
    }
}

/// Checks kind 27235, `u` tag == `expected_url` exactly (the caller builds it as
/// `<scheme>://<host><path>[?<query>]`; the caller decides which schemes it accepts by calling this
/// once per candidate), `method` tag == `method` (case-insensitive), `created_at` within `window_secs`
/// of `now`, and when `body` is non-empty a `payload` tag equal to lowercase sha256 hex of the body
/// (when body is empty a present `payload` must equal sha256 of empty).
/// Checks run in that order; the first failure is returned. A negative `window_secs` counts as 0.
pub fn validate(
    event: &Event,
    method: &str,
    expected_url: &str,
    body: &[u8],
    now: i64,
    window_secs: i64,
) -> Result<(), Nip98Error> {
    if event.kind != HTTP_AUTH_KIND {
        return Err(Nip98Error::WrongKind);
    }
    if event.tag_value("u") != Some(expected_url) {
        return Err(Nip98Error::UrlMismatch);
    }
    if !event.tag_value("method").is_some_and(|m| m.eq_ignore_ascii_case(method)) {
        return Err(Nip98Error::MethodMismatch);
    }
    if now.abs_diff(event.created_at) > window_secs.max(0).unsigned_abs() {
        return Err(Nip98Error::Stale);
    }
    match event.tag_value("payload") {
        None if body.is_empty() => {}
        Some(payload) if payload == hex::encode(Sha256::digest(body)) => {}
        _ => return Err(Nip98Error::PayloadMismatch),
    }
    Ok(())
}

/// Standard alphabet; padding optional when decoding.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Longest base64 text accepted (a NIP-98 event is a few hundred bytes).
const MAX_ENCODED_LEN: usize = 65_536;

fn malformed(why: &str) -> Nip98Error {
    Nip98Error::Malformed(why.to_owned())
}

#[cfg(test)]
mod tests;
