//! The `BUZZ_NIP_FI_*` settings, read the same way by every service.

use std::time::Duration;

use buzz_telemetry::runtime::env_or;

use crate::registry::{parse_issuers, IssuerConfig};
use crate::Mode;

#[derive(Debug, Clone)]
pub struct FiSettings {
    /// `BUZZ_NIP_FI_MODE` (default `shadow`: the stored per-community flag is enforced).
    pub mode: Mode,
    /// `BUZZ_NIP_FI_ISSUERS`: the registry policy, a JSON list of `{issuer, jwks}` or
    /// `{issuer, jwks_uri}` (default empty: no issuer is trusted).
    pub issuers: Vec<IssuerConfig>,
    /// `BUZZ_NIP_FI_PROVISION_BINDING`: the one issuer an enable may name (default none: enable is
    /// refused with `issuer_conflict`).
    pub provision_binding: Option<String>,
    /// `BUZZ_NIP_FI_UPGRADES_ENABLED` (default false): the gate of new policy mutations.
    pub upgrades_enabled: bool,
    /// `BUZZ_NIP_FI_MAX_CONNECTION_LIFETIME_SECS` (default 3600).
    pub max_connection_lifetime: Duration,
    /// `BUZZ_NIP_FI_REVALIDATE_INTERVAL_SECS` (default 10).
    pub revalidate_interval: Duration,
    /// `BUZZ_NIP_FI_JWKS_REFRESH_SECS` (default 300): how often a `jwks_uri` is fetched.
    pub jwks_refresh: Duration,
    /// `BUZZ_NIP_FI_JWKS_MAX_AGE_SECS` (default 3600): the hard deadline after the last
    /// successful fetch; past it that issuer's evidence fails closed.
    pub jwks_max_age: Duration,
    /// `BUZZ_NIP_FI_JWKS_TIMEOUT_MS` (default 5000): one fetch's deadline.
    pub jwks_timeout: Duration,
}

impl Default for FiSettings {
    fn default() -> Self {
        Self {
            mode: Mode::Shadow,
            issuers: Vec::new(),
            provision_binding: None,
            upgrades_enabled: false,
            max_connection_lifetime: Duration::from_secs(3600),
            revalidate_interval: Duration::from_secs(10),
            jwks_refresh: Duration::from_secs(300),
            jwks_max_age: Duration::from_secs(3600),
            jwks_timeout: Duration::from_millis(5000),
        }
    }
}

impl FiSettings {
    pub fn from_env() -> anyhow::Result<Self> {
        let d = Self::default();
        let issuers = match std::env::var("BUZZ_NIP_FI_ISSUERS") {
            Ok(raw) if !raw.trim().is_empty() => parse_issuers(&raw)
                .map_err(|e| anyhow::anyhow!("invalid value for BUZZ_NIP_FI_ISSUERS: {e}"))?,
            _ => Vec::new(),
        };
        let binding: String = env_or("BUZZ_NIP_FI_PROVISION_BINDING", String::new())?;
        let secs = |name: &str, default: Duration| -> anyhow::Result<Duration> {
            let v: u64 = env_or(name, default.as_secs())?;
            if v == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
            Ok(Duration::from_secs(v))
        };
        Ok(Self {
            mode: env_or("BUZZ_NIP_FI_MODE", d.mode)?,
            issuers,
            provision_binding: Some(binding).filter(|b| !b.is_empty()),
            upgrades_enabled: env_or("BUZZ_NIP_FI_UPGRADES_ENABLED", d.upgrades_enabled)?,
            max_connection_lifetime: secs(
                "BUZZ_NIP_FI_MAX_CONNECTION_LIFETIME_SECS",
                d.max_connection_lifetime,
            )?,
            revalidate_interval: secs("BUZZ_NIP_FI_REVALIDATE_INTERVAL_SECS", d.revalidate_interval)?,
            jwks_refresh: secs("BUZZ_NIP_FI_JWKS_REFRESH_SECS", d.jwks_refresh)?,
            jwks_max_age: secs("BUZZ_NIP_FI_JWKS_MAX_AGE_SECS", d.jwks_max_age)?,
            jwks_timeout: Duration::from_millis(env_or("BUZZ_NIP_FI_JWKS_TIMEOUT_MS", 5000)?),
        })
    }
}
