//! Gateway settings, from the environment.

use std::net::SocketAddr;
use std::time::Duration;

use buzz_core::Limits;
use buzz_telemetry::runtime::{env_or, env_required};

#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    /// The admin listener (`BUZZ_GATEWAY_ADMIN_ADDR`): `/metrics`, `/healthz`, `/readyz`, kept
    /// off the public port so that metrics never reach tenants through the Ingress.
    pub admin_listen: SocketAddr,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    /// Redis URL and CA file (`REDIS_URL`, `REDIS_CA_FILE`).
    pub redis: buzz_http_auth::RedisConfig,
    pub nats_prefix: String,
    pub redis_prefix: String,
    /// Public key of the relay (derived from `BUZZ_RELAY_SECRET_KEY`), advertised in NIP-11.
    pub relay_pubkey: String,
    pub relay_name: String,
    pub limits: Limits,
    /// WebSocket ping period; a socket silent for `idle_timeout` is closed.
    pub ping_interval: Duration,
    pub idle_timeout: Duration,
    /// How long a bus request may take before the client gets `error:`.
    pub bus_timeout: Duration,
    /// Time given to open sockets to close cleanly on shutdown.
    pub shutdown_grace: Duration,
    /// Events from one socket being written at once.
    pub max_inflight_writes: usize,
    /// Write rate limits (see `ratelimit`): per connection, a token bucket refilling at
    /// `rate_conn_per_sec` up to `rate_conn_burst`; per pubkey across gateways,
    /// `rate_pubkey_per_min` in any 60 s. All must be positive: limits cannot be switched off.
    pub rate_conn_per_sec: f64,
    pub rate_conn_burst: u32,
    pub rate_pubkey_per_min: u32,
    /// Bytes one socket may have queued for its peer; beyond that the peer is too slow and the
    /// socket is closed (1008). Paced REQ answers wait for half of it to be free.
    pub outbound_queue_bytes: usize,
    /// Time a socket may stay unauthenticated (NIP-42 AUTH or a bearer token) before it is closed.
    pub auth_timeout: Duration,
    /// Time a connection gets to send a complete HTTP/1 request head (also an idle keep-alive).
    pub header_read_timeout: Duration,
    /// Open connections (HTTP and WebSocket) per client IP address, and in total.
    pub max_connections_per_ip: usize,
    pub max_connections: usize,
    /// Stalls (docs/design.md, "Stalls"): an idempotent bus request unanswered this long is sent
    /// again (`BUZZ_BUS_RETRY_AFTER_MS`); each Redis call waits at most `redis_timeout`
    /// (`BUZZ_REDIS_TIMEOUT_MS`), then the rate limit fails open and NIP-98 fails closed.
    pub bus_retry_after: Duration,
    pub redis_timeout: Duration,
    /// The `BUZZ_NIP_FI_*` settings (mode, issuers, connection lifetime).
    pub nip_fi: buzz_fi::FiSettings,
}

/// Defaults of the stall settings.
pub const BUS_RETRY_AFTER: Duration = Duration::from_millis(250);
pub const REDIS_TIMEOUT: Duration = Duration::from_millis(250);

/// Defaults of the write rate limits.
pub const RATE_CONN_PER_SEC: f64 = 20.0;
pub const RATE_CONN_BURST: u32 = 100;
pub const RATE_PUBKEY_PER_MIN: u32 = 1200;

/// Defaults of the connection limits (see docs/configuration.md).
pub const OUTBOUND_QUEUE_BYTES: usize = 4 << 20;
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(60);
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_CONNECTIONS_PER_IP: usize = 100;
pub const MAX_CONNECTIONS: usize = 10_000;

