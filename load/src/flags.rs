//! The flags both parts of the tool take, defined once and flattened into each command
//! (`#[command(flatten)]`): the relay to load ([`RelayFlags`]) and the community to load it in
//! ([`CommunityFlags`]), with the checks every command applies to them.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use buzz_core::Keys;
use clap::ArgAction;
use serde::Serialize;

/// Longest run the tool accepts, so that every run stops by itself.
pub const MAX_DURATION_SECS: f64 = 3600.0;

/// The relay to load and how long to wait for it.
#[derive(Debug, Clone, clap::Args)]
pub struct RelayFlags {
    /// Relay (gateway) WebSocket URL (ws:// only). Repeat to spread connections round-robin over
    /// several gateways serving the same community; only these addresses are contacted.
    #[arg(long = "url", value_name = "URL", action = ArgAction::Append,
          default_value = "ws://127.0.0.1:7777")]
    pub urls: Vec<String>,

    /// Fixed Host header for every WebSocket and HTTP request (buzz-relay binds the community by
    /// Host). Default: each URL's own host:port.
    #[arg(long, value_name = "HOST")]
    pub host_header: Option<String>,

    /// Seconds allowed for each connect, AUTH, EOSE wait and HTTP request.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub connect_timeout: f64,
}

impl RelayFlags {
    /// The `--url`s as targets, each addressed with `--host-header` when given.
    pub fn targets(&self) -> Result<Vec<Target>> {
        if self.urls.is_empty() {
            bail!("at least one --url is needed");
        }
        targets(&self.urls, self.host_header.as_deref())
    }

    /// `--connect-timeout`, checked.
    pub fn connect_timeout(&self) -> Result<Duration> {
        secs("connect-timeout", self.connect_timeout)
    }
}

/// The buzz-relay community to load: its owner's key, or the operator API to provision one with.
#[derive(Debug, Clone, clap::Args)]
pub struct CommunityFlags {
    /// buzz-relay: the community owner's secret key (64 hex); adds the members and creates the
    /// load channel. Generated (and printed) when --operator-url is given without it.
    #[arg(long, value_name = "HEX", env = "BUZZ_LOAD_OWNER_SECRET", hide_env_values = true)]
    pub owner_secret: Option<String>,

    /// buzz-relay: operator API base URL (e.g. http://127.0.0.1:9000); when given, a new
    /// community for the Host is provisioned first with `POST <operator-url>/operator/communities`.
    #[arg(long, value_name = "URL")]
    pub operator_url: Option<String>,

    /// buzz-relay: the operator's secret key (64 hex) for NIP-98 auth on the operator API.
    #[arg(long, value_name = "HEX", env = "BUZZ_LOAD_OPERATOR_SECRET", hide_env_values = true)]
    pub operator_secret: Option<String>,
}

impl CommunityFlags {
    /// `--operator-url` checked (`http://host[:port]`, without a trailing `/`), and only with
    /// `--operator-secret`.
    pub fn operator_url(&self) -> Result<Option<String>> {
        let url = self.operator_url.as_deref().map(check_http_url).transpose()?;
        if url.is_some() && self.operator_secret.is_none() {
            bail!("--operator-url needs --operator-secret");
        }
        Ok(url)
    }

    /// Whether a community can be reached at all: an owner key, or an operator to provision one.
    #[must_use]
    pub fn names_a_community(&self) -> bool {
        self.owner_secret.is_some() || self.operator_url.is_some()
    }

    /// Checks that the secret keys given are 64-hex keys.
    pub fn check_keys(&self) -> Result<()> {
        for (name, secret) in
            [("owner-secret", &self.owner_secret), ("operator-secret", &self.operator_secret)]
        {
            if secret.as_deref().is_some_and(|s| Keys::from_secret_hex(s.trim()).is_none()) {
                bail!("--{name} is not a valid 64-hex secret key");
            }
        }
        Ok(())
    }

    /// The owner key of `--owner-secret`, or a fresh one (`true`: generated, so its secret must
    /// be shown for the community to stay usable).
    pub fn owner(&self) -> Result<(Keys, bool)> {
        match &self.owner_secret {
            Some(s) => Ok((secret_key("--owner-secret", s)?, false)),
            None => Ok((Keys::generate(), true)),
        }
    }

    /// The operator key of `--operator-secret`.
    pub fn operator(&self) -> Result<Keys> {
        secret_key("--operator-secret", self.operator_secret.as_deref().unwrap_or(""))
    }
}

/// One place to connect to: the socket URL and the Host header to send there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Target {
    /// `ws://authority/path` as given.
    pub url: String,
    /// The URL's `host[:port]`: where the socket goes.
    pub authority: String,
    /// The Host header value (and the host in AUTH `relay` tags and NIP-98 `u` tags).
    pub host: String,
}

impl Target {
    /// `http://<authority>` for HTTP requests to the same gateway.
    #[must_use]
    pub fn http_base(&self) -> String {
        format!("http://{}", self.authority)
    }
}

/// Checks a seconds flag: positive, finite, at most an hour.
pub fn secs(name: &str, v: f64) -> Result<Duration> {
    if !v.is_finite() || v <= 0.0 || v > MAX_DURATION_SECS {
        bail!("--{name} must be > 0 and <= {MAX_DURATION_SECS} seconds, got {v}");
    }
    Ok(Duration::from_secs_f64(v))
}

/// The key of a secret-key flag (64 hex).
pub fn secret_key(name: &str, hex: &str) -> Result<Keys> {
    Keys::from_secret_hex(hex.trim()).ok_or_else(|| anyhow!("{name} is not a valid 64-hex secret key"))
}

/// Splits `ws://authority/path` and returns the authority. Only plain `ws://` is supported.
pub fn ws_authority(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("ws://")
        .with_context(|| format!("unsupported URL {url:?}: only ws://host[:port][/path] is supported"))?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.is_empty() || authority.contains(['@', ' ']) {
        bail!("bad host in URL {url:?}");
    }
    Ok(authority.to_string())
}

fn check_http_url(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("--operator-url must be http://host[:port], got {url:?}"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.contains(['@', ' ']) {
        bail!("bad --operator-url {url:?}");
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// The relays of `urls` (each `ws://`), all addressed with `host_header` when given.
pub fn targets(urls: &[String], host_header: Option<&str>) -> Result<Vec<Target>> {
    if let Some(h) = host_header {
        if h.is_empty() || h.contains(['/', '@', ' ']) {
            bail!("bad --host-header {h:?}");
        }
    }
    urls.iter()
        .map(|u| {
            let authority = ws_authority(u)?;
            let host = host_header.map_or_else(|| authority.clone(), str::to_owned);
            Ok(Target { url: u.clone(), authority, host })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authority_parsing() -> Result<()> {
        assert_eq!(ws_authority("ws://localhost:7777")?, "localhost:7777");
        assert_eq!(ws_authority("ws://[::1]:7777/x?y")?, "[::1]:7777");
        assert!(ws_authority("ws:///x").is_err());
        Ok(())
    }
}
