//! NIP-01 events: canonical serialisation, id and BIP-340 signature checks.

use serde::{Deserialize, Serialize};

/// A signed Nostr event exactly as it travels on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub id: String,
    pub pubkey: String,
    pub created_at: i64,
    pub kind: u32,
    pub tags: Vec<Vec<String>>,
    pub content: String,
    pub sig: String,
}

/// An event before signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsignedEvent {
    pub pubkey: String,
    pub created_at: i64,
    pub kind: u32,
    pub tags: Vec<Vec<String>>,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Shape problems: bad hex lengths, non-lowercase hex.
    #[error("invalid: {0}")]
    Malformed(String),
    #[error("invalid: event id does not match")]
    IdMismatch,
    #[error("invalid: bad signature")]
    BadSignature,
}

impl Event {
    /// NIP-01 canonical form: `[0,pubkey,created_at,kind,tags,content]` compact JSON.
    #[must_use]
    pub fn canonical_json(&self) -> String { todo!() }
    /// sha256 of the canonical form.
    #[must_use]
    pub fn compute_id(&self) -> [u8; 32] { todo!() }
    /// Checks the shape of id/pubkey/sig (lowercase hex of 64/64/128), that id matches the content and
    /// that the signature verifies. Call it off the async runtime: it costs tens of microseconds.
    pub fn verify(&self) -> Result<(), EventError> { todo!() }
    /// Compact JSON of the whole event (field order id, pubkey, created_at, kind, tags, content, sig).
    #[must_use]
    pub fn to_json(&self) -> String { todo!() }
    /// First value of the first tag named `name`.
    #[must_use]
    pub fn tag_value(&self, name: &str) -> Option<&str> { todo!() }
    /// All tags named `name` (whole tag slices).
    pub fn tags_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
        self.tags.iter().filter(move |t| t.first().map(String::as_str) == Some(name)).map(Vec::as_slice)
    }
}

impl UnsignedEvent {
    #[must_use]
    pub fn compute_id(&self) -> [u8; 32] { todo!() }
}

/// The one BIP-340 verifier of the relay (k256 today; keep every call behind this function so the
/// implementation can be swapped for libsecp256k1).
#[must_use]
pub fn verify_schnorr(pubkey_xonly: &[u8; 32], msg: &[u8; 32], sig: &[u8; 64]) -> bool { todo!() }
