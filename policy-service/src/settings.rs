//! Policy-service settings: command-line flags or environment variables (docs/configuration.md).

use std::net::SocketAddr;

use buzz_core::Pubkey;
use buzz_telemetry::settings::{invalid, trimmed};

/// What the policy-service runs with, checked at start-up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// PostgreSQL URL (`DATABASE_URL`).
    pub database_url: String,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    /// Redis URL and CA file (`REDIS_URL`, `REDIS_CA_FILE`).
    pub redis: buzz_http_auth::RedisConfig,
    /// Subject prefix shared with the other services (`BUZZ_NATS_PREFIX`).
    pub nats_prefix: String,
    /// Prefix of the NIP-98 replay guard's Redis keys (`BUZZ_REDIS_PREFIX`).
    pub redis_prefix: String,
    /// Operator API listener (also serves /healthz, /readyz).
    pub listen: SocketAddr,
    /// The admin listener (`BUZZ_POLICY_ADMIN_ADDR`): `/metrics`, `/healthz`, `/readyz`, kept off
    /// the operator API's port (and thus its Ingress).
    pub admin_listen: SocketAddr,
    /// Keys allowed to sign operator requests.
    pub operator_pubkeys: Vec<Pubkey>,
    /// The origin operator NIP-98 `u` tags must name, e.g. `https://ops.example.com`.
    pub operator_origin: String,
    /// How long gateways may cache a host answer.
    pub lease_ms: u64,
    /// The `BUZZ_NIP_FI_*` settings (mode, issuers, provision binding, gate, revalidation).
    pub nip_fi: buzz_fi::FiSettings,
    /// The relay's own key (`BUZZ_RELAY_SECRET_KEY`, the write-service's): community export names
    /// its public key and import re-signs relay-signed events with it (docs/design.md "Community
    /// export and import"). Without it both answer 503 `relay_key_unconfigured`.
    pub relay_secret_key: Option<String>,
    /// The largest import body spooled (`BUZZ_IMPORT_MAX_BYTES`); larger is 413 `import_too_large`.
    pub import_max_bytes: u64,
    /// The longest line of an import (`BUZZ_IMPORT_MAX_LINE_BYTES`); longer is 413
    /// `import_line_too_long`.
    pub import_max_line_bytes: usize,
    /// Imports received or run at once (`BUZZ_IMPORT_MAX_CONCURRENT`, at least 1); another is 503
    /// `import_busy`.
    pub import_max_concurrent: usize,
}

/// Default of `BUZZ_IMPORT_MAX_BYTES`: 16 GiB of spool.
pub const IMPORT_MAX_BYTES: u64 = 16 << 30;
/// Default of `BUZZ_IMPORT_MAX_LINE_BYTES`: 4 MiB, far above a row of the largest event the
/// gateway admits by default (128 KiB, escaped once more inside the row).
pub const IMPORT_MAX_LINE_BYTES: usize = 4 << 20;
/// Default of `BUZZ_IMPORT_MAX_CONCURRENT`: two imports at a time.
pub const IMPORT_MAX_CONCURRENT: usize = 2;

