//! The gateway's flags and environment variables, with their defaults and checks. Groups that
//! `buzz dev` reads too are their own `clap::Args`.

use std::net::SocketAddr;
use std::time::Duration;

use buzz_core::Limits;
use buzz_telemetry::settings::{positive, trimmed};

/// Defaults of the stall settings.
pub const BUS_RETRY_AFTER: Duration = Duration::from_millis(250);
/// Default deadline of each Redis call.
pub const REDIS_TIMEOUT: Duration = Duration::from_millis(250);

/// Default per-connection refill rate of the write limit (events per second).
pub const RATE_CONN_PER_SEC: f64 = 20.0;
/// Default per-connection burst of the write limit.
pub const RATE_CONN_BURST: u32 = 100;
/// Default per-pubkey write limit per minute.
pub const RATE_PUBKEY_PER_MIN: u32 = 1200;
/// Default NIP-86 calls per pubkey and community per minute.
pub const RATE_MANAGE_PER_MIN: u32 = 120;
/// Default of `BUZZ_RATE_READ_PER_SEC`.
pub const RATE_READ_PER_SEC: f64 = 20.0;
/// Default of `BUZZ_RATE_READ_BURST`: a client opening its views at once (dozens of REQs) is not
/// refused.
pub const RATE_READ_BURST: u32 = 100;

/// Default bytes queued for one socket's peer.
pub const OUTBOUND_QUEUE_BYTES: usize = 4 << 20;
/// Default time a socket may stay unauthenticated.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time to send a complete HTTP/1 request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default open connections per client address.
pub const MAX_CONNECTIONS_PER_IP: usize = 100;
/// Default open connections per gateway.
pub const MAX_CONNECTIONS: usize = 10_000;

/// Every gateway setting.
#[derive(Debug, clap::Parser)]
#[command(name = "buzz-gateway", version, about = "buzz-relay gateway")]
pub struct Args {
    /// The relay's secret key (64 hex characters); its public key is NIP-11 `pubkey`
    #[arg(long, env = "BUZZ_RELAY_SECRET_KEY", hide_env_values = true, value_parser = trimmed::<String>)]
    pub(super) relay_secret_key: String,
    #[command(flatten)]
    pub(super) nats: buzz_bus::NatsArgs,
    #[command(flatten)]
    pub(super) redis: buzz_http_auth::RedisArgs,
    /// NATS subject prefix
    #[arg(long, env = "BUZZ_NATS_PREFIX", default_value = "buzz", value_parser = trimmed::<String>)]
    pub(super) nats_prefix: String,
    /// Redis key prefix
    #[arg(long, env = "BUZZ_REDIS_PREFIX", default_value = "buzz:", value_parser = trimmed::<String>)]
    pub(super) redis_prefix: String,
    /// WebSocket and HTTP listener
    #[arg(long, env = "BUZZ_GATEWAY_ADDR", default_value = "127.0.0.1:7777", value_parser = trimmed::<SocketAddr>)]
    pub(super) gateway_addr: SocketAddr,
    /// Admin listener (`/metrics`, `/healthz`, `/readyz`), kept off the public port
    #[arg(long, env = "BUZZ_GATEWAY_ADMIN_ADDR", default_value = "127.0.0.1:7084", value_parser = trimmed::<SocketAddr>)]
    pub(super) gateway_admin_addr: SocketAddr,
    /// NIP-11 `name`
    #[arg(long, env = "BUZZ_RELAY_NAME", default_value = "buzz-relay", value_parser = trimmed::<String>)]
    pub(super) relay_name: String,
    #[command(flatten)]
    pub(super) limits: LimitArgs,
    #[command(flatten)]
    pub(super) timing: TimingArgs,
    #[command(flatten)]
    pub(super) rate: RateLimitArgs,
    #[command(flatten)]
    pub(super) connections: ConnectionLimitArgs,
    #[command(flatten)]
    pub(super) stalls: StallArgs,
    #[command(flatten)]
    pub(super) nip_fi: buzz_fi::FiArgs,
}

