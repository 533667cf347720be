//! NIP-FI evidence (`Nostr-Federated-Identity: Bearer <compact JWS>`) through
//! `evidence::bearer_value` and `evidence::verify` against a registry trusting one fixed issuer.
//! First byte 0: the rest is the header value. Otherwise the rest is `header JSON\nclaims JSON`,
//! signed here with the issuer's ES256 (odd byte) or EdDSA key, so the claim checks are reached.
//! Asserts: no panic; admitted evidence names the issuer, this host's audience, a future `exp`,
//! a subject and a key; a changed signature or payload is rejected.
#![no_main]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use buzz_fi::evidence::{self, EvidenceError};
use buzz_fuzz::{registry, sign_jws, split, HOST, ISSUER, NOW};
use libfuzzer_sys::fuzz_target;

/// Built once: a registry holds an HTTP client, far dearer than one verification.
static REGISTRY: std::sync::LazyLock<buzz_fi::registry::Registry> = std::sync::LazyLock::new(registry);

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let registry = &*REGISTRY;
    let bound = [ISSUER.to_owned()];
    #[allow(clippy::cast_sign_loss)]
    let now = NOW as u64;
    let jws = if mode == 0 {
        let Some(jws) = evidence::bearer_value(text) else { return };
        jws.to_owned()
    } else {
        let (header, claims) = split(text, "\n");
        sign_jws(mode % 2 == 1, header, claims)
    };
    let Ok(ev) = evidence::verify(registry, &jws, &bound, HOST, now) else { return };
    assert_eq!(ev.issuer, ISSUER);
    assert!(ev.exp > now && !ev.subject.is_empty());
    let claims: serde_json::Value = jws
        .split('.')
        .nth(1)
        .and_then(|p| URL_SAFE_NO_PAD.decode(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .expect("admitted evidence has JSON claims");
    let audience = format!("https://{HOST}");
    let aud = &claims["aud"];
    assert!(
        aud.as_str() == Some(&audience)
            || aud.as_array().is_some_and(|l| l.iter().any(|a| a.as_str() == Some(&audience)))
    );
    assert_eq!(claims["nostr_pubkey"].as_str(), Some(ev.nostr_pubkey.as_str()));
    // At its expiry, or for a community the issuer is not bound to, it is rejected.
    assert!(evidence::verify(registry, &jws, &bound, HOST, ev.exp).is_err());
    assert!(evidence::verify(registry, &jws, &[], HOST, now).is_err());
    // A changed signature does not verify.
    let (signed, sig) = jws.rsplit_once('.').expect("three parts");
    let mut raw = URL_SAFE_NO_PAD.decode(sig).expect("base64url signature");
    raw[0] ^= 1;
    let forged = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(&raw));
    assert!(matches!(
        evidence::verify(registry, &forged, &bound, HOST, now),
        Err(EvidenceError::Rejected(_))
    ));
});
