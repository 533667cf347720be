//! How a service reaches Redis: a `redis://` or `rediss://` URL and, for `rediss://` with a private
//! certificate authority, a CA file.

use std::path::PathBuf;
use std::sync::Arc;

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
    #[must_use]
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), ca_file: None }
    }

    /// `REDIS_URL` (default `redis://127.0.0.1:6379`) and `REDIS_CA_FILE`. A CA file with a plain
    /// `redis://` URL is refused: the operator asked for a verified server and would not get one.
    pub fn from_env() -> Result<Self, String> {
        let var = |n: &str| std::env::var(n).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        Self::from_values(var("REDIS_URL"), var("REDIS_CA_FILE"))
    }

    fn from_values(url: Option<String>, ca_file: Option<String>) -> Result<Self, String> {
        let url = url.unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
        let ca_file = ca_file.map(PathBuf::from);
        if let Some(path) = &ca_file {
            if !url.starts_with("rediss://") {
                return Err("REDIS_CA_FILE is set but REDIS_URL does not start with rediss://".to_owned());
            }
            if !path.is_file() {
                return Err(format!(
                    "invalid value for REDIS_CA_FILE: {} is not a readable file",
                    path.display()
                ));
            }
        }
        Ok(Self { url, ca_file })
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

    #[test]
    fn a_ca_file_needs_a_rediss_url_and_an_existing_file() {
        let plain = RedisConfig::from_values(Some("redis://r:6379".into()), Some("/etc/hostname".into()));
        assert!(plain.unwrap_err().contains("rediss://"));
        let missing =
            RedisConfig::from_values(Some("rediss://r:6379".into()), Some("/nonexistent/ca.pem".into()));
        assert!(missing.unwrap_err().contains("/nonexistent/ca.pem"));
        let default = RedisConfig::from_values(None, None).unwrap();
        assert_eq!(default, RedisConfig::new("redis://127.0.0.1:6379"));
    }
}
