//! Snapshot-service settings: command-line flags or environment variables (docs/configuration.md).

use std::net::SocketAddr;

use buzz_telemetry::settings::{invalid, trimmed};

/// What the snapshot-service runs with, checked at start-up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    /// Redis URL and CA file (`REDIS_URL`, `REDIS_CA_FILE`).
    pub redis: buzz_http_auth::RedisConfig,
    /// `/healthz`, `/readyz`, `/metrics` (`BUZZ_SNAPSHOT_ADMIN_ADDR`).
    pub admin_listen: SocketAddr,
}

/// The snapshot-service's flags and environment variables.
#[derive(Debug, clap::Parser)]
#[command(name = "buzz-snapshot", version, about = "buzz-relay snapshot-service")]
pub struct Args {
    #[command(flatten)]
    nats: buzz_bus::NatsArgs,
    #[command(flatten)]
    redis: buzz_http_auth::RedisArgs,
    /// Listener of /healthz, /readyz and /metrics
    #[arg(long, env = "BUZZ_SNAPSHOT_ADMIN_ADDR", default_value = "127.0.0.1:7083", value_parser = trimmed::<SocketAddr>)]
    admin_addr: SocketAddr,
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
        Self::parse_from(["buzz-snapshot"])
    }
}

impl TryFrom<Args> for Settings {
    type Error = clap::Error;

    fn try_from(a: Args) -> Result<Self, clap::Error> {
        Ok(Self {
            nats: a.nats.into(),
            redis: buzz_http_auth::RedisConfig::try_from(a.redis).map_err(invalid::<Args>)?,
            admin_listen: a.admin_addr,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_settings_refuse_a_ca_file_without_tls() {
        let s = Settings::parse_from(["buzz-snapshot", "--admin-addr", "127.0.0.1:0"]).unwrap();
        assert_eq!(s.admin_listen.port(), 0);
        let plain = ["buzz-snapshot", "--redis-url", "redis://r", "--redis-ca-file", "/etc/hostname"];
        let err = Settings::parse_from(plain).unwrap_err().to_string();
        assert!(err.contains("REDIS_URL does not start with rediss://"), "{err}");
    }
}
