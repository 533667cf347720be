//! One WebSocket text frame through `ClientMessage::parse` (EVENT, REQ, COUNT, CLOSE, AUTH).
//! Asserts: no panic; an accepted message serialised back parses to the same message; every
//! refusal carries a NIP-01 prefix and serialises into a valid relay message.
#![no_main]

use buzz_core::message::malformed;
use buzz_core::{ClientMessage, Limits, ParseError, RelayMessage};
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fn prefixed(text: &str) -> bool {
    text.starts_with("invalid: ") || text.starts_with("unsupported: ")
}

fn reserialise(msg: &ClientMessage) -> String {
    let filters = |kind: &str, sub_id: &str, filters: &[buzz_core::Filter]| {
        let mut parts = vec![json!(kind), json!(sub_id)];
        parts.extend(filters.iter().map(buzz_core::Filter::to_value));
        Value::Array(parts).to_string()
    };
    match msg {
        ClientMessage::Event(e) => format!("[\"EVENT\",{}]", e.to_json()),
        ClientMessage::Auth(e) => format!("[\"AUTH\",{}]", e.to_json()),
        ClientMessage::Req { sub_id, filters: f } => filters("REQ", sub_id, f),
        ClientMessage::Count { sub_id, filters: f } => filters("COUNT", sub_id, f),
        ClientMessage::Close(sub_id) => json!(["CLOSE", sub_id]).to_string(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let limits = Limits::default();
    match ClientMessage::parse(text, &limits) {
        Ok(msg) => {
            let again = reserialise(&msg);
            assert_eq!(ClientMessage::parse(&again, &limits), Ok(msg), "round trip of {again}");
        }
        Err(ParseError::Notice(text)) => {
            assert!(prefixed(&text), "notice without prefix: {text:?}");
            let json = RelayMessage::Notice(text).to_json();
            assert!(serde_json::from_str::<Value>(&json).is_ok());
        }
        Err(ParseError::Ok { id, reason }) => {
            assert!(reason.starts_with("invalid: "), "OK false without invalid: prefix: {reason:?}");
            let json = RelayMessage::Ok { id, accepted: false, message: reason }.to_json();
            assert!(serde_json::from_str::<Value>(&json).is_ok());
        }
        Err(ParseError::Closed { sub_id, reason }) => {
            assert!(prefixed(&reason), "CLOSED without prefix: {reason:?}");
            assert!(!sub_id.is_empty() && sub_id.chars().count() <= limits.max_subid_length);
            let json = RelayMessage::Closed { sub_id, message: reason }.to_json();
            assert!(serde_json::from_str::<Value>(&json).is_ok());
        }
    }
    // The explanation of an event that did not deserialise, called on any text.
    let explained = malformed::explain(text, Some(limits.created_at_upper_limit));
    assert!(explained.reason.starts_with("invalid: "), "explain without prefix: {:?}", explained.reason);
});
