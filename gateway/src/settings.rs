//! Gateway settings: command-line flags or environment variables (docs/configuration.md), checked
//! at start-up into [`Settings`].

mod args;

use std::net::SocketAddr;
use std::time::Duration;

use buzz_core::Limits;
use buzz_telemetry::settings::invalid;

pub use args::{Args, ConnectionLimitArgs, RateLimitArgs, StallArgs};
pub use args::{AUTH_TIMEOUT, BUS_RETRY_AFTER, HEADER_READ_TIMEOUT, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP};
pub use args::{MAX_INFLIGHT_QUERIES, MAX_INFLIGHT_QUERIES_PER_KEY};
pub use args::{
    OUTBOUND_QUEUE_BYTES, RATE_CONN_BURST, RATE_CONN_PER_SEC, RATE_MANAGE_PER_MIN, RATE_PUBKEY_PER_MIN,
    REDIS_TIMEOUT,
};

/// What the gateway runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// WebSocket and HTTP listener (`BUZZ_GATEWAY_ADDR`).
    pub listen: SocketAddr,
    /// The admin listener (`BUZZ_GATEWAY_ADMIN_ADDR`): `/metrics`, `/healthz`, `/readyz`, kept
    /// off the public port so that metrics never reach tenants through the Ingress.
    pub admin_listen: SocketAddr,
    /// NATS URL, CA and credentials files (`NATS_URL`, `NATS_CA_FILE`, `NATS_CREDS_FILE`).
    pub nats: buzz_bus::NatsConfig,
    /// Redis URL and CA file (`REDIS_URL`, `REDIS_CA_FILE`).
    pub redis: buzz_http_auth::RedisConfig,
    /// Subject prefix shared with the other services (`BUZZ_NATS_PREFIX`).
    pub nats_prefix: String,
    /// Prefix of the gateway's Redis keys (`BUZZ_REDIS_PREFIX`).
    pub redis_prefix: String,
    /// Public key of the relay (derived from `BUZZ_RELAY_SECRET_KEY`), advertised in NIP-11.
    pub relay_pubkey: buzz_core::Pubkey,
    /// NIP-11 `name` (`BUZZ_RELAY_NAME`).
    pub relay_name: String,
    /// Message, subscription and event limits, advertised in NIP-11 `limitation`.
    pub limits: Limits,
    /// WebSocket ping period; a socket silent for `idle_timeout` is closed.
    pub ping_interval: Duration,
    /// Silence after which a socket is closed.
    pub idle_timeout: Duration,
    /// How long a bus request may take before the client gets `error:`.
    pub bus_timeout: Duration,
    /// Time given to open sockets to close cleanly on shutdown.
    pub shutdown_grace: Duration,
    /// Events from one socket being written at once.
    pub max_inflight_writes: usize,
    /// REQ/COUNT queries of one socket running at once; more wait their turn. COUNTs waiting or
    /// running are also bounded, by `limits.max_subscriptions` (a REQ is by its subscription).
    pub max_inflight_queries: usize,
    /// REQ/COUNT queries of one key running at once on this gateway, over all its sockets.
    pub max_inflight_queries_per_key: usize,
    /// Read rate limit per socket: a bucket of `rate_read_burst` REQs and COUNTs refilling at
    /// `rate_read_per_sec`; a REQ or COUNT over it is `CLOSED rate-limited:`.
    pub rate_read_per_sec: f64,
    /// Size of the per-connection read bucket.
    pub rate_read_burst: u32,
    /// Write rate limits (see `ratelimit`): per connection, a token bucket refilling at
    /// `rate_conn_per_sec` up to `rate_conn_burst`; per pubkey across gateways,
    /// `rate_pubkey_per_min` in any 60 s. All must be positive: limits cannot be switched off.
    pub rate_conn_per_sec: f64,
    /// Size of the per-connection token bucket.
    pub rate_conn_burst: u32,
    /// Writes per pubkey and community in any 60 s, across gateways.
    pub rate_pubkey_per_min: u32,
    /// NIP-86 calls per pubkey and community in any 60 s, across gateways (the same sliding
    /// window, under its own Redis keys).
    pub rate_manage_per_min: u32,
    /// Bytes one socket may have queued for its peer; beyond that the peer is too slow and the
    /// socket is closed (1008). Paced REQ answers wait for half of it to be free.
    pub outbound_queue_bytes: usize,
    /// Time a socket may stay unauthenticated (NIP-42 AUTH or a bearer token) before it is closed.
    pub auth_timeout: Duration,
    /// Time a connection gets to send a complete HTTP/1 request head (also an idle keep-alive).
    pub header_read_timeout: Duration,
    /// Open connections (HTTP and WebSocket) per client IP address, and in total.
    pub max_connections_per_ip: usize,
    /// Open connections of this gateway in total.
    pub max_connections: usize,
    /// Stalls (docs/design.md, "Stalls"): an idempotent bus request unanswered this long is sent
    /// again (`BUZZ_BUS_RETRY_AFTER_MS`); each Redis call waits at most `redis_timeout`
    /// (`BUZZ_REDIS_TIMEOUT_MS`), then the rate limit fails open and NIP-98 fails closed.
    pub bus_retry_after: Duration,
    /// Deadline of each Redis call.
    pub redis_timeout: Duration,
    /// The `BUZZ_NIP_FI_*` settings (mode, issuers, connection lifetime).
    pub nip_fi: buzz_fi::FiSettings,
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
        Self::parse_from(["buzz-gateway"])
    }

    /// These settings with the write rate limits of `r` (`buzz dev` starts from [`Settings::local`]).
    #[must_use]
    pub fn with_rate_limits(mut self, r: &RateLimitArgs) -> Self {
        self.rate_conn_per_sec = r.rate_conn_per_sec;
        self.rate_conn_burst = r.rate_conn_burst;
        self.rate_pubkey_per_min = r.rate_pubkey_per_min;
        self.rate_manage_per_min = r.rate_manage_per_min;
        self.rate_read_per_sec = r.rate_read_per_sec;
        self.rate_read_burst = r.rate_read_burst;
        self
    }

    /// These settings with the slow and idle peer settings of `c`.
    #[must_use]
    pub fn with_connection_limits(mut self, c: &ConnectionLimitArgs) -> Self {
        self.outbound_queue_bytes = c.outbound_queue_bytes;
        self.auth_timeout = Duration::from_secs(c.auth_timeout_secs);
        self.header_read_timeout = Duration::from_secs(c.header_read_timeout_secs);
        self.max_connections_per_ip = c.max_connections_per_ip;
        self.max_connections = c.max_connections;
        self
    }

    /// These settings with the stall deadlines of `s`.
    #[must_use]
    pub fn with_stall_settings(mut self, s: &StallArgs) -> Self {
        self.bus_retry_after = Duration::from_millis(s.bus_retry_after_ms);
        self.redis_timeout = Duration::from_millis(s.redis_timeout_ms);
        self
    }

    /// The retry schedule of idempotent bus requests (`buzz_bus::retry`).
    #[must_use]
    pub fn bus_retry(&self) -> buzz_bus::retry::Retry {
        buzz_bus::retry::Retry { first: self.bus_retry_after, total: self.bus_timeout }
    }

    /// Settings for tests and embedding: loopback, port 0.
    #[must_use]
    pub fn local(
        nats_url: &str,
        redis_url: &str,
        nats_prefix: &str,
        redis_prefix: &str,
        relay_pubkey: buzz_core::Pubkey,
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
            max_inflight_queries: MAX_INFLIGHT_QUERIES,
            max_inflight_queries_per_key: MAX_INFLIGHT_QUERIES_PER_KEY,
            rate_read_per_sec: args::RATE_READ_PER_SEC,
            rate_read_burst: args::RATE_READ_BURST,
            rate_conn_per_sec: RATE_CONN_PER_SEC,
            rate_conn_burst: RATE_CONN_BURST,
            rate_pubkey_per_min: RATE_PUBKEY_PER_MIN,
            rate_manage_per_min: RATE_MANAGE_PER_MIN,
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

impl TryFrom<Args> for Settings {
    type Error = clap::Error;

    fn try_from(a: Args) -> Result<Self, clap::Error> {
        let keys = buzz_core::Keys::from_secret_hex(&a.relay_secret_key)
            .ok_or_else(|| invalid::<Args>("BUZZ_RELAY_SECRET_KEY is not a valid 64-char hex secret key"))?;
        let redis = buzz_http_auth::RedisConfig::try_from(a.redis).map_err(invalid::<Args>)?;
        let (l, t) = (a.limits, a.timing);
        let limits = Limits {
            max_message_length: l.max_message_bytes,
            max_subscriptions: l.max_subscriptions,
            max_filters: l.max_filters,
            max_limit: l.max_limit,
            max_event_tags: l.max_event_tags,
            max_content_length: l.max_content_bytes,
            created_at_upper_limit: l.created_at_upper_limit_secs,
            ..Limits::default()
        };
        let base = Self {
            listen: a.gateway_addr,
            admin_listen: a.gateway_admin_addr,
            nats: a.nats.into(),
            redis,
            nats_prefix: a.nats_prefix,
            redis_prefix: a.redis_prefix,
            relay_pubkey: keys.pubkey(),
            relay_name: a.relay_name,
            limits,
            ping_interval: Duration::from_secs(t.ping_interval_secs),
            idle_timeout: Duration::from_secs(t.idle_timeout_secs),
            bus_timeout: Duration::from_secs(t.bus_timeout_secs),
            shutdown_grace: Duration::from_secs(t.shutdown_grace_secs),
            max_inflight_writes: t.max_inflight_writes,
            max_inflight_queries: t.max_inflight_queries,
            max_inflight_queries_per_key: t.max_inflight_queries_per_key,
            nip_fi: a.nip_fi.into(),
            // The rate, connection and stall fields, set just below.
            ..Self::local("", "", "", "", keys.pubkey())
        };
        Ok(base
            .with_rate_limits(&a.rate)
            .with_connection_limits(&a.connections)
            .with_stall_settings(&a.stalls))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<Settings, clap::Error> {
        let key = buzz_core::Keys::generate().secret_hex();
        Settings::parse_from(["buzz-gateway", "--relay-secret-key", &key].iter().chain(extra))
    }

    #[test]
    fn gateway_flags_set_every_group() {
        let s = parse(&[
            "--gateway-addr=127.0.0.1:0",
            "--max-limit=9",
            "--created-at-upper-limit-secs=5",
            "--bus-timeout-secs=2",
            "--rate-conn-per-sec=0.5",
            "--rate-manage-per-min=7",
            "--max-connections=70",
            "--redis-timeout-ms=40",
            "--gateway-admin-addr=127.0.0.1:9184",
            "--nip-fi-mode=enforce",
        ])
        .unwrap();
        assert_eq!(s.admin_listen, SocketAddr::from(([127, 0, 0, 1], 9184)));
        assert_eq!(s.nip_fi.mode, buzz_fi::Mode::Enforce);
        assert_eq!((s.listen.port(), s.limits.max_limit, s.limits.created_at_upper_limit), (0, 9, 5));
        assert_eq!((s.bus_timeout, s.redis_timeout), (Duration::from_secs(2), Duration::from_millis(40)));
        assert_eq!((s.rate_conn_per_sec, s.rate_manage_per_min, s.max_connections), (0.5, 7, 70));
        assert_eq!(s.limits.default_limit, Limits::default().default_limit);
    }

    #[test]
    fn zero_nan_and_a_bad_key_stop_start_up() {
        for bad in ["--created-at-upper-limit-secs=0", "--ping-interval-secs=0", "--bus-retry-after-ms=0"] {
            let err = parse(&[bad]).unwrap_err().to_string();
            assert!(err.contains("must be positive"), "{bad}: {err}");
        }
        for bad in ["--rate-pubkey-per-min=0", "--rate-manage-per-min=0"] {
            let err = parse(&[bad]).unwrap_err().to_string();
            assert!(err.contains("rate limits cannot be switched off"), "{bad}: {err}");
        }
        for bad in ["--rate-conn-per-sec=NaN", "--rate-conn-per-sec=inf"] {
            assert!(parse(&[bad]).unwrap_err().to_string().contains("must be finite"), "{bad}");
        }
        let err = Settings::parse_from(["buzz-gateway", "--relay-secret-key", "00"]).unwrap_err().to_string();
        assert!(err.contains("BUZZ_RELAY_SECRET_KEY is not a valid") && !err.contains("\"00\""), "{err}");
    }
}