/// A rate setting: positive and finite, since 0 would silently mean either "off" or "nothing".
fn positive_rate<T: PartialOrd + Default + std::str::FromStr + Copy>(
    name: &str,
    default: T,
) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    let v: T = env_or(name, default)?;
    if v <= T::default() {
        anyhow::bail!(
            "{name} must be positive (rate limits cannot be switched off; set a high value instead)"
        );
    }
    Ok(v)
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let secret = env_required("BUZZ_RELAY_SECRET_KEY")?;
        let keys = buzz_core::Keys::from_secret_hex(&secret)
            .ok_or_else(|| anyhow::anyhow!("BUZZ_RELAY_SECRET_KEY is not a valid 64-char hex secret key"))?;
        let d = Limits::default();
        let limits = Limits {
            max_message_length: env_or("BUZZ_MAX_MESSAGE_BYTES", d.max_message_length)?,
            max_subscriptions: env_or("BUZZ_MAX_SUBSCRIPTIONS", d.max_subscriptions)?,
            max_filters: env_or("BUZZ_MAX_FILTERS", d.max_filters)?,
            max_limit: env_or("BUZZ_MAX_LIMIT", d.max_limit)?,
            max_event_tags: env_or("BUZZ_MAX_EVENT_TAGS", d.max_event_tags)?,
            max_content_length: env_or("BUZZ_MAX_CONTENT_BYTES", d.max_content_length)?,
            created_at_upper_limit: env_or("BUZZ_CREATED_AT_UPPER_LIMIT_SECS", d.created_at_upper_limit)?,
            ..d
        };
        // 0 would refuse every event of a client whose clock is a second ahead.
        if limits.created_at_upper_limit == 0 {
            anyhow::bail!("BUZZ_CREATED_AT_UPPER_LIMIT_SECS must be positive");
        }
        let secs = |name: &str, default: u64| -> anyhow::Result<Duration> {
            let v: u64 = env_or(name, default)?;
            if v == 0 {
                anyhow::bail!("{name} must be positive");
            }
            Ok(Duration::from_secs(v))
        };
        Self {
            listen: env_or("BUZZ_GATEWAY_ADDR", SocketAddr::from(([127, 0, 0, 1], 7777)))?,
            admin_listen: env_or("BUZZ_GATEWAY_ADMIN_ADDR", SocketAddr::from(([127, 0, 0, 1], 7084)))?,
            nats: buzz_bus::NatsConfig::from_env()?,
            redis: buzz_http_auth::RedisConfig::from_env().map_err(anyhow::Error::msg)?,
            nats_prefix: env_or("BUZZ_NATS_PREFIX", "buzz".to_owned())?,
            redis_prefix: env_or("BUZZ_REDIS_PREFIX", "buzz:".to_owned())?,
            relay_pubkey: keys.public_hex(),
            relay_name: env_or("BUZZ_RELAY_NAME", "buzz-relay".to_owned())?,
            limits,
            ping_interval: secs("BUZZ_PING_INTERVAL_SECS", 30)?,
            idle_timeout: secs("BUZZ_IDLE_TIMEOUT_SECS", 90)?,
            bus_timeout: secs("BUZZ_BUS_TIMEOUT_SECS", 5)?,
            shutdown_grace: secs("BUZZ_SHUTDOWN_GRACE_SECS", 10)?,
            max_inflight_writes: env_or("BUZZ_MAX_INFLIGHT_WRITES", 32)?,
            rate_conn_per_sec: RATE_CONN_PER_SEC,
            rate_conn_burst: RATE_CONN_BURST,
            rate_pubkey_per_min: RATE_PUBKEY_PER_MIN,
            outbound_queue_bytes: OUTBOUND_QUEUE_BYTES,
            auth_timeout: AUTH_TIMEOUT,
            header_read_timeout: HEADER_READ_TIMEOUT,
            max_connections_per_ip: MAX_CONNECTIONS_PER_IP,
            max_connections: MAX_CONNECTIONS,
            bus_retry_after: BUS_RETRY_AFTER,
            redis_timeout: REDIS_TIMEOUT,
            nip_fi: buzz_fi::FiSettings::from_env()?,
        }
        .rate_limits_from_env()?
        .connection_limits_from_env()?
        .stall_settings_from_env()
    }

    /// Reads the slow/idle peer settings (`BUZZ_OUTBOUND_QUEUE_BYTES`, `BUZZ_AUTH_TIMEOUT_SECS`,
    /// `BUZZ_HEADER_READ_TIMEOUT_SECS`, `BUZZ_MAX_CONNECTIONS_PER_IP`, `BUZZ_MAX_CONNECTIONS`)
    /// over the current values (also used by `buzz dev`). All must be positive.
    pub fn connection_limits_from_env(mut self) -> anyhow::Result<Self> {
        let secs = |name: &str, current: Duration| -> anyhow::Result<Duration> {
            let v: u64 = env_or(name, current.as_secs())?;
            anyhow::ensure!(v > 0, "{name} must be positive");
            Ok(Duration::from_secs(v))
        };
        self.outbound_queue_bytes = positive_limit("BUZZ_OUTBOUND_QUEUE_BYTES", self.outbound_queue_bytes)?;
        self.auth_timeout = secs("BUZZ_AUTH_TIMEOUT_SECS", self.auth_timeout)?;
        self.header_read_timeout = secs("BUZZ_HEADER_READ_TIMEOUT_SECS", self.header_read_timeout)?;
        self.max_connections_per_ip =
            positive_limit("BUZZ_MAX_CONNECTIONS_PER_IP", self.max_connections_per_ip)?;
        self.max_connections = positive_limit("BUZZ_MAX_CONNECTIONS", self.max_connections)?;
        Ok(self)
    }

    /// Reads `BUZZ_BUS_RETRY_AFTER_MS` and `BUZZ_REDIS_TIMEOUT_MS` (positive milliseconds).
    pub fn stall_settings_from_env(mut self) -> anyhow::Result<Self> {
        let ms = |name: &str, default: Duration| -> anyhow::Result<Duration> {
            let v: u64 = env_or(name, u64::try_from(default.as_millis()).unwrap_or(u64::MAX))?;
            anyhow::ensure!(v > 0, "{name} must be positive (milliseconds)");
            Ok(Duration::from_millis(v))
        };
        self.bus_retry_after = ms("BUZZ_BUS_RETRY_AFTER_MS", self.bus_retry_after)?;
        self.redis_timeout = ms("BUZZ_REDIS_TIMEOUT_MS", self.redis_timeout)?;
        Ok(self)
    }

    /// The retry schedule of idempotent bus requests (`buzz_bus::retry`).
    #[must_use]
    pub fn bus_retry(&self) -> buzz_bus::retry::Retry {
        buzz_bus::retry::Retry { first: self.bus_retry_after, total: self.bus_timeout }
    }

    /// Reads `BUZZ_RATE_CONN_PER_SEC`, `BUZZ_RATE_CONN_BURST` and `BUZZ_RATE_PUBKEY_PER_MIN` over
    /// the current values (also used by `buzz dev`, which starts from [`Settings::local`]).
    pub fn rate_limits_from_env(mut self) -> anyhow::Result<Self> {
        let per_sec: f64 = positive_rate("BUZZ_RATE_CONN_PER_SEC", self.rate_conn_per_sec)?;
        anyhow::ensure!(per_sec.is_finite(), "BUZZ_RATE_CONN_PER_SEC must be finite");
        self.rate_conn_per_sec = per_sec;
        self.rate_conn_burst = positive_rate("BUZZ_RATE_CONN_BURST", self.rate_conn_burst)?;
        self.rate_pubkey_per_min = positive_rate("BUZZ_RATE_PUBKEY_PER_MIN", self.rate_pubkey_per_min)?;
        Ok(self)
    }

    /// Settings for tests and embedding: loopback, port 0.
    #[must_use]
    pub fn local(
        nats_url: &str,
        redis_url: &str,
        nats_prefix: &str,
        redis_prefix: &str,
        relay_pubkey: String,
    ) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            nats: buzz_bus::NatsConfig::new(nats_url),
            redis: buzz_http_auth::RedisConfig::new(redis_url),
            nats_prefix: nats_prefix.to_owned(),
            redis_prefix: redis_prefix.to_owned(),
            relay_pubkey,
            relay_name: "buzz-relay".to_owned(),
            limits: Limits::default(),
            ping_interval: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(90),
            bus_timeout: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(5),
            max_inflight_writes: 32,
            rate_conn_per_sec: RATE_CONN_PER_SEC,
            rate_conn_burst: RATE_CONN_BURST,
            rate_pubkey_per_min: RATE_PUBKEY_PER_MIN,
            outbound_queue_bytes: OUTBOUND_QUEUE_BYTES,
            auth_timeout: AUTH_TIMEOUT,
            header_read_timeout: HEADER_READ_TIMEOUT,
            max_connections_per_ip: MAX_CONNECTIONS_PER_IP,
            max_connections: MAX_CONNECTIONS,
            bus_retry_after: BUS_RETRY_AFTER,
            redis_timeout: REDIS_TIMEOUT,
            nip_fi: buzz_fi::FiSettings::default(),
        }
    }
}

/// A size or count limit: positive (0 would refuse everything; set a large value to relax it).
fn positive_limit(name: &str, default: usize) -> anyhow::Result<usize> {
    let v: usize = env_or(name, default)?;
    anyhow::ensure!(v > 0, "{name} must be positive");
    Ok(v)
}
