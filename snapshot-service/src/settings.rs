//! Snapshot-service settings: command-line flags or environment variables (docs/configuration.md).

use std::net::SocketAddr;

use buzz_bus::snapshot::LIMITS;
use buzz_telemetry::settings::{invalid, positive, trimmed};

/// What the snapshot-service runs with, checked at start-up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// PostgreSQL URL (`DATABASE_URL`).
    pub database_url: String,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    /// Subject prefix shared with the other services (`BUZZ_NATS_PREFIX`).
    pub nats_prefix: String,
    /// Redis URL and CA file (`REDIS_URL`, `REDIS_CA_FILE`): the shared snapshot store.
    pub redis: buzz_http_auth::RedisConfig,
    /// Every snapshot record lives in the one hash `<prefix>snapshot` (`BUZZ_REDIS_PREFIX`).
    pub redis_prefix: String,
    /// `/healthz`, `/readyz`, `/metrics` (`BUZZ_SNAPSHOT_ADMIN_ADDR`).
    pub admin_listen: SocketAddr,
    /// PostgreSQL pool size (`BUZZ_SNAPSHOT_DB_CONNECTIONS`).
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
    /// Charged snapshot bytes across replicas (`BUZZ_SNAPSHOT_MAX_CHARGED_BYTES`).
    pub max_charged_bytes: usize,
    /// One community's share of `max_captures` (`BUZZ_SNAPSHOT_COMMUNITY_MAX_CAPTURES`; unset:
    /// half of it, at least 1).
    pub community_max_captures: Option<usize>,
    /// One community's share of `max_charged_bytes` (`BUZZ_SNAPSHOT_COMMUNITY_MAX_CHARGED_BYTES`;
    /// unset: half of it, at least 1).
    pub community_max_charged_bytes: Option<usize>,
    /// Operations one community may run at once in this process, of the spec's four
    /// (`BUZZ_SNAPSHOT_COMMUNITY_OPERATIONS`).
    pub community_operations: usize,
    /// Bytes of one internal manifest (`BUZZ_SNAPSHOT_MAX_MANIFEST_BYTES`).
    pub max_manifest_bytes: usize,
    /// The serving write lease of a capture being registered (used up to the operation limit).
    pub lease_ms: u64,
}

/// The snapshot-service's flags and environment variables.
#[derive(Debug, clap::Parser)]
#[command(name = "buzz-snapshot", version, about = "buzz-relay snapshot-service")]
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
    /// Redis key prefix (the snapshot hash is `<prefix>snapshot`)
    #[arg(long, env = "BUZZ_REDIS_PREFIX", default_value = "buzz:", value_parser = trimmed::<String>)]
    redis_prefix: String,
    /// Listener of /healthz, /readyz and /metrics
    #[arg(long, env = "BUZZ_SNAPSHOT_ADMIN_ADDR", default_value = "127.0.0.1:7083", value_parser = trimmed::<SocketAddr>)]
    admin_addr: SocketAddr,
    /// PostgreSQL pool size
    #[arg(long, env = "BUZZ_SNAPSHOT_DB_CONNECTIONS", default_value_t = 5, value_parser = positive::<u32>)]
    db_connections: u32,
    /// Per-statement limit in milliseconds, 1 to the spec's 2000
    #[arg(long, env = "BUZZ_SNAPSHOT_STATEMENT_TIMEOUT_MS", default_value_t = LIMITS.statement_timeout_ms, value_parser = statement_timeout)]
    statement_timeout_ms: u64,
    /// Elapsed limit per operation in milliseconds, 1 to the spec's 8000
    #[arg(long, env = "BUZZ_SNAPSHOT_OPERATION_TIMEOUT_MS", default_value_t = LIMITS.operation_timeout_ms, value_parser = operation_timeout)]
    operation_timeout_ms: u64,
    /// Limit of each Redis script in milliseconds
    #[arg(long, env = "BUZZ_SNAPSHOT_REDIS_TIMEOUT_MS", default_value_t = 2000, value_parser = positive::<u64>)]
    redis_timeout_ms: u64,
    /// Active captures shared by every replica, 1 to the spec's 32
    #[arg(long, env = "BUZZ_SNAPSHOT_MAX_CAPTURES", default_value_t = LIMITS.max_active_captures, value_parser = max_captures)]
    max_captures: usize,
    /// Charged snapshot bytes shared by every replica, 1 to the spec's 64 MiB
    #[arg(long, env = "BUZZ_SNAPSHOT_MAX_CHARGED_BYTES", default_value_t = LIMITS.max_charged_bytes, value_parser = max_charged_bytes)]
    max_charged_bytes: usize,
    /// Active captures one community may hold, 1 to BUZZ_SNAPSHOT_MAX_CAPTURES (default: half of it)
    #[arg(long, env = "BUZZ_SNAPSHOT_COMMUNITY_MAX_CAPTURES", value_parser = positive::<usize>)]
    community_max_captures: Option<usize>,
    /// Charged bytes one community's captures may hold, 1 to BUZZ_SNAPSHOT_MAX_CHARGED_BYTES
    /// (default: half of it)
    #[arg(long, env = "BUZZ_SNAPSHOT_COMMUNITY_MAX_CHARGED_BYTES", value_parser = positive::<usize>)]
    community_max_charged_bytes: Option<usize>,
    /// Snapshot operations one community may run at once in a process, 1 to the spec's 4
    #[arg(long, env = "BUZZ_SNAPSHOT_COMMUNITY_OPERATIONS", default_value_t = LIMITS.operations_per_process / 2, value_parser = community_operations)]
    community_operations: usize,
    /// Bytes of one internal manifest, 1 to the spec's 16 MiB
    #[arg(long, env = "BUZZ_SNAPSHOT_MAX_MANIFEST_BYTES", default_value_t = LIMITS.max_manifest_bytes, value_parser = max_manifest_bytes)]
    max_manifest_bytes: usize,
    /// The serving write lease of a capture being registered, in milliseconds (capped at the
    /// operation limit)
    #[arg(long, env = "BUZZ_SNAPSHOT_LEASE_MS", default_value_t = LIMITS.operation_timeout_ms, value_parser = operation_timeout)]
    lease_ms: u64,
}

