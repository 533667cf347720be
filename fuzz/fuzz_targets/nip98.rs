//! NIP-98 `Authorization` headers through `nip98::decode_header` and `nip98::validate`.
//! First byte 0: the rest is a header value, decoded and validated against a request named in
//! it. Otherwise the rest is `method\nurl\nbody`: a header the fixed key signs for that request
//! must decode and validate, and must not validate for another URL, method or body.
//! Asserts: no panic; a decoded event verifies; the signed round trip holds.
#![no_main]

use base64::Engine as _;
use buzz_core::nip98::{self, Nip98Error};
use buzz_core::UnsignedEvent;
use buzz_fuzz::{keys, split, NOW};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

fn signed_header(method: &str, url: &str, body: &[u8]) -> String {
    let mut tags = vec![vec!["u".to_owned(), url.to_owned()], vec!["method".to_owned(), method.to_owned()]];
    if !body.is_empty() {
        tags.push(vec!["payload".to_owned(), hex::encode(Sha256::digest(body))]);
    }
    let keys = keys();
    let unsigned = UnsignedEvent {
        pubkey: keys.public_hex(),
        created_at: NOW,
        kind: nip98::HTTP_AUTH_KIND,
        tags,
        content: String::new(),
    };
    let event = keys.sign(unsigned);
    format!("Nostr {}", base64::engine::general_purpose::STANDARD.encode(event.to_json()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if mode == 0 {
        let (header, request) = split(text, "\n");
        let (method, rest) = split(request, "\n");
        let (url, body) = split(rest, "\n");
        match nip98::decode_header(header) {
            Ok(event) => {
                assert_eq!(event.verify(), Ok(()));
                let _ = nip98::validate(&event, method, url, body.as_bytes(), NOW, 60);
                let _ = nip98::validate(&event, method, url, body.as_bytes(), event.created_at, -5);
            }
            Err(Nip98Error::Missing) => assert!(header.trim().is_empty()),
            Err(_) => {}
        }
        return;
    }
    let (method, rest) = split(text, "\n");
    let (url, body) = split(rest, "\n");
    let header = signed_header(method, url, body.as_bytes());
    let event = nip98::decode_header(&header).expect("a header the fixed key signed decodes");
    assert_eq!(nip98::validate(&event, method, url, body.as_bytes(), NOW + 30, 60), Ok(()));
    assert_eq!(nip98::validate(&event, &method.to_ascii_uppercase(), url, body.as_bytes(), NOW, 0), Ok(()));
    let other_url = format!("{url}x");
    assert_eq!(
        nip98::validate(&event, method, &other_url, body.as_bytes(), NOW, 60),
        Err(Nip98Error::UrlMismatch)
    );
    let other_method = format!("{method}x");
    assert_eq!(
        nip98::validate(&event, &other_method, url, body.as_bytes(), NOW, 60),
        Err(Nip98Error::MethodMismatch)
    );
    assert_eq!(nip98::validate(&event, method, url, body.as_bytes(), NOW + 61, 60), Err(Nip98Error::Stale));
    let other_body = format!("{body}x");
    assert_eq!(
        nip98::validate(&event, method, url, other_body.as_bytes(), NOW, 60),
        Err(Nip98Error::PayloadMismatch)
    );
    // The scheme word is case-insensitive.
    let lower = header.replacen("Nostr", "nostr", 1);
    assert_eq!(nip98::decode_header(&lower).as_ref(), Ok(&event));
});