/// NIP-11 `limitation`s the gateway enforces.
#[derive(Debug, clap::Args)]
pub struct LimitArgs {
    /// Largest client message in bytes, checked before parsing
    #[arg(long, env = "BUZZ_MAX_MESSAGE_BYTES", default_value_t = Limits::default().max_message_length, value_parser = trimmed::<usize>)]
    pub(super) max_message_bytes: usize,
    /// Open subscriptions per socket
    #[arg(long, env = "BUZZ_MAX_SUBSCRIPTIONS", default_value_t = Limits::default().max_subscriptions, value_parser = trimmed::<usize>)]
    pub(super) max_subscriptions: usize,
    /// Filters per REQ/COUNT
    #[arg(long, env = "BUZZ_MAX_FILTERS", default_value_t = Limits::default().max_filters, value_parser = trimmed::<usize>)]
    pub(super) max_filters: usize,
    /// Largest `limit` of a filter (larger is clamped)
    #[arg(long, env = "BUZZ_MAX_LIMIT", default_value_t = Limits::default().max_limit, value_parser = trimmed::<u32>)]
    pub(super) max_limit: u32,
    /// Tags per event
    #[arg(long, env = "BUZZ_MAX_EVENT_TAGS", default_value_t = Limits::default().max_event_tags, value_parser = trimmed::<usize>)]
    pub(super) max_event_tags: usize,
    /// Event content bytes
    #[arg(long, env = "BUZZ_MAX_CONTENT_BYTES", default_value_t = Limits::default().max_content_length, value_parser = trimmed::<usize>)]
    pub(super) max_content_bytes: usize,
    /// How far ahead of this clock an event's created_at may be, in seconds (0 would refuse a
    /// client whose clock is a second ahead)
    #[arg(long, env = "BUZZ_CREATED_AT_UPPER_LIMIT_SECS", default_value_t = Limits::default().created_at_upper_limit, value_parser = positive::<u64>)]
    pub(super) created_at_upper_limit_secs: u64,
}

/// Socket and bus timing, in seconds.
#[derive(Debug, clap::Args)]
pub struct TimingArgs {
    /// WebSocket ping period
    #[arg(long, env = "BUZZ_PING_INTERVAL_SECS", default_value_t = 30, value_parser = positive::<u64>)]
    pub(super) ping_interval_secs: u64,
    /// A socket silent this long is closed
    #[arg(long, env = "BUZZ_IDLE_TIMEOUT_SECS", default_value_t = 90, value_parser = positive::<u64>)]
    pub(super) idle_timeout_secs: u64,
    /// A bus request or query stream that takes longer answers `error:`
    #[arg(long, env = "BUZZ_BUS_TIMEOUT_SECS", default_value_t = 5, value_parser = positive::<u64>)]
    pub(super) bus_timeout_secs: u64,
    /// Time open sockets get to close on SIGTERM
    #[arg(long, env = "BUZZ_SHUTDOWN_GRACE_SECS", default_value_t = 10, value_parser = positive::<u64>)]
    pub(super) shutdown_grace_secs: u64,
    /// Events of one socket being written at once
    #[arg(long, env = "BUZZ_MAX_INFLIGHT_WRITES", default_value_t = 32, value_parser = positive::<usize>)]
    pub(super) max_inflight_writes: usize,
    /// REQ/COUNT queries of one socket running at once (more wait their turn)
    #[arg(long, env = "BUZZ_MAX_INFLIGHT_QUERIES", default_value_t = MAX_INFLIGHT_QUERIES, value_parser = positive::<usize>)]
    pub(super) max_inflight_queries: usize,
    /// REQ/COUNT queries of one key running at once on this gateway, over all its sockets
    #[arg(long, env = "BUZZ_MAX_INFLIGHT_QUERIES_PER_KEY", default_value_t = MAX_INFLIGHT_QUERIES_PER_KEY, value_parser = positive::<usize>)]
    pub(super) max_inflight_queries_per_key: usize,
}

/// Default of `BUZZ_MAX_INFLIGHT_QUERIES`.
pub const MAX_INFLIGHT_QUERIES: usize = 8;
/// Default of `BUZZ_MAX_INFLIGHT_QUERIES_PER_KEY`.
pub const MAX_INFLIGHT_QUERIES_PER_KEY: usize = 16;

