//! FI evidence verification: ES256 and EdDSA accepted, every claim checked, forged or foreign
//! evidence rejected, and an issuer past its key deadline unavailable (not rejected).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_fi::evidence::{self, EvidenceError};
use buzz_fi::registry::{IssuerConfig, KeySource};
use buzz_fi::testing::{Alg, TestIssuer};
use buzz_fi::{Jwks, Registry};
use serde_json::json;

const HOST: &str = "team.example";
const PK: &str = "aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11aa11";
const NOW: u64 = 1_700_000_000;

fn registry(issuer: &TestIssuer) -> Registry {
    let configs = vec![
        IssuerConfig {
            issuer: issuer.issuer.clone(),
            source: KeySource::Inline(Jwks::parse(&issuer.jwks()).unwrap()),
        },
        IssuerConfig {
            issuer: "https://remote.test".into(),
            source: KeySource::Uri("http://127.0.0.1:9/jwks".into()),
        },
    ];
    Registry::new(&configs, Duration::from_secs(60), Duration::from_secs(1))
}

fn bound(issuer: &TestIssuer) -> Vec<String> {
    vec![issuer.issuer.clone(), "https://remote.test".into(), "https://unknown.test".into()]
}

#[test]
fn es256_and_eddsa_evidence_verify_with_all_claims() {
    let iss = TestIssuer::new("https://issuer.test");
    let reg = registry(&iss);
    for alg in [Alg::Es256, Alg::EdDsa] {
        let jws = iss.evidence(alg, HOST, PK, NOW + 60);
        let ev = evidence::verify(&reg, &jws, &bound(&iss), HOST, NOW).unwrap();
        assert_eq!(ev.nostr_pubkey, PK);
        assert_eq!(ev.issuer, "https://issuer.test");
        assert_eq!(ev.exp, NOW + 60);
        // Another host is another audience.
        assert_eq!(
            evidence::verify(&reg, &jws, &bound(&iss), "other.example", NOW),
            Err(EvidenceError::Rejected("audience is not this host"))
        );
        // Expired at `exp`.
        assert_eq!(
            evidence::verify(&reg, &jws, &bound(&iss), HOST, NOW + 60),
            Err(EvidenceError::Rejected("expired"))
        );
        // Not bound to this community.
        assert_eq!(
            evidence::verify(&reg, &jws, &[], HOST, NOW),
            Err(EvidenceError::Rejected("issuer is not bound to this community"))
        );
    }
}

#[test]
fn forged_malformed_and_foreign_evidence_is_rejected() {
    let iss = TestIssuer::new("https://issuer.test");
    let reg = registry(&iss);
    let sig_fail = Err(EvidenceError::Rejected("signature does not verify"));
    // Same issuer name, other keys.
    let forger = TestIssuer::new("https://issuer.test");
    assert_eq!(
        evidence::verify(&reg, &forger.evidence(Alg::EdDsa, HOST, PK, NOW + 60), &bound(&iss), HOST, NOW),
        sig_fail
    );
    // Claims swapped under a valid signature.
    let good = iss.evidence(Alg::Es256, HOST, PK, NOW + 60);
    let other = iss.evidence(Alg::Es256, HOST, &PK.replace('a', "b"), NOW + 60);
    let g: Vec<&str> = good.split('.').collect();
    let o: Vec<&str> = other.split('.').collect();
    let spliced = format!("{}.{}.{}", g[0], o[1], g[2]);
    assert_eq!(evidence::verify(&reg, &spliced, &bound(&iss), HOST, NOW), sig_fail);
    // Another algorithm named in the header (alg confusion, `none`).
    let none = format!("{}.{}.", base64_json(&json!({"alg":"none"})), g[1]);
    assert_eq!(evidence::verify(&reg, &none, &bound(&iss), HOST, NOW), sig_fail);
    for bad in ["", "a.b", "a.b.c.d", "!!.!!.!!"] {
        assert!(matches!(
            evidence::verify(&reg, bad, &bound(&iss), HOST, NOW),
            Err(EvidenceError::Rejected(_))
        ));
    }
    // Claims: empty subject, a pubkey that is not lowercase hex, an issuer outside the registry.
    let claims = |sub: &str, pk: &str, issuer: &str| json!({"iss": issuer, "sub": sub, "aud": [format!("https://{HOST}")], "nostr_pubkey": pk, "exp": NOW + 60});
    let i = "https://issuer.test";
    assert_eq!(
        evidence::verify(&reg, &iss.sign(Alg::EdDsa, &claims("", PK, i)), &bound(&iss), HOST, NOW),
        Err(EvidenceError::Rejected("empty subject"))
    );
    assert_eq!(
        evidence::verify(
            &reg,
            &iss.sign(Alg::EdDsa, &claims("u", &PK.to_uppercase(), i)),
            &bound(&iss),
            HOST,
            NOW
        ),
        Err(EvidenceError::Rejected("nostr_pubkey is not lowercase hex"))
    );
    assert!(
        evidence::verify(&reg, &iss.sign(Alg::EdDsa, &claims("u", PK, i)), &bound(&iss), HOST, NOW).is_ok()
    );
    assert_eq!(
        evidence::verify(
            &reg,
            &iss.sign(Alg::EdDsa, &claims("u", PK, "https://unknown.test")),
            &bound(&iss),
            HOST,
            NOW
        ),
        Err(EvidenceError::Rejected("issuer is not trusted"))
    );
}

#[test]
fn an_issuer_without_fresh_keys_is_unavailable() {
    let iss = TestIssuer::new("https://issuer.test");
    let reg = registry(&iss);
    let remote = TestIssuer::new("https://remote.test");
    // Never fetched (the uri is unreachable): fail closed as unavailable, not as forged.
    let jws = remote.evidence(Alg::Es256, HOST, PK, NOW + 60);
    assert_eq!(evidence::verify(&reg, &jws, &bound(&iss), HOST, NOW), Err(EvidenceError::Unavailable));
    assert_eq!(evidence::bearer_value("Bearer abc"), Some("abc"));
    assert_eq!(evidence::bearer_value("bearer  abc "), Some("abc"));
    assert_eq!(evidence::bearer_value("Nostr abc"), None);
    assert_eq!(evidence::bearer_value("Bearer "), None);
}

fn base64_json(v: &serde_json::Value) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}
