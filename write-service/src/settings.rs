//! Write-service settings, from the environment.

use std::net::SocketAddr;

use buzz_telemetry::runtime::{env_or, env_required};

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: String,
    pub nats_url: String,
    pub nats_prefix: String,
    /// `/healthz`, `/readyz`, `/metrics`.
    pub admin_listen: SocketAddr,
    pub max_db_connections: u32,
    /// Handlers running at once in this replica.
    pub concurrency: usize,
    /// The relay's own key (hex), signing its events (39000/39002, 45011).
    pub relay_secret_key: String,
    /// How often expired TTL-channel events are swept.
    pub ttl_sweep_every: std::time::Duration,
    /// Longest a write statement may run (PostgreSQL `statement_timeout`), below the gateway's bus
    /// timeout so that a slow write is answered by the write-service with a known outcome.
    pub statement_timeout_ms: u64,
    /// Longest a write statement may wait for a lock (`lock_timeout`), and for a pool connection.
    pub lock_timeout_ms: u64,
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let relay_secret_key = env_required("BUZZ_RELAY_SECRET_KEY")?;
        if buzz_core::Keys::from_secret_hex(&relay_secret_key).is_none() {
            anyhow::bail!("BUZZ_RELAY_SECRET_KEY is not a valid 64-char hex secret key");
        }
        let s = Self {
            database_url: env_required("DATABASE_URL")?,
            nats_url: env_or("NATS_URL", "nats://127.0.0.1:4222".to_owned())?,
            nats_prefix: env_or("BUZZ_NATS_PREFIX", "buzz".to_owned())?,
            admin_listen: env_or("BUZZ_WRITE_ADMIN_ADDR", SocketAddr::from(([127, 0, 0, 1], 7081)))?,
            max_db_connections: env_or("BUZZ_WRITE_DB_CONNECTIONS", 16)?,
            concurrency: env_or("BUZZ_WRITE_CONCURRENCY", 64)?,
            relay_secret_key,
            ttl_sweep_every: std::time::Duration::from_secs(env_or("BUZZ_TTL_SWEEP_SECS", 30u64)?.max(1)),
            statement_timeout_ms: env_or("BUZZ_WRITE_STATEMENT_TIMEOUT_MS", 3000)?,
            lock_timeout_ms: env_or("BUZZ_WRITE_LOCK_TIMEOUT_MS", 2000)?,
        };
        if s.statement_timeout_ms == 0 || s.lock_timeout_ms == 0 {
            anyhow::bail!("BUZZ_WRITE_STATEMENT_TIMEOUT_MS and BUZZ_WRITE_LOCK_TIMEOUT_MS must be positive");
        }
        Ok(s)
    }
}
