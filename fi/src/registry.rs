//! The issuer trust registry: which issuers' evidence is trusted and with which keys.
//!
//! Inline keys never expire. A `jwks_uri` issuer is fetched at start and every refresh period;
//! a failed fetch keeps the last keys, but only until `max_age` after the last successful fetch.
//! Past that hard deadline (or before the first success) the issuer is unavailable and its
//! evidence fails closed.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// One entry of `BUZZ_NIP_FI_ISSUERS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerConfig {
    /// The issuer URL evidence names (`iss`).
    pub issuer: String,
    /// Where its keys come from.
    pub source: KeySource,
}

/// An issuer's keys: given inline or fetched from a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// An inline JWKS (`"jwks"`).
    Inline(Jwks),
    /// A `jwks_uri`, fetched every `BUZZ_NIP_FI_JWKS_REFRESH_SECS`.
    Uri(String),
}

/// A JSON Web Key Set, keeping only the key types NIP-FI evidence may use (ES256, EdDSA).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Jwks {
    /// The usable keys (P-256 or Ed25519); others are dropped.
    pub keys: Vec<Jwk>,
}

/// One JSON Web Key, as much of it as verification needs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Jwk {
    /// Key type (`EC` or `OKP`).
    pub kty: String,
    /// Curve (`P-256` or `Ed25519`).
    pub crv: String,
    /// The public key's x coordinate (base64url).
    pub x: String,
    /// The public key's y coordinate (base64url; EC keys only).
    #[serde(default)]
    pub y: Option<String>,
    /// Key id (`kid`), when the JWKS gives one.
    #[serde(default)]
    pub kid: Option<String>,
}

impl Jwks {
    /// Parses a JWKS document; keys of other types are skipped, and a set without one usable
    /// key is an error.
    pub fn parse(value: &serde_json::Value) -> Result<Self, String> {
        let keys = value
            .get("keys")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| "jwks must be an object with a keys array".to_owned())?;
        let keys: Vec<Jwk> = keys
            .iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .filter(|k| {
                (k.kty == "EC" && k.crv == "P-256" && k.y.is_some()) || (k.kty == "OKP" && k.crv == "Ed25519")
            })
            .collect();
        if keys.is_empty() {
            return Err("jwks has no P-256 (ES256) or Ed25519 (EdDSA) key".into());
        }
        Ok(Self { keys })
    }
}

/// Parses `BUZZ_NIP_FI_ISSUERS`: `[{"issuer": "...", "jwks": {...}} | {"issuer": "...",
/// "jwks_uri": "https://..."}]`, issuers unique.
pub fn parse_issuers(raw: &str) -> Result<Vec<IssuerConfig>, String> {
    let value: serde_json::Value = serde_json::from_str(raw).map_err(|_| "not valid JSON".to_owned())?;
    let items = value.as_array().ok_or_else(|| "must be a JSON list".to_owned())?;
    let mut out: Vec<IssuerConfig> = Vec::new();
    for item in items {
        let obj = item.as_object().ok_or_else(|| "each entry must be an object".to_owned())?;
        if let Some(k) = obj.keys().find(|k| !["issuer", "jwks", "jwks_uri"].contains(&k.as_str())) {
            return Err(format!("unknown field {k:?} (expected issuer, jwks, jwks_uri)"));
        }
        let issuer = obj
            .get("issuer")
            .and_then(serde_json::Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| "each entry needs a non-empty issuer".to_owned())?;
        let source = match (obj.get("jwks"), obj.get("jwks_uri").and_then(serde_json::Value::as_str)) {
            (Some(jwks), None) => KeySource::Inline(Jwks::parse(jwks).map_err(|e| format!("{issuer}: {e}"))?),
            (None, Some(uri)) if uri.starts_with("https://") || uri.starts_with("http://") => {
                KeySource::Uri(uri.to_owned())
            }
            _ => return Err(format!("{issuer}: give exactly one of jwks or jwks_uri (an http(s) URL)")),
        };
        if out.iter().any(|c| c.issuer == issuer) {
            return Err(format!("{issuer} is listed twice"));
        }
        out.push(IssuerConfig { issuer: issuer.to_owned(), source });
    }
    Ok(out)
}

/// Why an issuer's keys cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// The issuer is not configured.
    #[error("issuer is not in the trust registry")]
    Unknown,
    /// The issuer's remote keys were never fetched, or not within `BUZZ_NIP_FI_JWKS_MAX_AGE_SECS`
    /// (fails closed).
    #[error("issuer keys are unavailable")]
    Unavailable,
}

