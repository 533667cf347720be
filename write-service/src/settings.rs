//! Write-service settings: command-line flags or environment variables (docs/configuration.md).

use std::net::SocketAddr;
use std::time::Duration;

use buzz_telemetry::settings::{invalid, positive, trimmed};

/// What the write-service runs with, checked at start-up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// PostgreSQL URL (`DATABASE_URL`).
    pub database_url: String,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    /// Subject prefix shared with the other services (`BUZZ_NATS_PREFIX`).
    pub nats_prefix: String,
    /// `/healthz`, `/readyz`, `/metrics`.
    pub admin_listen: SocketAddr,
    /// PostgreSQL pool size.
    pub max_db_connections: u32,
    /// Handlers running at once in this replica.
    pub concurrency: usize,
    /// The relay's own key (hex), signing its events (39000/39002, 45011).
    pub relay_secret_key: String,
    /// How often expired TTL-channel events are swept.
    pub ttl_sweep_every: Duration,
    /// Longest a write statement may run (PostgreSQL `statement_timeout`), below the gateway's bus
    /// timeout so that a slow write is answered by the write-service with a known outcome.
    pub statement_timeout_ms: u64,
    /// Longest a write statement may wait for a lock (`lock_timeout`), and for a pool connection.
    pub lock_timeout_ms: u64,
    /// Group commit of kind-9 posts: most posts per transaction, transactions at once.
    pub batch: crate::engine::BatchSettings,
}

/// The write-service's flags and environment variables.
#[derive(Debug, clap::Parser)]
#[command(name = "buzz-write", version, about = "buzz-relay write-service")]
pub struct Args {
    /// PostgreSQL URL
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, value_parser = trimmed::<String>)]
    database_url: String,
    #[command(flatten)]
    nats: buzz_bus::NatsArgs,
    /// NATS subject prefix
    #[arg(long, env = "BUZZ_NATS_PREFIX", default_value = "buzz", value_parser = trimmed::<String>)]
    nats_prefix: String,
    /// Listener of /healthz, /readyz and /metrics
    #[arg(long, env = "BUZZ_WRITE_ADMIN_ADDR", default_value = "127.0.0.1:7081", value_parser = trimmed::<SocketAddr>)]
    admin_addr: SocketAddr,
    /// PostgreSQL pool size
    #[arg(long, env = "BUZZ_WRITE_DB_CONNECTIONS", default_value_t = 16, value_parser = positive::<u32>)]
    db_connections: u32,
    /// Requests handled at once
    #[arg(long, env = "BUZZ_WRITE_CONCURRENCY", default_value_t = 64, value_parser = positive::<usize>)]
    concurrency: usize,
    /// The relay's secret key (64 hex characters)
    #[arg(long, env = "BUZZ_RELAY_SECRET_KEY", hide_env_values = true, value_parser = trimmed::<String>)]
    relay_secret_key: String,
    /// Seconds between sweeps of expired TTL-channel events (0 is read as 1)
    #[arg(long, env = "BUZZ_TTL_SWEEP_SECS", default_value_t = 30, value_parser = trimmed::<u64>)]
    ttl_sweep_secs: u64,
    /// Longest a write statement runs (PostgreSQL statement_timeout), in milliseconds
    #[arg(long, env = "BUZZ_WRITE_STATEMENT_TIMEOUT_MS", default_value_t = 3000, value_parser = positive::<u64>)]
    statement_timeout_ms: u64,
    /// Longest a write waits for a lock or a pool connection, in milliseconds
    #[arg(long, env = "BUZZ_WRITE_LOCK_TIMEOUT_MS", default_value_t = 2000, value_parser = positive::<u64>)]
    lock_timeout_ms: u64,
    #[command(flatten)]
    batch: BatchArgs,
}

/// Group commit of kind-9 posts and NIP-AR revisions (also flattened into `buzz dev`).
#[derive(Debug, Clone, clap::Args)]
pub struct BatchArgs {
    /// Most kind-9 posts, and most NIP-AR revisions, written in one transaction (group commit; 1: each alone)
    #[arg(long = "write-batch-max", env = "BUZZ_WRITE_BATCH_MAX", default_value_t = 64, value_parser = positive::<usize>)]
    pub batch_max: usize,
    /// Group-commit transactions running at once per event family (each has its own connection, besides the pool)
    #[arg(long = "write-batch-lanes", env = "BUZZ_WRITE_BATCH_LANES", default_value_t = 1, value_parser = positive::<usize>)]
    pub batch_lanes: usize,
}

impl From<BatchArgs> for crate::engine::BatchSettings {
    fn from(a: BatchArgs) -> Self {
        Self { max: a.batch_max, lanes: a.batch_lanes }
    }
}

impl Settings {
    /// Settings from command-line flags (`args`, the program name first) over the environment.
    pub fn parse_from(
        args: impl IntoIterator<Item = impl Into<std::ffi::OsString>>,
    ) -> Result<Self, clap::Error> {
        Self::try_from(buzz_telemetry::settings::parse::<Args>(args)?)
    }

    /// Settings from the environment alone (test replicas, embedding).
    pub fn from_env() -> Result<Self, clap::Error> {
        Self::parse_from(["buzz-write"])
    }
}

impl TryFrom<Args> for Settings {
    type Error = clap::Error;

    fn try_from(a: Args) -> Result<Self, clap::Error> {
        if buzz_core::Keys::from_secret_hex(&a.relay_secret_key).is_none() {
            return Err(invalid::<Args>("BUZZ_RELAY_SECRET_KEY is not a valid 64-char hex secret key"));
        }

        Ok(Self {
            database_url: a.database_url,
            nats: a.nats.into(),
            nats_prefix: a.nats_prefix,
            admin_listen: a.admin_addr,
            max_db_connections: a.db_connections,
            concurrency: a.concurrency,
            relay_secret_key: a.relay_secret_key,
            ttl_sweep_every: Duration::from_secs(a.ttl_sweep_secs.max(1)),
            statement_timeout_ms: a.statement_timeout_ms,
            lock_timeout_ms: a.lock_timeout_ms,
            batch: a.batch.into(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Settings, clap::Error> {
        let key = buzz_core::Keys::generate().secret_hex();
        let base = ["buzz-write", "--database-url", "postgres://db/x", "--relay-secret-key", &key];
        Settings::parse_from(base.iter().chain(extra))
    }

    #[test]
    fn write_settings_keep_their_defaults_and_refuse_zero_timeouts() {
        let s = parse(&["--nats-url", "nats://n:4222"]).unwrap();
        assert_eq!((s.statement_timeout_ms, s.lock_timeout_ms, s.concurrency), (3000, 2000, 64));
        assert_eq!(s.admin_listen, SocketAddr::from(([127, 0, 0, 1], 7081)));
        let s = parse(&["--ttl-sweep-secs", "0", "--lock-timeout-ms", "5"]);
        assert_eq!(s.as_ref().map(|s| (s.ttl_sweep_every.as_secs(), s.lock_timeout_ms)).unwrap(), (1, 5));
        for flag in ["--statement-timeout-ms", "--lock-timeout-ms"] {
            let err = parse(&[flag, "0"]).unwrap_err().to_string();
            assert!(err.contains("must be positive"), "{err}");
        }
        let err = Settings::parse_from(["buzz-write", "--database-url", "x", "--relay-secret-key", "ab"]);
        assert!(err.unwrap_err().to_string().contains("BUZZ_RELAY_SECRET_KEY is not a valid"));
    }
}
