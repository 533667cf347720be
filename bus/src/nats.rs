//! How a service reaches NATS: a `nats://` or `tls://` URL, an optional CA file for a private
//! certificate authority and an optional credentials file (user JWT + nkey seed).

use std::path::PathBuf;
use std::time::Duration;

use buzz_telemetry::settings::{existing_file, trimmed};

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

/// Why [`connect`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The credentials file could not be read.
    #[error("cannot read NATS credentials file {path}: {source}")]
    Credentials {
        /// The file named by `NATS_CREDS_FILE`.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The server refused or could not be reached.
    #[error("cannot connect to NATS: {0}")]
    Nats(#[from] async_nats::ConnectError),
}

impl NatsConfig {
    /// A plain URL, no CA or credentials file (tests, `buzz dev`).
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), ca_file: None, creds_file: None }
    }

    /// True when the connection must be encrypted: a `tls://` URL or a CA file.
    #[must_use]
    pub fn requires_tls(&self) -> bool {
        self.ca_file.is_some() || self.url.split(',').any(|u| u.trim().starts_with("tls://"))
    }
}

/// The NATS settings every service takes (flattened into its clap `Parser`): `NATS_URL`,
/// `NATS_CA_FILE`, `NATS_CREDS_FILE`. A file that is named but missing stops start-up here rather
/// than at the first reconnect.
#[derive(Debug, Clone, clap::Args)]
pub struct NatsArgs {
    /// NATS server URL, or a comma-separated list; `tls://` requires TLS
    #[arg(long, env = "NATS_URL", hide_env_values = true, default_value = "nats://127.0.0.1:4222", value_parser = trimmed::<String>)]
    nats_url: String,
    /// PEM CA bundle for the NATS server certificate; setting it requires TLS
    #[arg(long, env = "NATS_CA_FILE", value_parser = existing_file)]
    nats_ca_file: Option<PathBuf>,
    /// NATS credentials file (user JWT + nkey seed)
    #[arg(long, env = "NATS_CREDS_FILE", value_parser = existing_file)]
    nats_creds_file: Option<PathBuf>,
}

impl From<NatsArgs> for NatsConfig {
    fn from(a: NatsArgs) -> Self {
        Self { url: a.nats_url, ca_file: a.nats_ca_file, creds_file: a.nats_creds_file }
    }
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

    #[derive(Debug, clap::Parser)]
    struct Args {
        #[command(flatten)]
        nats: NatsArgs,
    }

    #[test]
    fn nats_settings_are_trimmed_and_a_missing_file_is_refused() {
        let a: Args = buzz_telemetry::settings::parse(["t", "--nats-url", " nats://a:4222 "]).unwrap();
        assert_eq!(NatsConfig::from(a.nats), NatsConfig::new("nats://a:4222"));
        let a: Args = buzz_telemetry::settings::parse(["t", "--nats-url", "tls://n:4222"]).unwrap();
        assert!(NatsConfig::from(a.nats).requires_tls());
        let err = buzz_telemetry::settings::parse::<Args>(["t", "--nats-ca-file", "/nonexistent/ca.pem"]);
        let err = err.unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ca.pem") && err.contains("not a readable file"), "{err}");
    }
}
