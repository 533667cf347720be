//! A throwaway issuer that mints FI evidence, for tests and the load tester: fresh (or
//! seed-derived) ES256 and EdDSA keys, their JWKS, and compact JWS over arbitrary claims. Not used
//! by any service.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use p256::ecdsa::signature::Signer as _;
use sha2::{Digest, Sha256};

/// Which algorithm a minted JWS uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// Ed25519.
    EdDsa,
}

/// An issuer with one ES256 and one EdDSA key, minting evidence for tests.
pub struct TestIssuer {
    /// The `iss` this issuer signs as.
    pub issuer: String,
    es256: p256::ecdsa::SigningKey,
    eddsa: ed25519_dalek::SigningKey,
}

impl TestIssuer {
    /// New random keys for `issuer`.
    #[must_use]
    pub fn new(issuer: &str) -> Self {
        let es256 = p256::ecdsa::SigningKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
        let mut seed = [0u8; 32];
        p256::elliptic_curve::rand_core::RngCore::fill_bytes(
            &mut p256::elliptic_curve::rand_core::OsRng,
            &mut seed,
        );
        let eddsa = ed25519_dalek::SigningKey::from_bytes(&seed);
        Self { issuer: issuer.to_owned(), es256, eddsa }
    }

    /// Keys derived from `seed`: the same seed gives the same keys (and JWKS) in every process,
    /// so a load tester's workers and the relay it configures agree on an issuer without sharing
    /// a key file. Each key is sha256(`seed` || label), re-hashed in the (never seen) case it is
    /// not a valid P-256 scalar. Test keys only: anyone with the seed can mint evidence.
    #[must_use]
    pub fn from_seed(issuer: &str, seed: &[u8]) -> Self {
        let derive = |label: &[u8]| -> [u8; 32] {
            Sha256::new().chain_update(seed).chain_update(label).finalize().into()
        };
        let mut es = derive(b"buzz-fi test issuer es256");
        let es256 = loop {
            if let Ok(k) = p256::ecdsa::SigningKey::from_slice(&es) {
                break k;
            }
            es = Sha256::digest(es).into();
        };
        let eddsa = ed25519_dalek::SigningKey::from_bytes(&derive(b"buzz-fi test issuer eddsa"));
        Self { issuer: issuer.to_owned(), es256, eddsa }
    }

    /// The public JWKS (one P-256 key `kid` "es", one Ed25519 key `kid` "ed").
    #[must_use]
    pub fn jwks(&self) -> serde_json::Value {
        let point = self.es256.verifying_key().to_encoded_point(false);
        let (x, y) = (point.x().map(|x| x.to_vec()), point.y().map(|y| y.to_vec()));
        serde_json::json!({ "keys": [
            { "kty": "EC", "crv": "P-256", "kid": "es",
              "x": URL_SAFE_NO_PAD.encode(x.unwrap_or_default()),
              "y": URL_SAFE_NO_PAD.encode(y.unwrap_or_default()) },
            { "kty": "OKP", "crv": "Ed25519", "kid": "ed",
              "x": URL_SAFE_NO_PAD.encode(self.eddsa.verifying_key().as_bytes()) },
        ]})
    }

    /// Evidence for `nostr_pubkey` at `host`, expiring at `exp` (unix seconds).
    #[must_use]
    pub fn evidence(&self, alg: Alg, host: &str, nostr_pubkey: &str, exp: u64) -> String {
        let claims = serde_json::json!({
            "iss": self.issuer, "sub": format!("user-{}", &nostr_pubkey[..8.min(nostr_pubkey.len())]),
            "aud": format!("https://{host}"), "nostr_pubkey": nostr_pubkey, "exp": exp,
        });
        self.sign(alg, &claims)
    }

    /// A compact JWS over any claims.
    #[must_use]
    pub fn sign(&self, alg: Alg, claims: &serde_json::Value) -> String {
        let header = match alg {
            Alg::Es256 => serde_json::json!({ "alg": "ES256", "kid": "es", "typ": "JWT" }),
            Alg::EdDsa => serde_json::json!({ "alg": "EdDSA", "kid": "ed", "typ": "JWT" }),
        };
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let sig = match alg {
            Alg::Es256 => {
                let s: p256::ecdsa::Signature = self.es256.sign(signing_input.as_bytes());
                s.to_bytes().to_vec()
            }
            Alg::EdDsa => {
                ed25519_dalek::Signer::sign(&self.eddsa, signing_input.as_bytes()).to_bytes().to_vec()
            }
        };
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_keys_are_deterministic_and_sign_verifiable_evidence() {
        let a = TestIssuer::from_seed("https://idp.test", b"seed-1");
        let b = TestIssuer::from_seed("https://idp.test", b"seed-1");
        let c = TestIssuer::from_seed("https://idp.test", b"seed-2");
        assert_eq!(a.jwks(), b.jwks());
        assert_ne!(a.jwks(), c.jwks());
        assert_ne!(a.jwks()["keys"][0]["x"], a.jwks()["keys"][1]["x"]);
        let raw = serde_json::json!([{ "issuer": "https://idp.test", "jwks": a.jwks() }]).to_string();
        let configs = crate::registry::parse_issuers(&raw).expect("a valid BUZZ_NIP_FI_ISSUERS");
        let secs = std::time::Duration::from_secs;
        let registry = crate::Registry::new(&configs, secs(3600), secs(5));
        let pubkey = "ab".repeat(32);
        for alg in [Alg::Es256, Alg::EdDsa] {
            let jws = b.evidence(alg, "team.example", &pubkey, 4_000_000_000);
            let ev =
                crate::evidence::verify(&registry, &jws, &["https://idp.test".to_owned()], "team.example", 1);
            assert_eq!(ev.map(|e| e.nostr_pubkey.to_string()).ok(), Some(pubkey.clone()), "{alg:?}");
            let forged = c.evidence(alg, "team.example", &pubkey, 4_000_000_000);
            assert!(crate::evidence::verify(
                &registry,
                &forged,
                &["https://idp.test".to_owned()],
                "team.example",
                1
            )
            .is_err());
        }
    }
}
