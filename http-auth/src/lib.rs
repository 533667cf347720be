//! NIP-98 HTTP authentication for buzz-relay's HTTP surfaces, with the one-use-per-signature replay
//! guard kept in Redis so that every replica sees every use, and the one error convention those
//! surfaces answer with ([`ApiError`]).

mod api;
mod redis;

pub use api::{contract_errors, ApiError};

pub use redis::{connect_redis, RedisArgs, RedisConfig};
use std::time::Duration;

use buzz_core::nip98::{self, Nip98Error};
use buzz_core::{EventId, Pubkey};
use fred::prelude::*;
use fred::types::{Expiration, SetOptions};
use http::{HeaderMap, StatusCode};

/// How far `created_at` may be from now (contract: ±60 s).
pub const WINDOW_SECS: i64 = 60;

/// Why a NIP-98 request was not authenticated; each maps to a status and a code.
#[derive(Debug, thiserror::Error)]
pub enum HttpAuthError {
    /// The header is missing, malformed or does not match the request.
    #[error("{0}")]
    Nip98(#[from] Nip98Error),
    /// The signature was used before.
    #[error("replay detected")]
    Replay,
    /// The replay guard (Redis) failed or did not answer in time.
    #[error("authorization unavailable")]
    Unavailable,
}

impl HttpAuthError {
    /// 401 for a bad or replayed header, 503 when the guard is unavailable.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Nip98(_) | Self::Replay => StatusCode::UNAUTHORIZED,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
    /// The `code` of the JSON error body.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Nip98(Nip98Error::Missing) => "auth_required",
            Self::Nip98(_) => "invalid_auth",
            Self::Replay => "replay_detected",
            Self::Unavailable => "authorization_unavailable",
        }
    }
}

/// Default deadline of the replay guard's Redis call.
pub const DEFAULT_REDIS_TIMEOUT: Duration = Duration::from_millis(250);

/// One use per signature, across replicas.
#[derive(Clone)]
pub struct ReplayGuard {
    redis: Pool,
    prefix: String,
    /// Longest wait for Redis. Past it the request fails closed (503): a signature whose use
    /// cannot be recorded could be replayed, so it is not accepted.
    timeout: Duration,
}

impl ReplayGuard {
    /// A guard keeping its keys under `<prefix>nip98:`, with the default deadline.
    #[must_use]
    pub fn new(redis: Pool, prefix: &str) -> Self {
        Self { redis, prefix: format!("{prefix}nip98:"), timeout: DEFAULT_REDIS_TIMEOUT }
    }

    /// The deadline of the Redis call (default [`DEFAULT_REDIS_TIMEOUT`]).
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// Records the use of `event_id`; false when it was used before. Redis failing or not
    /// answering within the deadline is `Unavailable` (fail closed).
    pub async fn first_use(&self, event_id: &EventId) -> Result<bool, HttpAuthError> {
        // Kept a little past the acceptance window so a replay can never fall out of the guard while
        // its timestamp is still acceptable.
        let ttl = WINDOW_SECS * 2 + 10;
        let set = self.redis.set::<Option<String>, _, _>(
            format!("{}{event_id}", self.prefix),
            "1",
            Some(Expiration::EX(ttl)),
            Some(SetOptions::NX),
            false,
        );
        match tokio::time::timeout(self.timeout, set).await {
            Ok(Ok(set)) => Ok(set.is_some()),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "replay guard unavailable");
                Err(HttpAuthError::Unavailable)
            }
            Err(_) => {
                tracing::error!(timeout_ms = self.timeout.as_millis(), "replay guard did not answer in time");
                Err(HttpAuthError::Unavailable)
            }
        }
    }
}

/// Authenticates a request: decodes `Authorization: Nostr ...`, checks it against `method`, one of
/// `urls` (the caller lists the URL forms it accepts, e.g. https and, for loopback hosts, http),
/// the body hash and the time window, then spends the signature. Returns the signer's pubkey.
pub async fn authenticate(
    headers: &HeaderMap,
    method: &str,
    urls: &[String],
    body: &[u8],
    guard: &ReplayGuard,
) -> Result<Pubkey, HttpAuthError> {
    let value =
        headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or(Nip98Error::Missing)?;
    let event = nip98::decode_header(value)?;
    let now = buzz_core::unix_now();
    let mut last = Nip98Error::UrlMismatch;
    let mut ok = false;
    for url in urls {
        match nip98::validate(&event, method, url, body, now, WINDOW_SECS) {
            Ok(()) => {
                ok = true;
                break;
            }
            Err(Nip98Error::UrlMismatch) => {}
            Err(e) => {
                last = e;
                break;
            }
        }
    }
    if !ok {
        return Err(last.into());
    }
    if !guard.first_use(&event.id).await? {
        return Err(HttpAuthError::Replay);
    }
    Ok(event.pubkey)
}
