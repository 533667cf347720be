//! Snapshot-service settings, from the environment.

use std::net::SocketAddr;

use buzz_bus::snapshot::LIMITS;
use buzz_telemetry::runtime::{env_or, env_required};

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: String,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    pub nats_prefix: String,
    /// Redis URL and CA file (`REDIS_URL`, `REDIS_CA_FILE`): the shared snapshot store.
    pub redis: buzz_http_auth::RedisConfig,
    /// Every snapshot record lives in the one hash `<prefix>snapshot`.
    pub redis_prefix: String,
    pub admin_listen: SocketAddr,
    pub max_db_connections: u32,
    /// Per-statement limit (the spec's two seconds; may be set lower, never higher).
    pub statement_timeout_ms: u64,
    /// Elapsed limit of one operation, access checks included (the spec's eight seconds at most).
    pub operation_timeout_ms: u64,
    /// Limit of every Redis command; past it the request is `snapshot_unavailable`.
    pub redis_timeout_ms: u64,
    /// Shared quotas and the manifest limit: the spec's values at most (a smaller Redis may
    /// tighten them).
    pub max_captures: usize,
    pub max_charged_bytes: usize,
    pub max_manifest_bytes: usize,
    /// The serving write lease of a capture being registered (used up to the operation limit).
    pub lease_ms: u64,
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let s = Self {
            database_url: env_required("DATABASE_URL")?,
            nats: buzz_bus::NatsConfig::from_env()?,
            nats_prefix: env_or("BUZZ_NATS_PREFIX", "buzz".to_owned())?,
            redis: buzz_http_auth::RedisConfig::from_env().map_err(anyhow::Error::msg)?,
            redis_prefix: env_or("BUZZ_REDIS_PREFIX", "buzz:".to_owned())?,
            admin_listen: env_or("BUZZ_SNAPSHOT_ADMIN_ADDR", SocketAddr::from(([127, 0, 0, 1], 7083)))?,
            max_db_connections: env_or("BUZZ_SNAPSHOT_DB_CONNECTIONS", 5)?,
            statement_timeout_ms: env_or("BUZZ_SNAPSHOT_STATEMENT_TIMEOUT_MS", LIMITS.statement_timeout_ms)?,
            operation_timeout_ms: env_or("BUZZ_SNAPSHOT_OPERATION_TIMEOUT_MS", LIMITS.operation_timeout_ms)?,
            redis_timeout_ms: env_or("BUZZ_SNAPSHOT_REDIS_TIMEOUT_MS", 2000)?,
            max_captures: env_or("BUZZ_SNAPSHOT_MAX_CAPTURES", LIMITS.max_active_captures)?,
            max_charged_bytes: env_or("BUZZ_SNAPSHOT_MAX_CHARGED_BYTES", LIMITS.max_charged_bytes)?,
            max_manifest_bytes: env_or("BUZZ_SNAPSHOT_MAX_MANIFEST_BYTES", LIMITS.max_manifest_bytes)?,
            lease_ms: env_or("BUZZ_SNAPSHOT_LEASE_MS", LIMITS.operation_timeout_ms)?,
        };
        s.check()?;
        Ok(s)
    }

    /// Local defaults (tests, `buzz dev`): the spec's limits.
    #[must_use]
    pub fn local(
        database_url: &str,
        nats_url: &str,
        redis_url: &str,
        nats_prefix: &str,
        redis_prefix: &str,
    ) -> Self {
        Self {
            database_url: database_url.to_owned(),
            nats: buzz_bus::NatsConfig::new(nats_url),
            nats_prefix: nats_prefix.to_owned(),
            redis: buzz_http_auth::RedisConfig::new(redis_url),
            redis_prefix: redis_prefix.to_owned(),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            max_db_connections: 5,
            statement_timeout_ms: LIMITS.statement_timeout_ms,
            operation_timeout_ms: LIMITS.operation_timeout_ms,
            redis_timeout_ms: 2000,
            max_captures: LIMITS.max_active_captures,
            max_charged_bytes: LIMITS.max_charged_bytes,
            max_manifest_bytes: LIMITS.max_manifest_bytes,
            lease_ms: LIMITS.operation_timeout_ms,
        }
    }

    /// The spec's time limits are upper bounds: a setting may tighten them, never loosen them.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.statement_timeout_ms == 0 || self.statement_timeout_ms > LIMITS.statement_timeout_ms {
            anyhow::bail!("BUZZ_SNAPSHOT_STATEMENT_TIMEOUT_MS must be 1 to {}", LIMITS.statement_timeout_ms);
        }
        if self.operation_timeout_ms == 0 || self.operation_timeout_ms > LIMITS.operation_timeout_ms {
            anyhow::bail!("BUZZ_SNAPSHOT_OPERATION_TIMEOUT_MS must be 1 to {}", LIMITS.operation_timeout_ms);
        }
        if self.redis_timeout_ms == 0 {
            anyhow::bail!("BUZZ_SNAPSHOT_REDIS_TIMEOUT_MS must be positive");
        }
        self.check_quotas()?;
        if self.max_db_connections == 0 {
            anyhow::bail!("BUZZ_SNAPSHOT_DB_CONNECTIONS must be positive");
        }
        Ok(())
    }

    fn check_quotas(&self) -> anyhow::Result<()> {
        let within = |v: usize, max: usize| (1..=max).contains(&v);
        if !within(self.max_captures, LIMITS.max_active_captures) {
            anyhow::bail!("BUZZ_SNAPSHOT_MAX_CAPTURES must be 1 to {}", LIMITS.max_active_captures);
        }
        if !within(self.max_charged_bytes, LIMITS.max_charged_bytes) {
            anyhow::bail!("BUZZ_SNAPSHOT_MAX_CHARGED_BYTES must be 1 to {}", LIMITS.max_charged_bytes);
        }
        if !within(self.max_manifest_bytes, LIMITS.max_manifest_bytes) {
            anyhow::bail!("BUZZ_SNAPSHOT_MAX_MANIFEST_BYTES must be 1 to {}", LIMITS.max_manifest_bytes);
        }
        if self.lease_ms == 0 || self.lease_ms > LIMITS.operation_timeout_ms {
            anyhow::bail!("BUZZ_SNAPSHOT_LEASE_MS must be 1 to {}", LIMITS.operation_timeout_ms);
        }
        Ok(())
    }
}
