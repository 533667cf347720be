//! How a service reaches Redis: a `redis://` or `rediss://` URL and, for `rediss://` with a private
//! certificate authority, a CA file.

use std::path::PathBuf;
use std::sync::Arc;

use buzz_telemetry::settings::{existing_file, trimmed};
use fred::prelude::*;
use fred::rustls::pki_types::pem::PemObject as _;
use fred::rustls::pki_types::CertificateDer;
use fred::rustls::{ClientConfig, RootCertStore};
use fred::types::config::TlsConnector;

/// Where and how to connect to Redis, read once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// `redis://` or `rediss://` (TLS), with credentials in the URL when the server wants them.
    pub url: String,
    /// PEM bundle of the CA that signed the server certificate (`REDIS_CA_FILE`), instead of the
    /// system roots; only meaningful with `rediss://`.
    pub ca_file: Option<PathBuf>,
}

impl RedisConfig {
    /// A plain URL, no CA file (tests, `buzz dev`).
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), ca_file: None }
    }
}

/// The Redis settings of the services that use it (flattened into their clap `Parser`):
/// `REDIS_URL` and `REDIS_CA_FILE`.
#[derive(Debug, Clone, clap::Args)]
pub struct RedisArgs {
    /// Redis URL; `rediss://` for TLS, credentials in the URL
    #[arg(long, env = "REDIS_URL", hide_env_values = true, default_value = "redis://127.0.0.1:6379", value_parser = trimmed::<String>)]
    redis_url: String,
    /// PEM CA bundle for a `rediss://` server instead of the system roots
    #[arg(long, env = "REDIS_CA_FILE", value_parser = existing_file)]
    redis_ca_file: Option<PathBuf>,
}

impl TryFrom<RedisArgs> for RedisConfig {
    type Error = String;

    /// A CA file with a plain `redis://` URL is refused: the operator asked for a verified server
    /// and would not get one.
    fn try_from(a: RedisArgs) -> Result<Self, String> {
        if a.redis_ca_file.is_some() && !a.redis_url.starts_with("rediss://") {
            return Err("REDIS_CA_FILE is set but REDIS_URL does not start with rediss://".to_owned());
        }
        Ok(Self { url: a.redis_url, ca_file: a.redis_ca_file })
    }
}

/// Connects a Redis pool; `rediss://` uses TLS with the system roots, or only `ca_file` when set.
pub async fn connect_redis(config: &RedisConfig, size: usize) -> Result<Pool, fred::error::Error> {
    let mut fred_config = Config::from_url(&config.url)?;
    if let Some(path) = &config.ca_file {
        fred_config.tls = Some(tls_with_ca(path)?.into());
    }
    let pool = Builder::from_config(fred_config)
        .with_connection_config(|c| {
            c.connection_timeout = std::time::Duration::from_secs(3);
        })
        .set_policy(ReconnectPolicy::new_exponential(0, 100, 2_000, 2))
        .build_pool(size)?;
    pool.init().await?;
    Ok(pool)
}

fn tls_with_ca(path: &std::path::Path) -> Result<TlsConnector, fred::error::Error> {
    let tls_error = |msg: String| fred::error::Error::new(fred::error::ErrorKind::Tls, msg);
    let mut roots = RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_error(format!("cannot read REDIS_CA_FILE {}: {e}", path.display())))?;
    for cert in certs {
        let cert = cert.map_err(|e| tls_error(format!("bad certificate in {}: {e}", path.display())))?;
        roots.add(cert).map_err(|e| tls_error(format!("bad certificate in {}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(tls_error(format!("no certificate in {}", path.display())));
    }
    // ring explicitly: sqlx, fred and async-nats all build rustls on ring.
    let provider = Arc::new(fred::rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config.into())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Args {
        #[command(flatten)]
        redis: RedisArgs,
    }

    fn config(args: &[&str]) -> Result<RedisConfig, String> {
        let argv = std::iter::once("t").chain(args.iter().copied());
        let a: Args = buzz_telemetry::settings::parse(argv).map_err(|e| e.to_string())?;
        RedisConfig::try_from(a.redis)
    }

    #[test]
    fn a_ca_file_needs_a_rediss_url_and_an_existing_file() {
        let plain = config(&["--redis-url", "redis://r:6379", "--redis-ca-file", "/etc/hostname"]);
        assert!(plain.unwrap_err().contains("rediss://"));
        let missing = config(&["--redis-url", "rediss://r:6379", "--redis-ca-file", "/nonexistent/ca.pem"]);
        assert!(missing.unwrap_err().contains("/nonexistent/ca.pem"));
        let tls = config(&["--redis-url", "rediss://r:6379", "--redis-ca-file", "/etc/hostname"]).unwrap();
        assert_eq!(tls.ca_file, Some("/etc/hostname".into()));
        assert_eq!(config(&["--redis-url", "redis://r:6379"]).unwrap(), RedisConfig::new("redis://r:6379"));
    }
}