/// Value parser: positive and at most `max` (the spec's limits are upper bounds).
fn at_most(raw: &str, max: u64) -> Result<u64, String> {
    let v: u64 = positive(raw)?;
    if v > max {
        return Err(format!("must be 1 to {max} (the spec's limit)"));
    }
    Ok(v)
}

fn statement_timeout(raw: &str) -> Result<u64, String> {
    at_most(raw, LIMITS.statement_timeout_ms)
}

fn operation_timeout(raw: &str) -> Result<u64, String> {
    at_most(raw, LIMITS.operation_timeout_ms)
}

/// Value parser of a quota: positive and at most the spec's `max`.
fn at_most_usize(raw: &str, max: usize) -> Result<usize, String> {
    at_most(raw, max as u64).map(|v| usize::try_from(v).unwrap_or(max))
}

fn max_captures(raw: &str) -> Result<usize, String> {
    at_most_usize(raw, LIMITS.max_active_captures)
}

fn max_charged_bytes(raw: &str) -> Result<usize, String> {
    at_most_usize(raw, LIMITS.max_charged_bytes)
}

fn community_operations(raw: &str) -> Result<usize, String> {
    at_most_usize(raw, LIMITS.operations_per_process)
}

fn max_manifest_bytes(raw: &str) -> Result<usize, String> {
    at_most_usize(raw, LIMITS.max_manifest_bytes)
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
            community_max_captures: None,
            community_max_charged_bytes: None,
            community_operations: LIMITS.operations_per_process / 2,
            max_manifest_bytes: LIMITS.max_manifest_bytes,
            lease_ms: LIMITS.operation_timeout_ms,
        }
    }

    /// The shared quotas and each community's share of them (unset shares: half of each total).
    #[must_use]
    pub fn quotas(&self) -> crate::state::Quotas {
        let halved = crate::state::Quotas::halved(self.max_captures, self.max_charged_bytes);
        crate::state::Quotas {
            community_captures: self.community_max_captures.unwrap_or(halved.community_captures),
            community_bytes: self.community_max_charged_bytes.unwrap_or(halved.community_bytes),
            ..halved
        }
    }

    /// The spec's time limits are upper bounds: a setting may tighten them, never loosen them.
    /// (The flags are checked as they are parsed; this covers settings built in code.)
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
        let quotas = self.quotas();
        if !within(quotas.community_captures, self.max_captures) {
            anyhow::bail!(
                "BUZZ_SNAPSHOT_COMMUNITY_MAX_CAPTURES must be 1 to BUZZ_SNAPSHOT_MAX_CAPTURES ({})",
                self.max_captures
            );
        }
        if !within(quotas.community_bytes, self.max_charged_bytes) {
            anyhow::bail!(
                "BUZZ_SNAPSHOT_COMMUNITY_MAX_CHARGED_BYTES must be 1 to BUZZ_SNAPSHOT_MAX_CHARGED_BYTES ({})",
                self.max_charged_bytes
            );
        }
        if !within(self.community_operations, LIMITS.operations_per_process) {
            anyhow::bail!(
                "BUZZ_SNAPSHOT_COMMUNITY_OPERATIONS must be 1 to {}",
                LIMITS.operations_per_process
            );
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

impl TryFrom<Args> for Settings {
    type Error = clap::Error;

    fn try_from(a: Args) -> Result<Self, clap::Error> {
        Ok(Self {
            database_url: a.database_url,
            nats: a.nats.into(),
            nats_prefix: a.nats_prefix,
            redis: buzz_http_auth::RedisConfig::try_from(a.redis).map_err(invalid::<Args>)?,
            redis_prefix: a.redis_prefix,
            admin_listen: a.admin_addr,
            max_db_connections: a.db_connections,
            statement_timeout_ms: a.statement_timeout_ms,
            operation_timeout_ms: a.operation_timeout_ms,
            redis_timeout_ms: a.redis_timeout_ms,
            max_captures: a.max_captures,
            max_charged_bytes: a.max_charged_bytes,
            community_max_captures: a.community_max_captures,
            community_max_charged_bytes: a.community_max_charged_bytes,
            community_operations: a.community_operations,
            max_manifest_bytes: a.max_manifest_bytes,
            lease_ms: a.lease_ms,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const DB: &str = "--database-url=postgres://db/x";

    #[test]
    fn snapshot_settings_refuse_a_ca_file_without_tls() {
        let s = Settings::parse_from(["buzz-snapshot", DB, "--admin-addr", "127.0.0.1:0"]).unwrap();
        assert_eq!(s.admin_listen.port(), 0);
        s.check().unwrap();
        let plain = ["buzz-snapshot", DB, "--redis-url", "redis://r", "--redis-ca-file", "/etc/hostname"];
        let err = Settings::parse_from(plain).unwrap_err().to_string();
        assert!(err.contains("REDIS_URL does not start with rediss://"), "{err}");
    }

    #[test]
    fn the_specs_limits_may_be_tightened_never_loosened() {
        let s = Settings::parse_from(["buzz-snapshot", DB, "--statement-timeout-ms=500"]).unwrap();
        assert_eq!((s.statement_timeout_ms, s.operation_timeout_ms), (500, LIMITS.operation_timeout_ms));
        for bad in ["--statement-timeout-ms=2001", "--operation-timeout-ms=8001", "--operation-timeout-ms=0"]
        {
            assert!(Settings::parse_from(["buzz-snapshot", DB, bad]).is_err(), "{bad}");
        }
        let err = Settings::parse_from(["buzz-snapshot", DB, "--db-connections=0"]).unwrap_err();
        assert!(err.to_string().contains("must be positive"), "{err}");
        let mut s = Settings::local("postgres://db/x", "nats://n", "redis://r", "p", "p:");
        s.check().unwrap();
        s.statement_timeout_ms = LIMITS.statement_timeout_ms + 1;
        assert!(s.check().is_err());
    }

    #[test]
    fn a_community_gets_half_of_each_quota_unless_set_and_never_more_than_the_whole() {
        let s = Settings::parse_from(["buzz-snapshot", DB]).unwrap();
        let q = s.quotas();
        assert_eq!((q.community_captures, q.community_bytes), (16, 32 * 1024 * 1024));
        let s = Settings::parse_from(["buzz-snapshot", DB, "--max-captures=5", "--max-charged-bytes=1000"])
            .unwrap();
        assert_eq!((s.quotas().community_captures, s.quotas().community_bytes), (2, 500));
        let one = Settings::parse_from(["buzz-snapshot", DB, "--max-captures=1"]).unwrap();
        assert_eq!(one.quotas().community_captures, 1);
        let set = ["buzz-snapshot", DB, "--community-max-captures=4", "--community-max-charged-bytes=4096"];
        let s = Settings::parse_from(set).unwrap();
        s.check().unwrap();
        assert_eq!((s.quotas().community_captures, s.quotas().community_bytes), (4, 4096));
        for bad in [
            ["--max-captures=8", "--community-max-captures=9"],
            ["--max-charged-bytes=10", "--community-max-charged-bytes=11"],
        ] {
            let s = Settings::parse_from(["buzz-snapshot", DB, bad[0], bad[1]]).unwrap();
            let err = s.check().unwrap_err().to_string();
            assert!(err.contains("BUZZ_SNAPSHOT_COMMUNITY_MAX_"), "{err}");
        }
        assert!(Settings::parse_from(["buzz-snapshot", DB, "--community-max-captures=0"]).is_err());
        assert_eq!(Settings::parse_from(["buzz-snapshot", DB]).unwrap().community_operations, 2);
        assert!(Settings::parse_from(["buzz-snapshot", DB, "--community-operations=5"]).is_err());
    }
}