/// The policy-service's flags and environment variables.
#[derive(Debug, clap::Parser)]
#[command(name = "buzz-policy", version, about = "buzz-relay policy-service")]
pub struct Args {
    /// PostgreSQL URL
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, value_parser = trimmed::<String>)]
    database_url: String,
    #[command(flatten)]
    nats: buzz_bus::NatsArgs,
    #[command(flatten)]
    redis: buzz_http_auth::RedisArgs,
    /// NATS subject prefix
    #[arg(long, env = "BUZZ_NATS_PREFIX", default_value = "buzz", value_parser = trimmed::<String>)]
    nats_prefix: String,
    /// Redis key prefix
    #[arg(long, env = "BUZZ_REDIS_PREFIX", default_value = "buzz:", value_parser = trimmed::<String>)]
    redis_prefix: String,
    /// Operator API listener (also /healthz, /readyz)
    #[arg(long, env = "BUZZ_POLICY_ADDR", default_value = "127.0.0.1:7070", value_parser = trimmed::<SocketAddr>)]
    policy_addr: SocketAddr,
    /// Admin listener (`/metrics`, `/healthz`, `/readyz`), kept off the operator API's port
    #[arg(long, env = "BUZZ_POLICY_ADMIN_ADDR", default_value = "127.0.0.1:7085", value_parser = trimmed::<SocketAddr>)]
    policy_admin_addr: SocketAddr,
    /// Comma-separated operator public keys (64 lowercase hex characters each)
    #[arg(long, env = "RELAY_OPERATOR_PUBKEYS", value_parser = trimmed::<String>)]
    operator_pubkeys: String,
    /// The origin operator NIP-98 `u` tags must name, e.g. `https://ops.example.com`
    #[arg(long, env = "RELAY_OPERATOR_API_ORIGIN", value_parser = parse_origin)]
    operator_api_origin: String,
    /// How long gateways may cache a host answer, in milliseconds
    #[arg(long, env = "BUZZ_POLICY_LEASE_MS", default_value_t = 1000, value_parser = trimmed::<u64>)]
    lease_ms: u64,
    #[command(flatten)]
    nip_fi: buzz_fi::FiArgs,
    /// The relay's secret key (64 hex characters), for community export and import
    #[arg(long, env = "BUZZ_RELAY_SECRET_KEY", hide_env_values = true, value_parser = trimmed::<String>)]
    relay_secret_key: Option<String>,
    /// The largest community import body, in bytes (spooled to a temporary file)
    #[arg(long, env = "BUZZ_IMPORT_MAX_BYTES", default_value_t = IMPORT_MAX_BYTES, value_parser = trimmed::<u64>)]
    import_max_bytes: u64,
    /// The longest line of a community import, in bytes
    #[arg(long, env = "BUZZ_IMPORT_MAX_LINE_BYTES", default_value_t = IMPORT_MAX_LINE_BYTES, value_parser = trimmed::<usize>)]
    import_max_line_bytes: usize,
    /// Community imports received or run at once (at least 1)
    #[arg(long, env = "BUZZ_IMPORT_MAX_CONCURRENT", default_value_t = IMPORT_MAX_CONCURRENT, value_parser = trimmed::<usize>)]
    import_max_concurrent: usize,
}

impl Settings {
    /// Settings from command-line flags (`args`, the program name first) over the environment.
    pub fn parse_from(
        args: impl IntoIterator<Item = impl Into<std::ffi::OsString>>,
    ) -> Result<Self, clap::Error> {
        Self::try_from(buzz_telemetry::settings::parse::<Args>(args)?)
    }

    /// Settings from the environment alone.
    pub fn from_env() -> Result<Self, clap::Error> {
        Self::parse_from(["buzz-policy"])
    }
}

impl TryFrom<Args> for Settings {
    type Error = clap::Error;

    fn try_from(a: Args) -> Result<Self, clap::Error> {
        if a.relay_secret_key.as_deref().is_some_and(|k| buzz_core::Keys::from_secret_hex(k).is_none()) {
            return Err(invalid::<Args>("BUZZ_RELAY_SECRET_KEY is not a valid 64-char hex secret key"));
        }
        if a.import_max_concurrent == 0 {
            return Err(invalid::<Args>("BUZZ_IMPORT_MAX_CONCURRENT must be at least 1"));
        }
        let operator_pubkeys = parse_pubkeys(&a.operator_pubkeys)
            .map_err(|e| invalid::<Args>(format!("invalid value for RELAY_OPERATOR_PUBKEYS: {e}")))?;
        Ok(Self {
            database_url: a.database_url,
            nats: a.nats.into(),
            redis: buzz_http_auth::RedisConfig::try_from(a.redis).map_err(invalid::<Args>)?,
            nats_prefix: a.nats_prefix,
            redis_prefix: a.redis_prefix,
            listen: a.policy_addr,
            admin_listen: a.policy_admin_addr,
            operator_pubkeys,
            operator_origin: a.operator_api_origin,
            lease_ms: a.lease_ms,
            nip_fi: a.nip_fi.into(),
            relay_secret_key: a.relay_secret_key,
            import_max_bytes: a.import_max_bytes,
            import_max_line_bytes: a.import_max_line_bytes,
            import_max_concurrent: a.import_max_concurrent,
        })
    }
}

