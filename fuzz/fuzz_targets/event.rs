//! An event's JSON through `Event` deserialisation, canonical form, id and BIP-340 checks.
//! Asserts: no panic; serialise → parse is the identity; the id is sha256 of the canonical
//! form; the event re-signed with a fixed key verifies, and any change to it does not.
#![no_main]

use buzz_core::{Event, EventError, UnsignedEvent};
use buzz_fuzz::keys;
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fuzz_target!(|data: &[u8]| {
    let Ok(event) = serde_json::from_slice::<Event>(data) else { return };
    let json = event.to_json();
    assert_eq!(serde_json::from_str::<Event>(&json).ok().as_ref(), Some(&event), "round trip of {json}");

    let canonical = event.canonical_json();
    let form: serde_json::Value = serde_json::from_str(&canonical).expect("canonical form is JSON");
    assert_eq!(form.as_array().map(Vec::len), Some(6));
    let id: [u8; 32] = Sha256::digest(canonical.as_bytes()).into();
    assert_eq!(event.compute_id(), id);

    match event.verify() {
        Ok(()) => assert_eq!(event.id.to_bytes(), id),
        Err(EventError::Malformed(_) | EventError::IdMismatch | EventError::BadSignature) => {}
    }
    let _ = event.nul_part();
    let _ = event.tag_value("d");

    let unsigned = UnsignedEvent {
        pubkey: event.pubkey.to_string(),
        created_at: event.created_at,
        kind: event.kind,
        tags: event.tags.clone(),
        content: event.content.clone(),
    };
    assert_eq!(unsigned.compute_id(), id);
    let signed = keys().sign(unsigned);
    assert_eq!(signed.verify(), Ok(()));
    let mut changed = signed.clone();
    changed.content.push('x');
    assert_eq!(changed.verify(), Err(EventError::IdMismatch));
    let mut forged = signed;
    forged.sig = format!("{}{}", &forged.sig[..126], if forged.sig.ends_with('0') { "01" } else { "00" });
    assert_eq!(forged.verify(), Err(EventError::BadSignature));
});
