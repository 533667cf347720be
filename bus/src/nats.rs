//! How a service reaches NATS: a `nats://` or `tls://` URL, an optional CA file for a private
//! certificate authority and an optional credentials file (user JWT + nkey seed).

use std::path::PathBuf;
use std::time::Duration;

/// Where and how to connect to NATS, read once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsConfig {
    /// One server URL or a comma-separated list; `tls://` requires TLS.
    pub url: String,
    /// PEM bundle of the CA that signed the server certificate (`NATS_CA_FILE`); setting it requires TLS.
    pub ca_file: Option<PathBuf>,
    /// NATS credentials file (`NATS_CREDS_FILE`), for servers using decentralised JWT auth.
    pub creds_file: Option<PathBuf>,
}

/// A setting that cannot work, named so that start-up can say which.
#[derive(Debug, thiserror::Error)]
#[error("invalid value for {name}: {reason}")]
pub struct SettingError {
    pub name: &'static str,
    pub reason: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read NATS credentials file {path}: {source}")]
    Credentials { path: String, source: std::io::Error },
    #[error("cannot connect to NATS: {0}")]
    Nats(#[from] async_nats::ConnectError),
}

impl NatsConfig {
    /// A plain URL, no CA or credentials file (tests, `buzz dev`).
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), ca_file: None, creds_file: None }
    }

    /// `NATS_URL` (default `nats://127.0.0.1:4222`), `NATS_CA_FILE`, `NATS_CREDS_FILE`. A file that is
    /// named but missing stops start-up here rather than at the first reconnect.
    pub fn from_env() -> Result<Self, SettingError> {
        let url = env_value("NATS_URL").unwrap_or_else(|| "nats://127.0.0.1:4222".to_owned());
        Ok(Self {
            url,
            ca_file: existing_file("NATS_CA_FILE")?,
            creds_file: existing_file("NATS_CREDS_FILE")?,
        })
    }

    /// True when the connection must be encrypted: a `tls://` URL or a CA file.
    #[must_use]
    pub fn requires_tls(&self) -> bool {
        self.ca_file.is_some() || self.url.split(',').any(|u| u.trim().starts_with("tls://"))
    }
}

fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// The path in `name`, which must name an existing file when set.
pub fn existing_file(name: &'static str) -> Result<Option<PathBuf>, SettingError> {
    let Some(value) = env_value(name) else { return Ok(None) };
    let path = PathBuf::from(&value);
    if !path.is_file() {
        return Err(SettingError { name, reason: format!("{value:?} is not a readable file") });
    }
    Ok(Some(path))
}

/// Connects with a name that shows in server monitoring, over TLS when [`NatsConfig::requires_tls`].
pub async fn connect(config: &NatsConfig, name: &str) -> Result<async_nats::Client, ConnectError> {
    let mut options = async_nats::ConnectOptions::new().name(name).connection_timeout(Duration::from_secs(3));
    if let Some(path) = &config.creds_file {
        options = options
            .credentials_file(path)
            .await
            .map_err(|source| ConnectError::Credentials { path: path.display().to_string(), source })?;
    }
    if let Some(ca) = &config.ca_file {
        options = options.add_root_certificates(ca.clone());
    }
    if config.requires_tls() {
        options = options.require_tls(true);
    }
    Ok(options.connect(config.url.as_str()).await?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_tls_url_or_a_ca_file_requires_tls() {
        assert!(!NatsConfig::new("nats://a:4222").requires_tls());
        assert!(NatsConfig::new("nats://a:4222, tls://b:4222").requires_tls());
        let with_ca = NatsConfig { ca_file: Some("/ca.pem".into()), ..NatsConfig::new("nats://a:4222") };
        assert!(with_ca.requires_tls());
    }

    #[test]
    fn a_missing_file_names_the_variable() {
        // Unique name: tests in this crate share one process.
        std::env::set_var("BUZZ_TEST_NATS_MISSING_FILE", "/nonexistent/ca.pem");
        let err = existing_file("BUZZ_TEST_NATS_MISSING_FILE").unwrap_err().to_string();
        assert!(err.contains("BUZZ_TEST_NATS_MISSING_FILE") && err.contains("/nonexistent/ca.pem"), "{err}");
        assert_eq!(existing_file("BUZZ_TEST_NATS_UNSET_FILE").unwrap(), None);
    }
}
