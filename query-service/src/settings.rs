//! Query-service settings, from the environment.

use std::net::SocketAddr;

use buzz_telemetry::runtime::{env_or, env_required};

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: String,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    pub nats_prefix: String,
    pub admin_listen: SocketAddr,
    pub max_db_connections: u32,
    pub concurrency: usize,
    /// Per-statement execution budget.
    pub statement_timeout_ms: u64,
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let s = Self {
            database_url: env_required("DATABASE_URL")?,
            nats: buzz_bus::NatsConfig::from_env()?,
            nats_prefix: env_or("BUZZ_NATS_PREFIX", "buzz".to_owned())?,
            admin_listen: env_or("BUZZ_QUERY_ADMIN_ADDR", SocketAddr::from(([127, 0, 0, 1], 7082)))?,
            max_db_connections: env_or("BUZZ_QUERY_DB_CONNECTIONS", 16)?,
            concurrency: env_or("BUZZ_QUERY_CONCURRENCY", 64)?,
            statement_timeout_ms: env_or("BUZZ_QUERY_STATEMENT_TIMEOUT_MS", 2000)?,
        };
        if s.statement_timeout_ms == 0 {
            anyhow::bail!("BUZZ_QUERY_STATEMENT_TIMEOUT_MS must be positive");
        }
        Ok(s)
    }
}
