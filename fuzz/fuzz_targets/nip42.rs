//! NIP-42 AUTH events through `nip42::validate_auth_event`.
//! First byte 0: the rest is `event JSON\nchallenge\nhost`, checked as is. Otherwise the rest is
//! `challenge\nhost\nrelay`: an AUTH event with those tags is checked against the host, and the
//! same event naming `wss://<normalised host>` (with and without `/`) must pass.
//! Asserts: no panic; an event naming the relay's own URL with the right challenge passes.
#![no_main]

use buzz_core::host::normalize_host;
use buzz_core::nip42::{validate_auth_event, AUTH_KIND};
use buzz_core::{Event, EventId, Pubkey};
use buzz_fuzz::{split, NOW};
use libfuzzer_sys::fuzz_target;

fn auth_event(relay: &str, challenge: &str, created_at: i64) -> Event {
    Event {
        id: EventId::from_bytes(&[1; 32]),
        pubkey: Pubkey::from_bytes(&[2; 32]),
        created_at,
        kind: AUTH_KIND,
        tags: vec![vec!["relay".into(), relay.into()], vec!["challenge".into(), challenge.into()]],
        content: String::new(),
        sig: "0".repeat(128),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if mode == 0 {
        let (json, rest) = split(text, "\n");
        let (challenge, host) = split(rest, "\n");
        if let Ok(event) = serde_json::from_str::<Event>(json) {
            let _ = validate_auth_event(&event, challenge, host, NOW);
            let _ = validate_auth_event(&event, challenge, host, event.created_at);
        }
        return;
    }
    let (challenge, rest) = split(text, "\n");
    let (host, relay) = split(rest, "\n");
    let event = auth_event(relay, challenge, NOW);
    if validate_auth_event(&event, challenge, host, NOW).is_ok() {
        let ours = normalize_host(host).unwrap_or_else(|| host.to_owned());
        let authority = relay.split_once("://").map(|(_, r)| r.trim_end_matches('/')).unwrap_or_default();
        assert_eq!(normalize_host(authority), Some(ours), "{relay:?} accepted for {host:?}");
    }
    let Some(host) = normalize_host(host) else { return };
    for relay in [format!("wss://{host}"), format!("wss://{host}/"), format!("WS://{host}")] {
        let event = auth_event(&relay, challenge, NOW - 600);
        assert_eq!(validate_auth_event(&event, challenge, &host, NOW), Ok(()), "{relay}");
    }
    let stale = auth_event(&format!("wss://{host}"), challenge, NOW - 601);
    assert!(validate_auth_event(&stale, challenge, &host, NOW).is_err());
    let wrong = auth_event(&format!("wss://{host}"), &format!("{challenge}x"), NOW);
    assert!(validate_auth_event(&wrong, challenge, &host, NOW).is_err());
});