/// Comma-separated 64-char lowercase hex keys; at least one.
pub fn parse_pubkeys(raw: &str) -> Result<Vec<Pubkey>, String> {
    let keys: Vec<&str> = raw.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if keys.is_empty() {
        return Err("must name at least one key".to_owned());
    }
    keys.into_iter()
        .map(|k| Pubkey::parse(k).map_err(|_| format!("{k:?} is not a 64-char lowercase hex public key")))
        .collect()
}

/// `scheme://host[:port]`, no path; stored without a trailing slash.
pub fn parse_origin(raw: &str) -> Result<String, String> {
    let trimmed = raw.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"))
        .ok_or("must start with http:// or https://")?;
    if rest.is_empty() || rest.contains('/') || rest.contains('?') {
        return Err("must be an origin (scheme://host[:port])".to_owned());
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

    #[test]
    fn policy_flags_are_checked_into_settings() {
        let key = "b".repeat(64);
        let args = ["buzz-policy", "--database-url=postgres://db/x", "--operator-api-origin=https://ops.x/"];
        let s = Settings::parse_from(args.iter().chain(&["--operator-pubkeys", &key])).unwrap();
        assert_eq!(
            (s.operator_pubkeys, s.operator_origin.as_str(), s.lease_ms),
            (vec![buzz_core::Pubkey::parse(&key).unwrap()], "https://ops.x", 1000)
        );
        assert_eq!(s.admin_listen, SocketAddr::from(([127, 0, 0, 1], 7085)));
        assert_eq!(s.relay_secret_key, None, "optional: export and import answer 503 without it");
        assert_eq!((s.import_max_bytes, s.import_max_line_bytes), (IMPORT_MAX_BYTES, IMPORT_MAX_LINE_BYTES));
        assert_eq!(s.import_max_concurrent, IMPORT_MAX_CONCURRENT);
        let small = [
            "--import-max-bytes=1000",
            "--import-max-line-bytes=100",
            "--import-max-concurrent=1",
            "--operator-pubkeys",
            &key,
        ];
        let s = Settings::parse_from(args.iter().chain(&small)).unwrap();
        assert_eq!((s.import_max_bytes, s.import_max_line_bytes, s.import_max_concurrent), (1000, 100, 1));
        let none = ["--import-max-concurrent=0", "--operator-pubkeys", &key];
        let err = Settings::parse_from(args.iter().chain(&none)).unwrap_err();
        assert!(err.to_string().contains("BUZZ_IMPORT_MAX_CONCURRENT must be at least 1"), "{err}");
        let err = Settings::parse_from(args.iter().chain(&[
            "--operator-pubkeys",
            &key,
            "--relay-secret-key",
            "ab",
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("BUZZ_RELAY_SECRET_KEY is not a valid"), "{err}");
        let err = Settings::parse_from(args.iter().chain(&["--operator-pubkeys", ","])).unwrap_err();
        assert!(err.to_string().contains("RELAY_OPERATOR_PUBKEYS: must name at least one key"), "{err}");
        let err =
            Settings::parse_from(["buzz-policy", "--database-url=x", "--operator-pubkeys=x"]).unwrap_err();
        assert!(err
            .to_string()
            .contains("RELAY_OPERATOR_API_ORIGIN must be set (or pass --operator-api-origin)"));
    }
}