enum Entry {
    Inline(Arc<Jwks>),
    Remote { uri: String, last: RwLock<Option<(Arc<Jwks>, Instant)>> },
}

/// The issuer trust registry built from `BUZZ_NIP_FI_ISSUERS`: inline keys, or remote keys
/// refreshed with a hard staleness deadline.
pub struct Registry {
    entries: HashMap<String, Entry>,
    max_age: Duration,
    http: reqwest::Client,
}

impl Registry {
    /// A registry of `configs`; remote keys older than `max_age` fail closed, each fetch waits at
    /// most `fetch_timeout`.
    #[must_use]
    pub fn new(configs: &[IssuerConfig], max_age: Duration, fetch_timeout: Duration) -> Self {
        let entries = configs
            .iter()
            .map(|c| {
                let entry = match &c.source {
                    KeySource::Inline(jwks) => Entry::Inline(Arc::new(jwks.clone())),
                    KeySource::Uri(uri) => Entry::Remote { uri: uri.clone(), last: RwLock::new(None) },
                };
                (c.issuer.clone(), entry)
            })
            .collect();
        let http = reqwest::Client::builder().timeout(fetch_timeout).build().unwrap_or_default();
        Self { entries, max_age, http }
    }

    /// The issuer's usable keys, or why there are none.
    pub fn keys(&self, issuer: &str) -> Result<Arc<Jwks>, TrustError> {
        match self.entries.get(issuer) {
            None => Err(TrustError::Unknown),
            Some(Entry::Inline(jwks)) => Ok(jwks.clone()),
            Some(Entry::Remote { last, .. }) => {
                let guard = last.read().map_err(|_| TrustError::Unavailable)?;
                match &*guard {
                    Some((jwks, at)) if at.elapsed() <= self.max_age => Ok(jwks.clone()),
                    _ => Err(TrustError::Unavailable),
                }
            }
        }
    }

    /// Fetches every `jwks_uri` once; a failure keeps the previous keys (until their deadline).
    pub async fn refresh(&self) {
        for (issuer, entry) in &self.entries {
            let Entry::Remote { uri, last } = entry else { continue };
            match self.fetch(uri).await {
                Ok(jwks) => {
                    if let Ok(mut guard) = last.write() {
                        *guard = Some((Arc::new(jwks), Instant::now()));
                    }
                }
                Err(e) => tracing::warn!(%issuer, error = %e, "jwks refresh failed"),
            }
        }
    }

    async fn fetch(&self, uri: &str) -> Result<Jwks, String> {
        let res = self.http.get(uri).send().await.map_err(|e| format!("request failed: {e}"))?;
        if !res.status().is_success() {
            return Err(format!("http {}", res.status()));
        }
        let value: serde_json::Value = res.json().await.map_err(|_| "body is not json".to_owned())?;
        Jwks::parse(&value)
    }

    /// Whether any issuer needs fetching.
    #[must_use]
    pub fn has_remote(&self) -> bool {
        self.entries.values().any(|e| matches!(e, Entry::Remote { .. }))
    }

    /// Refreshes now and then every `every` until `shutdown`.
    pub fn spawn_refresh(self: &Arc<Self>, every: Duration, shutdown: CancellationToken) {
        if !self.has_remote() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                this.refresh().await;
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn issuers_parse_strictly() {
        let ok = r#"[{"issuer":"https://a","jwks":{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AA"}]}},
                     {"issuer":"https://b","jwks_uri":"https://b/jwks"}]"#;
        let parsed = parse_issuers(ok).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].source, KeySource::Uri("https://b/jwks".into()));
        assert!(parse_issuers("{}").is_err());
        assert!(parse_issuers(r#"[{"issuer":"x"}]"#).is_err());
        assert!(parse_issuers(r#"[{"issuer":"x","jwks_uri":"https://x","jwks":{}}]"#).is_err());
        assert!(parse_issuers(r#"[{"issuer":"x","jwks":{"keys":[{"kty":"RSA","crv":"","x":""}]}}]"#).is_err());
        assert!(parse_issuers(r#"[{"issuer":"x","jwks_uri":"https://x","extra":1}]"#).is_err());
        let twice = r#"[{"issuer":"x","jwks_uri":"https://x"},{"issuer":"x","jwks_uri":"https://y"}]"#;
        assert!(parse_issuers(twice).is_err());
    }
}
