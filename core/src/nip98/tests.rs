#![allow(clippy::unwrap_used)]

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

use super::*;
use crate::keys::Keys;

const NOW: i64 = 1_700_000_000;
const URL: &str = "https://relay.example.com/api/v1/things?x=1";

fn auth_event(keys: &Keys, tags: &[(&str, &str)], kind: u32, created_at: i64) -> Event {
    let tags = tags.iter().map(|(k, v)| vec![(*k).to_owned(), (*v).to_owned()]).collect();
    keys.sign(crate::event::UnsignedEvent {
        pubkey: keys.public_hex(),
        created_at,
        kind,
        tags,
        content: String::new(),
    })
}

fn header(event: &Event) -> String {
    format!("Nostr {}", STANDARD.encode(event.to_json()))
}

#[test]
fn decodes_valid_headers() {
    let keys = Keys::generate();
    let event = auth_event(&keys, &[("u", URL), ("method", "GET")], HTTP_AUTH_KIND, NOW);
    let b64 = STANDARD.encode(event.to_json());
    let unpadded = STANDARD_NO_PAD.encode(event.to_json());
    for value in [
        format!("Nostr {b64}"),
        format!("nostr {b64}"),
        format!("NOSTR {unpadded}"),
        format!("  Nostr {b64} "),
    ] {
        assert_eq!(decode_header(&value), Ok(event.clone()), "{value}");
    }
}

#[test]
fn rejects_bad_headers() {
    let keys = Keys::generate();
    let event = auth_event(&keys, &[("u", URL), ("method", "GET")], HTTP_AUTH_KIND, NOW);
    let b64 = STANDARD.encode(event.to_json());
    assert_eq!(decode_header(""), Err(Nip98Error::Missing));
    assert_eq!(decode_header("   "), Err(Nip98Error::Missing));
    for value in [
        format!("Bearer {b64}"),
        format!("Nostr{b64}"),
        format!("Nostr  {b64}"),
        "Nostr".to_owned(),
        "Nostr !!!".to_owned(),
        format!("Nostr {}", STANDARD.encode("{}")),
        format!("Nostr {}", STANDARD.encode("not json")),
        format!(
            "Nostr {}",
            STANDARD.encode(event.to_json().replace(event.id.as_str(), &event.id.as_str().to_uppercase()))
        ),
    ] {
        assert!(matches!(decode_header(&value), Err(Nip98Error::Malformed(_))), "{value}");
    }
    let tampered = Event { content: "x".into(), ..event.clone() };
    assert_eq!(decode_header(&header(&tampered)), Err(Nip98Error::BadSignature));
    let mut sig = event.sig.clone().into_bytes();
    sig[0] = if sig[0] == b'0' { b'1' } else { b'0' };
    let bad_sig = Event { sig: String::from_utf8(sig).expect("ascii"), ..event };
    assert_eq!(decode_header(&header(&bad_sig)), Err(Nip98Error::BadSignature));
}

#[test]
fn validates_binding() {
    let keys = Keys::generate();
    let body = b"{\"a\":1}";
    let body_hash = hex::encode(Sha256::digest(body));
    let empty_hash = hex::encode(Sha256::digest(b""));
    let ev = |tags: &[(&str, &str)]| auth_event(&keys, tags, HTTP_AUTH_KIND, NOW);
    let base = [("u", URL), ("method", "post")];

    assert_eq!(validate(&ev(&base), "POST", URL, b"", NOW, 60), Ok(()));
    assert_eq!(
        validate(&ev(&[base[0], base[1], ("payload", &body_hash)]), "POST", URL, body, NOW, 60),
        Ok(())
    );
    assert_eq!(
        validate(&ev(&[base[0], base[1], ("payload", &empty_hash)]), "POST", URL, b"", NOW, 60),
        Ok(())
    );

    let wrong_kind = auth_event(&keys, &base, 1, NOW);
    assert_eq!(validate(&wrong_kind, "POST", URL, b"", NOW, 60), Err(Nip98Error::WrongKind));
    assert_eq!(
        validate(&ev(&base), "POST", "http://relay.example.com/api/v1/things?x=1", b"", NOW, 60),
        Err(Nip98Error::UrlMismatch)
    );
    assert_eq!(
        validate(&ev(&base), "POST", "https://relay.example.com/api/v1/things", b"", NOW, 60),
        Err(Nip98Error::UrlMismatch)
    );
    assert_eq!(validate(&ev(&base[1..]), "POST", URL, b"", NOW, 60), Err(Nip98Error::UrlMismatch));
    assert_eq!(validate(&ev(&base), "GET", URL, b"", NOW, 60), Err(Nip98Error::MethodMismatch));
    assert_eq!(validate(&ev(&base[..1]), "POST", URL, b"", NOW, 60), Err(Nip98Error::MethodMismatch));
    assert_eq!(validate(&ev(&base), "POST", URL, body, NOW, 60), Err(Nip98Error::PayloadMismatch));
    assert_eq!(
        validate(&ev(&[base[0], base[1], ("payload", &body_hash)]), "POST", URL, b"", NOW, 60),
        Err(Nip98Error::PayloadMismatch)
    );
    assert_eq!(
        validate(
            &ev(&[base[0], base[1], ("payload", &body_hash.to_uppercase())]),
            "POST",
            URL,
            body,
            NOW,
            60
        ),
        Err(Nip98Error::PayloadMismatch)
    );

    for (created_at, ok) in
        [(NOW - 60, true), (NOW + 60, true), (NOW - 61, false), (NOW + 61, false), (i64::MIN, false)]
    {
        let e = auth_event(&keys, &base, HTTP_AUTH_KIND, created_at);
        assert_eq!(validate(&e, "POST", URL, b"", NOW, 60).is_ok(), ok, "{created_at}");
    }
    assert_eq!(validate(&ev(&base), "POST", URL, b"", NOW + 1, -5), Err(Nip98Error::Stale));
}

#[test]
fn a_built_authorization_header_decodes_and_binds_the_body() {
    let keys = crate::keys::Keys::generate();
    let h = super::authorization_header(&keys, "POST", "https://x.test/api", b"{}");
    let ev = super::decode_header(&h).unwrap();
    let now = crate::clock::unix_now();
    assert_eq!(super::validate(&ev, "POST", "https://x.test/api", b"{}", now, 60), Ok(()));
    assert_eq!(
        super::validate(&ev, "POST", "https://x.test/api", b"{ }", now, 60),
        Err(super::Nip98Error::PayloadMismatch)
    );
}
