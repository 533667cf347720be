//! Policy-service settings, from the environment.

use std::net::SocketAddr;

use buzz_telemetry::runtime::{env_or, env_required};

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: String,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    /// Redis URL and CA file (`REDIS_URL`, `REDIS_CA_FILE`).
    pub redis: buzz_http_auth::RedisConfig,
    pub nats_prefix: String,
    pub redis_prefix: String,
    /// Operator API listener (also serves /healthz, /readyz).
    pub listen: SocketAddr,
    /// The admin listener (`BUZZ_POLICY_ADMIN_ADDR`): `/metrics`, `/healthz`, `/readyz`, kept off
    /// the operator API's port (and thus its Ingress).
    pub admin_listen: SocketAddr,
    /// Keys allowed to sign operator requests.
    pub operator_pubkeys: Vec<String>,
    /// The origin operator NIP-98 `u` tags must name, e.g. `https://ops.example.com`.
    pub operator_origin: String,
    /// How long gateways may cache a host answer.
    pub lease_ms: u64,
    /// The `BUZZ_NIP_FI_*` settings (mode, issuers, provision binding, gate, revalidation).
    pub nip_fi: buzz_fi::FiSettings,
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let keys = env_required("RELAY_OPERATOR_PUBKEYS")?;
        let operator_pubkeys = parse_pubkeys(&keys)?;
        let origin = env_required("RELAY_OPERATOR_API_ORIGIN")?;
        Ok(Self {
            database_url: env_required("DATABASE_URL")?,
            nats: buzz_bus::NatsConfig::from_env()?,
            redis: buzz_http_auth::RedisConfig::from_env().map_err(anyhow::Error::msg)?,
            nats_prefix: env_or("BUZZ_NATS_PREFIX", "buzz".to_owned())?,
            redis_prefix: env_or("BUZZ_REDIS_PREFIX", "buzz:".to_owned())?,
            listen: env_or("BUZZ_POLICY_ADDR", SocketAddr::from(([127, 0, 0, 1], 7070)))?,
            admin_listen: env_or("BUZZ_POLICY_ADMIN_ADDR", SocketAddr::from(([127, 0, 0, 1], 7085)))?,
            operator_pubkeys,
            operator_origin: parse_origin(&origin)?,
            lease_ms: env_or("BUZZ_POLICY_LEASE_MS", 1000)?,
            nip_fi: buzz_fi::FiSettings::from_env()?,
        })
    }
}

/// Comma-separated 64-char lowercase hex keys; at least one.
pub fn parse_pubkeys(raw: &str) -> anyhow::Result<Vec<String>> {
    let keys: Vec<String> =
        raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if keys.is_empty() {
        anyhow::bail!("RELAY_OPERATOR_PUBKEYS must name at least one key");
    }
    if let Some(bad) = keys.iter().find(|k| !buzz_core::is_lower_hex(k, 64)) {
        anyhow::bail!("RELAY_OPERATOR_PUBKEYS: {bad:?} is not a 64-char lowercase hex public key");
    }
    Ok(keys)
}

/// `scheme://host[:port]`, no path; stored without a trailing slash.
pub fn parse_origin(raw: &str) -> anyhow::Result<String> {
    let trimmed = raw.trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"))
        .ok_or_else(|| anyhow::anyhow!("RELAY_OPERATOR_API_ORIGIN must start with http:// or https://"))?;
    if rest.is_empty() || rest.contains('/') || rest.contains('?') {
        anyhow::bail!("RELAY_OPERATOR_API_ORIGIN must be an origin (scheme://host[:port]), got {raw:?}");
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn operator_settings_fail_fast_on_bad_values() {
        assert!(parse_pubkeys("").is_err());
        assert!(parse_pubkeys("ABC").is_err());
        assert_eq!(parse_pubkeys(&format!(" {} ,", "a".repeat(64))).unwrap().len(), 1);
        assert_eq!(parse_origin("http://127.0.0.1:7070/").unwrap(), "http://127.0.0.1:7070");
        assert!(parse_origin("ftp://x").is_err());
        assert!(parse_origin("https://x/path").is_err());
    }
}
