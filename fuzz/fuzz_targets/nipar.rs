//! A NIP-AR revision's envelope through `nipar::parse` and the NIP-OA `auth` tag checks. The input
//! is a whole event, or just its tags (`[[name, value], ...]`: kind 45010, empty content).
//! Asserts: no panic; an accepted envelope says what its tags say; `prev` is absent exactly on
//! create and `title` exactly on delete.
#![no_main]

use buzz_core::nipar::{self, Op};
use buzz_core::{nipoa, Event, EventId, Pubkey};
use libfuzzer_sys::fuzz_target;

fn event(data: &[u8]) -> Option<Event> {
    if let Ok(e) = serde_json::from_slice::<Event>(data) {
        return Some(e);
    }
    let tags: Vec<Vec<String>> = serde_json::from_slice(data).ok()?;
    Some(Event {
        id: EventId::from_bytes(&[1; 32]),
        pubkey: Pubkey::from_bytes(&[2; 32]),
        created_at: 1_700_000_000,
        kind: nipar::KIND_REVISION,
        tags,
        content: String::new(),
        sig: "0".repeat(128),
    })
}

fuzz_target!(|data: &[u8]| {
    let Some(event) = event(data) else { return };
    let _ = nipoa::auth_tag(&event);
    let _ = nipoa::check_event(&event, Some(event.kind));
    let Ok(env) = nipar::parse(&event) else { return };
    assert_eq!(event.kind, nipar::KIND_REVISION);
    assert_eq!(event.tag_value("ar"), Some(nipar::ENVELOPE_VERSION));
    assert_eq!(event.tag_value("d"), Some(env.d.to_string().as_str()));
    assert_eq!(event.tag_value("h"), Some(env.h.to_string().as_str()));
    assert!(!env.d.is_nil() && !env.h.is_nil());
    assert_eq!(event.tag_value("type"), Some(env.type_name.as_str()));
    assert_eq!(event.tag_value("op"), Some(env.op.as_str()));
    assert_eq!(Op::parse(env.op.as_str()), Some(env.op));
    assert_eq!(event.tag_value("title"), env.title.as_deref());
    assert_eq!(event.tag_value("prev"), env.prev.as_ref().map(EventId::as_str));
    assert_eq!(event.tag_value("root"), env.root.as_ref().map(EventId::as_str));
    assert_eq!(env.prev.is_none(), env.op == Op::Create);
    assert_eq!(env.title.is_none(), env.op == Op::Delete);
    assert!(event.tags.len() <= nipar::MAX_TAGS);
    assert_eq!(nipar::parse(&event), Ok(env));
});
