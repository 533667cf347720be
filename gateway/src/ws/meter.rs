//! The socket metrics a team alerts on: client messages in and relay messages out by type, OK
//! answers by their NIP-01 prefix, and open subscriptions. Label values are closed sets.

use buzz_core::{ClientMessage, ParseError, RelayMessage};

/// The OK outcomes counted in `buzz_gateway_ok_total`; any other prefix is `other`.
const OK_PREFIXES: [&str; 9] = [
    "duplicate",
    "invalid",
    "blocked",
    "restricted",
    "auth-required",
    "rate-limited",
    "error",
    "conflict",
    "unsupported",
];

/// The `outcome` label of an OK: `accepted`, or the reason's NIP-01 prefix (`duplicate` is an
/// accepted OK whose reason says so).
#[must_use]
pub fn ok_outcome(accepted: bool, message: &str) -> &'static str {
    let prefix = message.split_once(':').map_or("", |(p, _)| p);
    match OK_PREFIXES.iter().find(|known| **known == prefix) {
        Some(&"duplicate") => "duplicate",
        _ if accepted => "accepted",
        Some(known) => known,
        None => "other",
    }
}

/// The `type` label of a client message (`invalid` when it did not parse).
#[must_use]
pub fn client_type(parsed: &Result<ClientMessage, ParseError>) -> &'static str {
    match parsed {
        Ok(ClientMessage::Event(_)) => "EVENT",
        Ok(ClientMessage::Req { .. }) => "REQ",
        Ok(ClientMessage::Count { .. }) => "COUNT",
        Ok(ClientMessage::Close(_)) => "CLOSE",
        Ok(ClientMessage::Auth(_)) => "AUTH",
        Err(_) => "invalid",
    }
}

/// The `type` label of a relay message.
#[must_use]
pub fn relay_type(msg: &RelayMessage) -> &'static str {
    match msg {
        RelayMessage::Event { .. } => "EVENT",
        RelayMessage::Ok { .. } => "OK",
        RelayMessage::Eose(_) => "EOSE",
        RelayMessage::Closed { .. } => "CLOSED",
        RelayMessage::Notice(_) => "NOTICE",
        RelayMessage::Auth(_) => "AUTH",
        RelayMessage::Count { .. } => "COUNT",
    }
}

/// Counts one text frame from a client.
pub fn message_in(parsed: &Result<ClientMessage, ParseError>) {
    metrics::counter!("buzz_gateway_messages_in_total", "type" => client_type(parsed)).increment(1);
}

/// Counts one message queued for a client (an OK also by outcome).
pub fn message_out(msg: &RelayMessage) {
    metrics::counter!("buzz_gateway_messages_out_total", "type" => relay_type(msg)).increment(1);
    if let RelayMessage::Ok { accepted, message, .. } = msg {
        metrics::counter!("buzz_gateway_ok_total", "outcome" => ok_outcome(*accepted, message)).increment(1);
    }
}

/// Counts one live event queued for a subscription (live events skip `RelayMessage`).
pub fn live_event_out() {
    metrics::counter!("buzz_gateway_messages_out_total", "type" => "EVENT").increment(1);
}

/// Held by every open subscription: `buzz_gateway_subscriptions` is the number alive, however a
/// subscription ends (CLOSE, replacement, error, socket gone).
pub struct SubscriptionGauge(());

impl SubscriptionGauge {
    #[must_use]
    pub fn open() -> Self {
        metrics::gauge!("buzz_gateway_subscriptions").increment(1);
        Self(())
    }
}

impl Drop for SubscriptionGauge {
    fn drop(&mut self) {
        metrics::gauge!("buzz_gateway_subscriptions").decrement(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_outcomes_are_the_nip01_prefixes() {
        assert_eq!(ok_outcome(true, ""), "accepted");
        assert_eq!(ok_outcome(true, "duplicate: already have this event"), "duplicate");
        assert_eq!(ok_outcome(false, "invalid: bad signature"), "invalid");
        assert_eq!(ok_outcome(false, "auth-required: authenticate to publish"), "auth-required");
        assert_eq!(ok_outcome(false, "rate-limited: slow down"), "rate-limited");
        assert_eq!(ok_outcome(false, "conflict: prev is not the current revision"), "conflict");
        assert_eq!(ok_outcome(false, "error: the service did not answer in time"), "error");
        // Free text never becomes a label value.
        assert_eq!(ok_outcome(false, "whatever the reason: x"), "other");
        assert_eq!(ok_outcome(true, "note: kept"), "accepted");
    }

    #[test]
    fn client_messages_are_labelled_by_type() {
        let limits = buzz_core::Limits::default();
        assert_eq!(client_type(&ClientMessage::parse(r#"["CLOSE","s"]"#, &limits)), "CLOSE");
        assert_eq!(client_type(&ClientMessage::parse(r#"["REQ","s",{}]"#, &limits)), "REQ");
        assert_eq!(client_type(&ClientMessage::parse("nonsense", &limits)), "invalid");
    }
}
