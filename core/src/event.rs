//! NIP-01 events: canonical serialisation, id and BIP-340 signature checks.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::hex::is_lower_hex;
use crate::ids::{EventId, Pubkey};

/// A signed Nostr event exactly as it travels on the wire. Deserialising it checks the shape of
/// `id` and `pubkey` (their types); [`Event::verify`] checks that they and `sig` belong together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Sha256 of the canonical serialisation.
    pub id: EventId,
    /// The author's x-only public key.
    pub pubkey: Pubkey,
    /// Unix seconds, as the author claims.
    pub created_at: i64,
    /// What the event is (NIP-01 kind).
    pub kind: u32,
    /// Tags, each a name followed by its values.
    pub tags: Vec<Vec<String>>,
    /// Free text or JSON, by kind.
    pub content: String,
    /// Schnorr signature of `id` (128 lowercase hex).
    pub sig: String,
}

/// An event before signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedEvent {
    /// The author's x-only public key (64 lowercase hex).
    pub pubkey: String,
    /// Unix seconds.
    pub created_at: i64,
    /// NIP-01 kind.
    pub kind: u32,
    /// Tags, each a name followed by its values.
    pub tags: Vec<Vec<String>>,
    /// Free text or JSON, by kind.
    pub content: String,
}

/// Why an event's id or signature does not check out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Shape problems: bad hex lengths, non-lowercase hex.
    #[error("invalid: {0}")]
    Malformed(String),
    /// `id` is not the hash of the event's canonical form.
    #[error("invalid: event id does not match")]
    IdMismatch,
    /// The signature does not verify against `pubkey`.
    #[error("invalid: bad signature")]
    BadSignature,
}

impl Event {
    /// NIP-01 canonical form: `[0,pubkey,created_at,kind,tags,content]` compact JSON.
    #[must_use]
    pub fn canonical_json(&self) -> String {
        canonical_string(self.pubkey.as_str(), self.created_at, self.kind, &self.tags, &self.content)
    }
    /// sha256 of the canonical form.
    #[must_use]
    pub fn compute_id(&self) -> [u8; 32] {
        canonical_hash(self.pubkey.as_str(), self.created_at, self.kind, &self.tags, &self.content)
    }
    /// Checks the shape of sig (128 lowercase hex; id and pubkey are checked by their types), that
    /// id matches the content and that the signature verifies. Call it off the async runtime: it
    /// costs tens of microseconds.
    pub fn verify(&self) -> Result<(), EventError> {
        let id = self.id.to_bytes();
        let pubkey = self.pubkey.to_bytes();
        let sig: [u8; 64] = decode_lower_hex(&self.sig)
            .ok_or_else(|| EventError::Malformed("sig must be 128 lowercase hex".into()))?;
        if self.compute_id() != id {
            return Err(EventError::IdMismatch);
        }
        if !verify_schnorr(&pubkey, &id, &sig) {
            return Err(EventError::BadSignature);
        }
        Ok(())
    }
    /// Compact JSON of the whole event (field order id, pubkey, created_at, kind, tags, content, sig).
    #[must_use]
    pub fn to_json(&self) -> String {
        // Serialising strings, integers and string arrays cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
    /// First value of the first tag named `name`.
    #[must_use]
    pub fn tag_value(&self, name: &str) -> Option<&str> {
        let tag = self.tags.iter().find(|t| t.first().is_some_and(|n| n == name))?;
        tag.get(1).map(String::as_str)
    }
    /// The part of the event that holds a NUL character (U+0000), if any: `"content"`,
    /// `"tag name"` or `"tag value"`. PostgreSQL text cannot hold NUL, so the relay refuses such
    /// events outright rather than storing some parts and failing on others.
    #[must_use]
    pub fn nul_part(&self) -> Option<&'static str> {
        if self.content.contains('\0') {
            return Some("content");
        }
        for tag in &self.tags {
            let mut elements = tag.iter();
            if elements.next().is_some_and(|name| name.contains('\0')) {
                return Some("tag name");
            }
            if elements.any(|v| v.contains('\0')) {
                return Some("tag value");
            }
        }
        None
    }
    /// All tags named `name` (whole tag slices).
    pub fn tags_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
        self.tags.iter().filter(move |t| t.first().map(String::as_str) == Some(name)).map(Vec::as_slice)
    }
}

impl UnsignedEvent {
    /// sha256 of the NIP-01 canonical form; the id the signed event will carry.
    #[must_use]
    pub fn compute_id(&self) -> [u8; 32] {
        canonical_hash(&self.pubkey, self.created_at, self.kind, &self.tags, &self.content)
    }
}

/// Checks `created_at` against the relay clock `now`: not negative, and at most `upper_limit`
/// seconds ahead. The error is the reason after `invalid: `.
pub fn check_created_at(created_at: i64, now: i64, upper_limit: u64) -> Result<(), String> {
    if created_at < 0 {
        return Err("created_at must not be negative".into());
    }
    let latest = now.saturating_add(i64::try_from(upper_limit).unwrap_or(i64::MAX));
    if created_at > latest {
        return Err(format!("created_at is too far in the future (more than {upper_limit} s ahead)"));
    }
    Ok(())
}

/// The one BIP-340 verifier of the relay, with libsecp256k1 (keep every call behind this function so
/// the implementation stays swappable).
#[must_use]
pub fn verify_schnorr(pubkey_xonly: &[u8; 32], msg: &[u8; 32], sig: &[u8; 64]) -> bool {
    // libsecp256k1 verifies about 1.8x faster than k256 here; k256 still signs (`Keys`).
    let Ok(key) = secp256k1::XOnlyPublicKey::from_byte_array(*pubkey_xonly) else {
        return false;
    };
    let sig = secp256k1::schnorr::Signature::from_byte_array(*sig);
    // BIP-340 signs the 32-byte message itself (no extra hashing).
    secp256k1::SECP256K1.verify_schnorr(&sig, msg, &key).is_ok()
}

/// Decodes exactly `2 * N` lowercase hex characters.
pub(crate) fn decode_lower_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if !is_lower_hex(s, 2 * N) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

type CanonicalForm<'a> = (u8, &'a str, i64, u32, &'a [Vec<String>], &'a str);

fn canonical_string(pubkey: &str, created_at: i64, kind: u32, tags: &[Vec<String>], content: &str) -> String {
    let form: CanonicalForm<'_> = (0, pubkey, created_at, kind, tags, content);
    // Serialising strings, integers and string arrays cannot fail.
    serde_json::to_string(&form).unwrap_or_default()
}

fn canonical_hash(pubkey: &str, created_at: i64, kind: u32, tags: &[Vec<String>], content: &str) -> [u8; 32] {
    let form: CanonicalForm<'_> = (0, pubkey, created_at, kind, tags, content);
    let mut writer = HashWriter(Sha256::new());
    // Writing into a hasher cannot fail, nor can serialising these types.
    let _ = serde_json::to_writer(&mut writer, &form);
    writer.0.finalize().into()
}

/// Streams serde_json output straight into sha256, avoiding an intermediate buffer.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
