//! Query-service settings: command-line flags or environment variables (docs/configuration.md).

use std::net::SocketAddr;

use buzz_telemetry::settings::{positive, trimmed};

/// What the query-service runs with, checked at start-up.
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
    /// Requests this replica holds at once, waiting or running.
    pub concurrency: usize,
    /// Queries running at once (each holds a connection); `None`: three quarters of the pool,
    /// so that access checks always find a connection.
    pub running: Option<usize>,
    /// Queries of one community running at once; `None`: a third of `running` (at least 1).
    pub community_running: Option<usize>,
    /// Queries of one community waiting for a slot; one more is refused `rate-limited:`.
    pub community_queue: usize,
    /// Per-statement execution budget.
    pub statement_timeout_ms: u64,
}

/// The query-service's flags and environment variables.
#[derive(Debug, clap::Parser)]
#[command(name = "buzz-query", version, about = "buzz-relay query-service")]
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
    #[arg(long, env = "BUZZ_QUERY_ADMIN_ADDR", default_value = "127.0.0.1:7082", value_parser = trimmed::<SocketAddr>)]
    admin_addr: SocketAddr,
    /// PostgreSQL pool size
    #[arg(long, env = "BUZZ_QUERY_DB_CONNECTIONS", default_value_t = 16, value_parser = positive::<u32>)]
    db_connections: u32,
    /// Requests held at once, waiting or running
    #[arg(long, env = "BUZZ_QUERY_CONCURRENCY", default_value_t = 64, value_parser = positive::<usize>)]
    concurrency: usize,
    /// Queries running at once (default: three quarters of the pool)
    #[arg(long, env = "BUZZ_QUERY_RUNNING", value_parser = positive::<usize>)]
    running: Option<usize>,
    /// Queries of one community running at once (default: a third of the running queries)
    #[arg(long, env = "BUZZ_QUERY_COMMUNITY_RUNNING", value_parser = positive::<usize>)]
    community_running: Option<usize>,
    /// Queries of one community waiting for a slot; one more is refused
    #[arg(long, env = "BUZZ_QUERY_COMMUNITY_QUEUE", default_value_t = 16, value_parser = trimmed::<usize>)]
    community_queue: usize,
    /// Execution budget per statement, in milliseconds
    #[arg(long, env = "BUZZ_QUERY_STATEMENT_TIMEOUT_MS", default_value_t = 2000, value_parser = positive::<u64>)]
    statement_timeout_ms: u64,
}

impl Settings {
    /// Settings from command-line flags (`args`, the program name first) over the environment.
    pub fn parse_from(
        args: impl IntoIterator<Item = impl Into<std::ffi::OsString>>,
    ) -> Result<Self, clap::Error> {
        Ok(Self::from(buzz_telemetry::settings::parse::<Args>(args)?))
    }

    /// The defaults of every flag, on loopback with the admin listener on port 0 (tests, `buzz dev`).
    #[must_use]
    pub fn local(database_url: &str, nats_url: &str, nats_prefix: &str) -> Self {
        Self {
            database_url: database_url.to_owned(),
            nats: buzz_bus::NatsConfig::new(nats_url.to_owned()),
            nats_prefix: nats_prefix.to_owned(),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_db_connections: 16,
            concurrency: 64,
            running: None,
            community_running: None,
            community_queue: 16,
            statement_timeout_ms: 2000,
        }
    }

    /// How the replica's query capacity is shared between communities (`fair::FairGate`).
    #[must_use]
    pub fn shares(&self) -> crate::fair::Shares {
        let pool = usize::try_from(self.max_db_connections).unwrap_or(usize::MAX);
        let running = self.running.unwrap_or(pool - pool / 4).max(1);
        let per_key_running = self.community_running.unwrap_or(running / 3).clamp(1, running);
        crate::fair::Shares { running, per_key_running, per_key_waiting: self.community_queue }
    }

    /// Settings from the environment alone (test replicas, embedding).
    pub fn from_env() -> Result<Self, clap::Error> {
        Self::parse_from(["buzz-query"])
    }
}

impl From<Args> for Settings {
    fn from(a: Args) -> Self {
        Self {
            database_url: a.database_url,
            nats: a.nats.into(),
            nats_prefix: a.nats_prefix,
            admin_listen: a.admin_addr,
            max_db_connections: a.db_connections,
            concurrency: a.concurrency,
            running: a.running,
            community_running: a.community_running,
            community_queue: a.community_queue,
            statement_timeout_ms: a.statement_timeout_ms,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn query_settings_keep_their_defaults_and_refuse_a_zero_budget() {
        let s = Settings::parse_from(["buzz-query", "--database-url", "postgres://db/x"]).unwrap();
        assert_eq!((s.statement_timeout_ms, s.concurrency, s.max_db_connections), (2000, 64, 16));
        let shares = crate::fair::Shares { running: 12, per_key_running: 4, per_key_waiting: 16 };
        assert_eq!(s.shares(), shares, "a quarter of the pool is left to access checks");
        let small = Settings { max_db_connections: 1, ..s.clone() }.shares();
        assert_eq!((small.running, small.per_key_running), (1, 1));
        let set = Settings { running: Some(6), community_running: Some(9), ..s }.shares();
        assert_eq!((set.running, set.per_key_running), (6, 6), "a community's share is at most the whole");
        assert_eq!(s.admin_listen, SocketAddr::from(([127, 0, 0, 1], 7082)));
        let zero = ["buzz-query", "--database-url", "x", "--statement-timeout-ms", "0"];
        let err = Settings::parse_from(zero).unwrap_err().to_string();
        assert!(err.contains("must be positive"), "{err}");
        let err = Settings::parse_from(["buzz-query", "--database-url", "x", "--admin-addr", "nowhere"]);
        assert!(err.unwrap_err().to_string().contains("--admin-addr"));
    }

    #[test]
    fn a_bad_variable_is_named() {
        // The only test of this crate that sets a variable (env is process-wide); the others
        // pass `--database-url`, which wins over it.
        std::env::set_var("DATABASE_URL", " ");
        let err = Settings::from_env().unwrap_err().to_string();
        assert!(err.contains("invalid value for DATABASE_URL: \" \": empty"), "{err}");
    }
}
