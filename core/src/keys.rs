//! Secret keys and signing, for the relay's own events, tests and the load tool.
//!
//! Signing is libsecp256k1 (`secp256k1`), about twice as fast as k256 here (`cargo run --release
//! -p buzz-core --example hotpath`); the BIP-340 vectors below and a cross-check against k256 keep
//! it honest.

use rand::rngs::OsRng;
use rand::RngCore;
use secp256k1::{Keypair, SecretKey, SECP256K1};

use crate::event::{Event, UnsignedEvent};
use crate::ids::{EventId, Pubkey};

/// A BIP-340 key pair, with its x-only public key kept as hex (every signed event carries it).
#[derive(Clone)]
pub struct Keys {
    pair: Keypair,
    public: Pubkey,
}

impl Keys {
    fn from_secret(secret: &SecretKey) -> Self {
        let pair = Keypair::from_secret_key(SECP256K1, secret);
        let public = Pubkey::from_bytes(&pair.x_only_public_key().0.serialize());
        Self { pair, public }
    }
    /// A new random key pair.
    #[must_use]
    pub fn generate() -> Self {
        loop {
            let mut bytes = [0u8; 32];
            OsRng.fill_bytes(&mut bytes);
            // Out of range (zero or at least the curve order) with probability ~2^-128: draw again.
            if let Ok(secret) = SecretKey::from_byte_array(bytes) {
                return Self::from_secret(&secret);
            }
        }
    }
    /// From 64 hex chars of secret key; None when invalid.
    #[must_use]
    pub fn from_secret_hex(hex: &str) -> Option<Self> {
        if hex.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes).ok()?;
        SecretKey::from_byte_array(bytes).ok().map(|secret| Self::from_secret(&secret))
    }
    /// The secret key as 64 lowercase hex characters.
    #[must_use]
    pub fn secret_hex(&self) -> String {
        hex::encode(self.pair.secret_bytes())
    }
    /// x-only public key, 64 lowercase hex.
    #[must_use]
    pub fn public_hex(&self) -> String {
        self.public.to_string()
    }
    /// The x-only public key.
    #[must_use]
    pub fn pubkey(&self) -> Pubkey {
        self.public.clone()
    }
    /// Signs `unsigned` (its pubkey must be this key's) into a full event.
    /// The event always carries this key's pubkey, so the result verifies even if the caller left
    /// `unsigned.pubkey` empty or wrong.
    #[must_use]
    pub fn sign(&self, unsigned: UnsignedEvent) -> Event {
        let unsigned = if self.public == unsigned.pubkey {
            unsigned
        } else {
            UnsignedEvent { pubkey: self.public.to_string(), ..unsigned }
        };
        let id = unsigned.compute_id();
        let sig = self.sign32(&id);
        Event {
            id: EventId::from_bytes(&id),
            pubkey: self.public.clone(),
            created_at: unsigned.created_at,
            kind: unsigned.kind,
            tags: unsigned.tags,
            content: unsigned.content,
            sig: hex::encode(sig),
        }
    }
    /// Convenience: build and sign an event with `created_at` = now.
    #[must_use]
    pub fn sign_new(&self, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event {
        self.sign(UnsignedEvent {
            pubkey: self.public.to_string(),
            created_at: crate::clock::unix_now(),
            kind,
            tags,
            content: content.to_owned(),
        })
    }
    /// Schnorr signature over an arbitrary 32-byte digest (NIP-OA auth tags), 128 hex.
    #[must_use]
    pub fn sign_digest(&self, digest: &[u8; 32]) -> String {
        hex::encode(self.sign32(digest))
    }

    /// BIP-340 signature of the 32-byte message with fresh auxiliary randomness.
    fn sign32(&self, msg: &[u8; 32]) -> [u8; 64] {
        let mut aux = [0u8; 32];
        OsRng.fill_bytes(&mut aux);
        self.sign32_with_aux(msg, &aux)
    }

    /// BIP-340 signature with the given auxiliary randomness (deterministic; used by test vectors).
    fn sign32_with_aux(&self, msg: &[u8; 32], aux: &[u8; 32]) -> [u8; 64] {
        SECP256K1.sign_schnorr_with_aux_rand(msg, &self.pair, aux).to_byte_array()
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").field("public", &self.public_hex()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BIP-340 test vectors 0..=3 (bitcoin/bips bip-0340/test-vectors.csv): secret key, public key,
    /// aux_rand, message, signature.
    const VECTORS: [[&str; 5]; 4] = [
        [
            "0000000000000000000000000000000000000000000000000000000000000003",
            "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "0000000000000000000000000000000000000000000000000000000000000000",
            "E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0",
        ],
        [
            "B7E151628AED2A6ABF7158809CF4F3C762E7160F38B4DA56A784D9045190CFEF",
            "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659",
            "0000000000000000000000000000000000000000000000000000000000000001",
            "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89",
            "6896BD60EEAE296DB48A229FF71DFE071BDE413E6D43F917DC8DCF8C78DE33418906D11AC976ABCCB20B091292BFF4EA897EFCB639EA871CFA95F6DE339E4B0A",
        ],
        [
            "C90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B14E5C9",
            "DD308AFEC5777E13121FA72B9CC1B7CC0139715309B086C960E18FD969774EB8",
            "C87AA53824B4D7AE2EB035A2B5BBBCCC080E76CDC6D1692C4B0B62D798E6D906",
            "7E2D58D8B3BCDF1ABADEC7829054F90DDA9805AAB56C77333024B9D0A508B75C",
            "5831AAEED7B44BB74E5EAB94BA9D4294C49BCF2A60728D8B4C200F50DD313C1BAB745879A5AD954A72C45A91C3A51D3C7ADEA98D82F8481E0E1E03674A6F3FB7",
        ],
        [
            "0B432B2677937381AEF05BB02A66ECD012773062CF3FA2549E44F58ED2401710",
            "25D1DFF95105F5253C4022F628A996AD3A0D95FBF21D468A1B33F8C160D8F517",
            "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
            "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",
            "7EB0509757E246F19449885651611CB965ECC1A187DD51B64FDA1EDC9637D5EC97582B9CB13DB3933705B32BA982AF5AF25FD78881EBB32771FC5922EFC66EA3",
        ],
    ];

    fn bytes<const N: usize>(s: &str) -> [u8; N] {
        let mut out = [0u8; N];
        hex::decode_to_slice(s, &mut out).expect("hex");
        out
    }

    #[test]
    fn bip340_signing_vectors() {
        for [sk, pk, aux, msg, sig] in VECTORS {
            let keys = Keys::from_secret_hex(sk).expect("valid secret");
            assert_eq!(keys.public_hex(), pk.to_ascii_lowercase());
            let got = keys.sign32_with_aux(&bytes(msg), &bytes(aux));
            assert_eq!(hex::encode(got), sig.to_ascii_lowercase());
        }
    }

    /// The same secret, message and auxiliary randomness give k256's signature byte for byte.
    #[test]
    fn signatures_match_k256() {
        for i in 0u8..32 {
            let keys = Keys::generate();
            let (msg, aux) = ([i; 32], [i.wrapping_mul(7); 32]);
            let k = k256::schnorr::SigningKey::from_bytes(&bytes::<32>(&keys.secret_hex())).expect("valid");
            assert_eq!(hex::encode(k.verifying_key().to_bytes()), keys.public_hex());
            let theirs = k.sign_raw(&msg, &aux).expect("signs").to_bytes();
            assert_eq!(keys.sign32_with_aux(&msg, &aux), theirs);
        }
    }

    #[test]
    fn secret_hex_round_trip() {
        let keys = Keys::generate();
        let again = Keys::from_secret_hex(&keys.secret_hex()).expect("round trip");
        assert_eq!(keys.public_hex(), again.public_hex());
        assert!(crate::ids::Pubkey::parse(&keys.public_hex()).is_ok());
        assert!(format!("{keys:?}").contains(&keys.public_hex()));
    }

    #[test]
    fn invalid_secrets_rejected() {
        assert!(Keys::from_secret_hex("").is_none());
        assert!(Keys::from_secret_hex(&"0".repeat(64)).is_none());
        assert!(Keys::from_secret_hex(&"f".repeat(64)).is_none(), "above the curve order");
        assert!(Keys::from_secret_hex(&"zz".repeat(32)).is_none());
        assert!(Keys::from_secret_hex(&"01".repeat(31)).is_none());
    }

    #[test]
    fn sign_digest_verifies() {
        let keys = Keys::generate();
        let digest = [7u8; 32];
        let sig: [u8; 64] = bytes(&keys.sign_digest(&digest));
        let pk: [u8; 32] = bytes(&keys.public_hex());
        assert!(crate::event::verify_schnorr(&pk, &digest, &sig));
        assert!(!crate::event::verify_schnorr(&pk, &[8u8; 32], &sig));
    }

    #[test]
    fn sign_fills_own_pubkey() {
        let keys = Keys::generate();
        let unsigned = UnsignedEvent {
            pubkey: String::new(),
            created_at: 1,
            kind: 1,
            tags: vec![],
            content: "x".into(),
        };
        let event = keys.sign(unsigned);
        assert_eq!(event.pubkey, keys.public_hex());
        assert_eq!(event.verify(), Ok(()));
    }
}