/// The write rate limits (also read by `buzz dev`).
#[derive(Debug, Clone, clap::Args)]
pub struct RateLimitArgs {
    /// Per-connection write limit: EVENTs per second refilled into the socket's bucket
    #[arg(long, env = "BUZZ_RATE_CONN_PER_SEC", default_value_t = RATE_CONN_PER_SEC, value_parser = rate_per_sec)]
    pub(super) rate_conn_per_sec: f64,
    /// Per-connection bucket size: EVENTs a socket may send at once
    #[arg(long, env = "BUZZ_RATE_CONN_BURST", default_value_t = RATE_CONN_BURST, value_parser = rate::<u32>)]
    pub(super) rate_conn_burst: u32,
    /// Per-pubkey write limit per community in any 60 s, across gateways
    #[arg(long, env = "BUZZ_RATE_PUBKEY_PER_MIN", default_value_t = RATE_PUBKEY_PER_MIN, value_parser = rate::<u32>)]
    pub(super) rate_pubkey_per_min: u32,
    /// NIP-86 calls (`POST /`) per pubkey per community in any 60 s, across gateways
    #[arg(long, env = "BUZZ_RATE_MANAGE_PER_MIN", default_value_t = RATE_MANAGE_PER_MIN, value_parser = rate::<u32>)]
    pub(super) rate_manage_per_min: u32,
    /// Per-connection read limit: REQs and COUNTs per second refilled into the socket's bucket
    #[arg(long, env = "BUZZ_RATE_READ_PER_SEC", default_value_t = RATE_READ_PER_SEC, value_parser = rate_per_sec)]
    pub(super) rate_read_per_sec: f64,
    /// Per-connection read bucket size: REQs and COUNTs a socket may send at once
    #[arg(long, env = "BUZZ_RATE_READ_BURST", default_value_t = RATE_READ_BURST, value_parser = rate::<u32>)]
    pub(super) rate_read_burst: u32,
}

/// The slow and idle peer settings (also read by `buzz dev`).
#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionLimitArgs {
    /// Bytes queued for one socket's peer before it is closed as too slow
    #[arg(long, env = "BUZZ_OUTBOUND_QUEUE_BYTES", default_value_t = OUTBOUND_QUEUE_BYTES, value_parser = positive::<usize>)]
    pub(super) outbound_queue_bytes: usize,
    /// Seconds a socket may stay unauthenticated
    #[arg(long, env = "BUZZ_AUTH_TIMEOUT_SECS", default_value_t = AUTH_TIMEOUT.as_secs(), value_parser = positive::<u64>)]
    pub(super) auth_timeout_secs: u64,
    /// Seconds to send a complete HTTP request head
    #[arg(long, env = "BUZZ_HEADER_READ_TIMEOUT_SECS", default_value_t = HEADER_READ_TIMEOUT.as_secs(), value_parser = positive::<u64>)]
    pub(super) header_read_timeout_secs: u64,
    /// Open connections per client address (IPv6: per /64)
    #[arg(long, env = "BUZZ_MAX_CONNECTIONS_PER_IP", default_value_t = MAX_CONNECTIONS_PER_IP, value_parser = positive::<usize>)]
    pub(super) max_connections_per_ip: usize,
    /// Open connections per gateway
    #[arg(long, env = "BUZZ_MAX_CONNECTIONS", default_value_t = MAX_CONNECTIONS, value_parser = positive::<usize>)]
    pub(super) max_connections: usize,
}

/// Deadlines against stalled replicas and Redis, in milliseconds (also read by `buzz dev`).
#[derive(Debug, Clone, clap::Args)]
pub struct StallArgs {
    /// An idempotent bus request unanswered this long is sent again
    #[arg(long, env = "BUZZ_BUS_RETRY_AFTER_MS", default_value_t = millis(BUS_RETRY_AFTER), value_parser = retry_after_ms)]
    pub(super) bus_retry_after_ms: u64,
    /// Deadline of every Redis call
    #[arg(long, env = "BUZZ_REDIS_TIMEOUT_MS", default_value_t = millis(REDIS_TIMEOUT), value_parser = positive::<u64>)]
    pub(super) redis_timeout_ms: u64,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A rate setting: positive, since 0 would silently mean either "off" or "nothing".
fn rate<T: std::str::FromStr + PartialOrd + Default>(raw: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    positive(raw).map_err(|e| format!("{e} (rate limits cannot be switched off; set a high value instead)"))
}

/// A rate per second: positive and finite (`inf` and `NaN` parse as numbers but are no rate).
fn rate_per_sec(raw: &str) -> Result<f64, String> {
    let v: f64 = rate(raw)?;
    if !v.is_finite() {
        return Err("must be finite".to_owned());
    }
    Ok(v)
}

/// Value parser of `BUZZ_BUS_RETRY_AFTER_MS`: at least 100 ms, so that a replica that took a
/// request has acknowledged it (`buzz_bus::serve::ACK_AFTER`, 40 ms) well before it is hedged.
fn retry_after_ms(raw: &str) -> Result<u64, String> {
    let v: u64 = positive(raw)?;
    if v < 100 {
        return Err("must be at least 100 (replicas acknowledge slow requests after 40 ms)".to_owned());
    }
    Ok(v)
}
