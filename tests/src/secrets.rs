//! The secrets a test run used, and a scanner that finds any of them in captured logs and spans
//! (`tests/secrets_in_logs.rs`): secret keys as hex and as NIP-19 `nsec`, bearer tokens, NIP-98
//! `Authorization` values and the signatures inside them, NIP-FI evidence.

use base64::Engine as _;
use buzz_core::Keys;

/// One secret: what it is (named in a failure) and its text as it would appear in a log.
#[derive(Debug, Clone)]
pub struct Secret {
    /// What it is, e.g. "relay secret key (nsec)".
    pub label: String,
    /// The text searched for.
    pub value: String,
}

impl Secret {
    /// A secret named `label`.
    #[must_use]
    pub fn new(label: impl Into<String>, value: impl Into<String>) -> Self {
        Self { label: label.into(), value: value.into() }
    }

    /// A key's secret, as hex and as `nsec`.
    #[must_use]
    pub fn key(label: &str, keys: &Keys) -> Vec<Self> {
        vec![
            Self::new(format!("{label} secret key (hex)"), keys.secret_hex()),
            Self::new(format!("{label} secret key (nsec)"), nsec(keys)),
        ]
    }

    /// A bearer token: the whole string and its secret part after the `buzz_` prefix.
    #[must_use]
    pub fn token(label: &str, token: &str) -> Vec<Self> {
        let mut out = vec![Self::new(format!("{label} token"), token)];
        if let Some(rest) = token.strip_prefix("buzz_") {
            out.push(Self::new(format!("{label} token (secret part)"), rest));
        }
        out
    }

    /// A NIP-98 `Authorization: Nostr <base64 event>` value: the base64 and the event's signature
    /// (a replayable credential for its URL until it expires).
    #[must_use]
    pub fn nip98(label: &str, header: &str) -> Vec<Self> {
        let b64 = header.strip_prefix("Nostr ").unwrap_or(header);
        let mut out = vec![Self::new(format!("{label} NIP-98 authorization"), b64)];
        let sig = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok())
            .and_then(|event| event["sig"].as_str().map(str::to_owned));
        out.extend(sig.map(|sig| Self::new(format!("{label} NIP-98 event signature"), sig)));
        out
    }

    /// NIP-FI evidence (a compact JWS, with or without `Bearer `): the whole and its signature.
    #[must_use]
    pub fn evidence(label: &str, evidence: &str) -> Vec<Self> {
        let jws = evidence.strip_prefix("Bearer ").unwrap_or(evidence);
        let mut out = vec![Self::new(format!("{label} FI evidence"), jws)];
        if let Some(sig) = jws.rsplit('.').next().filter(|s| s.len() >= 16) {
            out.push(Self::new(format!("{label} FI evidence signature"), sig));
        }
        out
    }
}

/// The labels of the secrets that occur in `text`.
///
/// # Panics
/// When a secret is shorter than 16 characters: too short to be one, and it would match by chance.
#[must_use]
pub fn found<'a>(text: &str, secrets: &'a [Secret]) -> Vec<&'a str> {
    secrets
        .iter()
        .inspect(|s| assert!(s.value.len() >= 16, "{}: not a secret: {:?}", s.label, s.value))
        .filter(|s| text.contains(&s.value))
        .map(|s| s.label.as_str())
        .collect()
}

const CHARSET: &[u8; 32] = b"qpzry9x8gf2tvdw0s3jn54khce6mua7l";

fn polymod(values: &[u8]) -> u32 {
    const GEN: [u32; 5] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3];
    let mut chk: u32 = 1;
    for v in values {
        let top = chk >> 25;
        chk = ((chk & 0x01ff_ffff) << 5) ^ u32::from(*v);
        for (i, g) in GEN.iter().enumerate() {
            if (top >> i) & 1 == 1 {
                chk ^= g;
            }
        }
    }
    chk
}

/// The low five bits of `x`.
fn five(x: u32) -> u8 {
    u8::try_from(x & 31).unwrap_or_default()
}

/// NIP-19 `nsec1...` (bech32) of a secret key, as clients show it.
#[must_use]
pub fn nsec(keys: &Keys) -> String {
    let bytes = hex::decode(keys.secret_hex()).unwrap_or_default();
    let mut data = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in bytes {
        acc = ((acc << 8) | u32::from(b)) & 0x1fff;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            data.push(five(acc >> bits));
        }
    }
    if bits > 0 {
        data.push(five(acc << (5 - bits)));
    }
    let hrp = "nsec";
    let mut values: Vec<u8> = hrp.bytes().map(|c| c >> 5).collect();
    values.push(0);
    values.extend(hrp.bytes().map(|c| c & 31));
    values.extend(&data);
    values.extend([0u8; 6]);
    let checksum = polymod(&values) ^ 1;
    let tail = (0..6u32).map(|i| five(checksum >> (5 * (5 - i))));
    let mut out = format!("{hrp}1");
    out.extend(data.into_iter().chain(tail).map(|d| char::from(CHARSET[usize::from(d)])));
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn nsec_is_nip19s() {
        // NIP-19's own example.
        let keys = Keys::from_secret_hex("67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa")
            .unwrap();
        assert_eq!(nsec(&keys), "nsec1vl029mgpspedva04g90vltkh6fvh240zqtv9k0t9af8935ke9laqsnlfe5");
    }

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The scanner can fail: a secret logged by mistake, as a field, inside a span's fields or in a
    /// message, in a JSON log line, is found; the other secrets are not.
    #[test]
    fn a_deliberately_logged_secret_is_found_in_json_logs_and_span_fields() {
        let (leaked, kept) = (Keys::generate(), Keys::generate());
        let header = buzz_core::nip98::authorization_header(&leaked, "POST", "https://x.test/api", b"{}");
        let token = format!("buzz_{}", "Ab9".repeat(14));
        let mut secrets = Secret::key("leaked", &leaked);
        secrets.extend(Secret::key("kept", &kept));
        secrets.extend(Secret::nip98("leaked", &header));
        secrets.extend(Secret::token("leaked", &token));
        let logs = Buffer::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::NEW)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", authorization = %header);
            let _in = span.enter();
            tracing::info!(key = %leaked.secret_hex(), "signing");
            tracing::warn!("refused {token} for {}", nsec(&leaked));
            let b64 = header.trim_start_matches("Nostr ");
            let event = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
            tracing::info!(event = %String::from_utf8_lossy(&event), "the decoded authorization");
        });
        let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
        let mut hits = found(&text, &secrets);
        hits.sort_unstable();
        assert_eq!(
            hits,
            [
                "leaked NIP-98 authorization",
                "leaked NIP-98 event signature",
                "leaked secret key (hex)",
                "leaked secret key (nsec)",
                "leaked token",
                "leaked token (secret part)",
            ]
        );
    }
}
