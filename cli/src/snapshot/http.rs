//! The relay side of a snapshot client: where the relay is (WebSocket URL, optional `Host`
//! override) and signed `POST /query` snapshot actions with their bounded errors.

use buzz_core::Keys;
use serde_json::{json, Value};

use crate::snapshot::error::SnapshotError;

/// A relay: its WebSocket URL and the host that names the community.
#[derive(Debug, Clone)]
pub struct Target {
    /// `ws` or `wss`.
    pub scheme: String,
    /// `host[:port]` the sockets and requests connect to.
    pub authority: String,
    /// The community host (the `Host` header, NIP-42 `relay` and NIP-98 `u`).
    pub host: String,
}

impl Target {
    /// Parses `ws://host[:port][/]` or `wss://...`; `host` overrides the community host (a
    /// gateway reached by address, as in tests).
    pub fn parse(url: &str, host: Option<&str>) -> Result<Self, SnapshotError> {
        let bad = || {
            SnapshotError::Usage(format!("the url must be ws://host[:port] or wss://host[:port], got {url}"))
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "ws" && scheme != "wss" {
            return Err(bad());
        }
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(bad());
        }
        if scheme == "wss" {
            return Err(SnapshotError::Usage("wss:// needs TLS, which this build of buzz does not include; use ws:// behind a local TLS proxy".into()));
        }
        let host = host.unwrap_or(authority).to_owned();
        Ok(Self { scheme, authority: authority.to_owned(), host })
    }

    fn query_url(&self) -> String {
        format!("http://{}/query", self.authority)
    }

    /// The relay URL the NIP-42 `relay` tag names.
    #[must_use]
    pub fn relay_url(&self) -> String {
        format!("{}://{}", self.scheme, self.host)
    }
}

/// Signed snapshot actions against one relay as one reader.
pub struct Relay {
    /// The relay (WebSocket URL and host; `POST /query` goes to the same host).
    pub target: Target,
    /// The reader's key, signing NIP-98.
    pub keys: Keys,
    http: reqwest::Client,
}

impl Relay {
    /// A client for `target` signing as `keys`.
    #[must_use]
    pub fn new(target: Target, keys: Keys) -> Self {
        Self { target, keys, http: reqwest::Client::new() }
    }

    /// One snapshot action (`filter` is the single filter of the request body). A non-2xx
    /// answer is [`SnapshotError::Relay`] with its status and code.
    pub async fn call(&self, filter: Value) -> Result<Value, SnapshotError> {
        let body = json!([filter]).to_string().into_bytes();
        let signed_url = format!("https://{}/query", self.target.host);
        let auth = buzz_core::nip98::authorization_header(&self.keys, "POST", &signed_url, &body);
        let res = self
            .http
            .post(self.target.query_url())
            .header("host", &self.target.host)
            .header("authorization", auth)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| SnapshotError::Transport(format!("post /query failed: {e}")))?;
        let status = res.status().as_u16();
        let text = res
            .text()
            .await
            .map_err(|e| SnapshotError::Transport(format!("reading the /query answer failed: {e}")))?;
        let value: Option<Value> = serde_json::from_str(&text).ok();
        if !(200..300).contains(&status) {
            let code = value
                .as_ref()
                .and_then(|v| v["code"].as_str().or_else(|| v["error"].as_str()))
                .unwrap_or("unknown")
                .to_owned();
            return Err(SnapshotError::Relay { status, code });
        }
        value.ok_or_else(|| SnapshotError::Protocol("the /query answer is not json".into()))
    }
}
