//! FI evidence: `Nostr-Federated-Identity: Bearer <JWS>` (compact JWS, ES256 or EdDSA), verified
//! offline against the issuer's keys in the trust registry.
//!
//! Checked here: the header's `alg`, the signature, `iss` (one of the community's bound issuers
//! and in the registry), `aud` (`https://<host>`), `exp` (in the future), `sub` (non-empty) and
//! `nostr_pubkey` (lowercase hex). Whether `nostr_pubkey` is the key the caller proved (NIP-42
//! or NIP-98) is the caller's check, because the proof may come later (AUTH after the upgrade).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use buzz_core::Pubkey;
use serde::Deserialize;

use crate::registry::{Jwk, Registry, TrustError};

/// The header carrying the evidence (lowercase, as HTTP header names are matched).
pub const HEADER: &str = "nostr-federated-identity";

/// Compact JWS longer than this is rejected before decoding.
const MAX_LEN: usize = 8192;

/// The verified claims of one piece of evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// `iss`: the issuer, bound to the community and present in the registry.
    pub issuer: String,
    /// `sub`: the issuer's subject (non-empty).
    pub subject: String,
    /// `nostr_pubkey`: the key NIP-42 or NIP-98 must prove.
    pub nostr_pubkey: Pubkey,
    /// Unix seconds.
    pub exp: u64,
}

/// Why evidence does not admit: rejected (403) or unverifiable now (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// The evidence is malformed, forged, expired, for another audience or issuer: 403.
    #[error("evidence rejected: {0}")]
    Rejected(&'static str),
    /// The issuer's keys are past their refresh deadline (or never fetched): 503.
    #[error("issuer keys are unavailable")]
    Unavailable,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    aud: serde_json::Value,
    nostr_pubkey: String,
    exp: u64,
}

/// The JWS of a header value `Bearer <JWS>` (scheme case-insensitive).
#[must_use]
pub fn bearer_value(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim()).filter(|s| !s.is_empty())
}

/// Verifies `jws` for a community bound to `bound_issuers`, served at `https://<host>`.
pub fn verify(
    registry: &Registry,
    jws: &str,
    bound_issuers: &[String],
    host: &str,
    now: u64,
) -> Result<Evidence, EvidenceError> {
    use EvidenceError::Rejected;
    if jws.len() > MAX_LEN {
        return Err(Rejected("too long"));
    }
    let mut parts = jws.split('.');
    let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(Rejected("not a compact jws"));
    };
    let header: Header = decode_json(h).ok_or(Rejected("bad header"))?;
    let claims: Claims = decode_json(p).ok_or(Rejected("bad claims"))?;
    let signature = URL_SAFE_NO_PAD.decode(s).map_err(|_| Rejected("bad signature encoding"))?;
    if !bound_issuers.contains(&claims.iss) {
        return Err(Rejected("issuer is not bound to this community"));
    }
    let keys = registry.keys(&claims.iss).map_err(|e| match e {
        TrustError::Unknown => Rejected("issuer is not trusted"),
        TrustError::Unavailable => EvidenceError::Unavailable,
    })?;
    let signed = &jws.as_bytes()[..h.len() + 1 + p.len()];
    let verified = keys
        .keys
        .iter()
        .filter(|k| header.kid.is_none() || k.kid == header.kid)
        .any(|k| verifies(&header.alg, k, signed, &signature));
    if !verified {
        return Err(Rejected("signature does not verify"));
    }
    check_claims(claims, host, now)
}

fn check_claims(c: Claims, host: &str, now: u64) -> Result<Evidence, EvidenceError> {
    use EvidenceError::Rejected;
    let audience = format!("https://{host}");
    let aud_ok = match &c.aud {
        serde_json::Value::String(a) => *a == audience,
        serde_json::Value::Array(list) => list.iter().any(|a| a.as_str() == Some(audience.as_str())),
        _ => false,
    };
    if !aud_ok {
        return Err(Rejected("audience is not this host"));
    }
    if c.exp <= now {
        return Err(Rejected("expired"));
    }
    if c.sub.is_empty() {
        return Err(Rejected("empty subject"));
    }
    let Ok(nostr_pubkey) = Pubkey::try_from(c.nostr_pubkey) else {
        return Err(Rejected("nostr_pubkey is not lowercase hex"));
    };
    Ok(Evidence { issuer: c.iss, subject: c.sub, nostr_pubkey, exp: c.exp })
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Option<T> {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).ok()?).ok()
}

/// Whether `signature` over `signed` verifies with `key` under `alg` (ES256 or EdDSA only).
fn verifies(alg: &str, key: &Jwk, signed: &[u8], signature: &[u8]) -> bool {
    match (alg, key.kty.as_str(), key.crv.as_str()) {
        ("ES256", "EC", "P-256") => verify_es256(key, signed, signature).unwrap_or(false),
        ("EdDSA", "OKP", "Ed25519") => verify_eddsa(key, signed, signature).unwrap_or(false),
        _ => false,
    }
}

fn verify_es256(key: &Jwk, signed: &[u8], signature: &[u8]) -> Option<bool> {
    use p256::ecdsa::signature::Verifier as _;
    let x = URL_SAFE_NO_PAD.decode(&key.x).ok()?;
    let y = URL_SAFE_NO_PAD.decode(key.y.as_deref()?).ok()?;
    if x.len() != 32 || y.len() != 32 {
        return None;
    }
    let mut point = vec![4u8];
    point.extend_from_slice(&x);
    point.extend_from_slice(&y);
    let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point).ok()?;
    let sig = p256::ecdsa::Signature::from_slice(signature).ok()?;
    Some(vk.verify(signed, &sig).is_ok())
}

fn verify_eddsa(key: &Jwk, signed: &[u8], signature: &[u8]) -> Option<bool> {
    let x: [u8; 32] = URL_SAFE_NO_PAD.decode(&key.x).ok()?.try_into().ok()?;
    let vk = ed25519_dalek::VerifyingKey::from_bytes(&x).ok()?;
    let sig = ed25519_dalek::Signature::from_slice(signature).ok()?;
    Some(vk.verify_strict(signed, &sig).is_ok())
}
