//! Shared pieces of buzz-relay's fuzz targets: fixed keys (so seeds stay valid signatures across
//! runs), a fixed clock, the FI issuer and its registry, and a tiny byte splitter.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use buzz_core::Keys;
use buzz_fi::registry::{IssuerConfig, Jwks, KeySource, Registry};

/// The clock every target checks against (2023-11-14).
pub const NOW: i64 = 1_700_000_000;

/// The host the auth targets bind events to.
pub const HOST: &str = "relay.example.com";

/// The FI issuer seeds are minted by.
pub const ISSUER: &str = "https://issuer.example";

/// The Nostr key that signs seeds and re-signed inputs (secret 0x01...01).
#[must_use]
pub fn keys() -> Keys {
    Keys::from_secret_hex(&"01".repeat(32)).expect("a valid secret key")
}

/// The FI issuer's ES256 key (secret scalar 0x07...07).
#[must_use]
pub fn es256_key() -> p256::ecdsa::SigningKey {
    p256::ecdsa::SigningKey::from_slice(&[7; 32]).expect("a valid P-256 scalar")
}

/// The FI issuer's EdDSA key (seed 0x09...09).
#[must_use]
pub fn eddsa_key() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[9; 32])
}

/// The issuer's public JWKS: `kid` "es" (P-256) and "ed" (Ed25519).
#[must_use]
pub fn jwks() -> serde_json::Value {
    let point = es256_key().verifying_key().to_encoded_point(false);
    let x = point.x().map(|x| x.to_vec()).unwrap_or_default();
    let y = point.y().map(|y| y.to_vec()).unwrap_or_default();
    serde_json::json!({ "keys": [
        { "kty": "EC", "crv": "P-256", "kid": "es", "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y) },
        { "kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": URL_SAFE_NO_PAD.encode(eddsa_key().verifying_key().as_bytes()) },
    ]})
}

/// A registry trusting [`ISSUER`] with [`jwks`] inline.
#[must_use]
pub fn registry() -> Registry {
    let jwks = Jwks::parse(&jwks()).expect("the fixed jwks parses");
    let config = IssuerConfig { issuer: ISSUER.to_owned(), source: KeySource::Inline(jwks) };
    Registry::new(&[config], Duration::from_secs(3600), Duration::from_secs(1))
}

/// A compact JWS of `header` and `claims` (raw JSON text, used as given) signed with the
/// issuer's key: ES256 when `es256`, else EdDSA.
#[must_use]
pub fn sign_jws(es256: bool, header: &str, claims: &str) -> String {
    use p256::ecdsa::signature::Signer as _;
    let input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims));
    let sig = if es256 {
        let s: p256::ecdsa::Signature = es256_key().sign(input.as_bytes());
        s.to_bytes().to_vec()
    } else {
        eddsa_key().sign(input.as_bytes()).to_bytes().to_vec()
    };
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
}

/// Splits fuzz input at the first `sep` byte-string: `(before, after)`, or `(all, "")`.
#[must_use]
pub fn split<'a>(data: &'a str, sep: &str) -> (&'a str, &'a str) {
    data.split_once(sep).unwrap_or((data, ""))
}
