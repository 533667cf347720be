//! Secret keys and signing, for the relay's own events, tests and the load tool.

use crate::event::{Event, UnsignedEvent};

/// A BIP-340 key pair.
#[derive(Clone)]
pub struct Keys { /* k256::schnorr::SigningKey */ }

impl Keys {
    #[must_use]
    pub fn generate() -> Self { todo!() }
    /// From 64 hex chars of secret key; None when invalid.
    #[must_use]
    pub fn from_secret_hex(hex: &str) -> Option<Self> { todo!() }
    #[must_use]
    pub fn secret_hex(&self) -> String { todo!() }
    /// x-only public key, 64 lowercase hex.
    #[must_use]
    pub fn public_hex(&self) -> String { todo!() }
    /// Signs `unsigned` (its pubkey must be this key's) into a full event.
    #[must_use]
    pub fn sign(&self, unsigned: UnsignedEvent) -> Event { todo!() }
    /// Convenience: build and sign an event with `created_at` = now.
    #[must_use]
    pub fn sign_new(&self, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event { todo!() }
    /// Schnorr signature over an arbitrary 32-byte digest (NIP-OA auth tags), 128 hex.
    #[must_use]
    pub fn sign_digest(&self, digest: &[u8; 32]) -> String { todo!() }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").field("public", &self.public_hex()).finish_non_exhaustive()
    }
}
