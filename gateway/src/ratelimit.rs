//! Write rate limits (docs/design.md, "Rate limits").
//!
//! - Per connection: a token bucket owned by the socket task ([`TokenBucket`]); no shared state.
//! - Per pubkey, across every gateway: a sliding-window counter in Redis ([`PubkeyLimiter`]),
//!   keyed by community and pubkey under `BUZZ_REDIS_PREFIX`. The check and the increment are one
//!   Lua script, so concurrent writes through different gateways never both take the last slot.
//!
//! Limits protect capacity, not access: when Redis fails, or does not answer within the Redis
//! deadline (`BUZZ_REDIS_TIMEOUT_MS`), the pubkey limit fails open (the write proceeds) with a
//! warning and `buzz_gateway_rate_limit_errors_total`; the per-connection bucket still applies.

use std::time::{Duration, Instant};

use fred::prelude::*;
use uuid::Uuid;

/// A refilling bucket: `burst` writes at once, then `per_sec` per second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_sec: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` (at least 1) refilling at `per_sec`.
    #[must_use]
    pub fn new(per_sec: f64, burst: u32) -> Self {
        Self::new_at(per_sec, burst, Instant::now())
    }

    fn new_at(per_sec: f64, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self { per_sec, burst, tokens: burst, last: now }
    }

    /// Takes one token; false when the bucket is empty.
    pub fn try_take(&mut self) -> bool {
        self.try_take_at(Instant::now())
    }

    fn try_take_at(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.per_sec).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Window length of the per-pubkey limit.
const WINDOW: Duration = Duration::from_secs(60);

/// Sliding-window estimate over the current and the previous fixed minute: the previous count
/// weighted by how much of it still lies within the last 60 s, plus the current count. A write is
/// admitted (and counted) only while the estimate stays within the limit.
const SCRIPT: &str = r"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
if prev * tonumber(ARGV[1]) + cur + 1 > tonumber(ARGV[2]) then
  return 0
end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
";

/// Why the shared rate limit could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum LimiterUnavailable {
    /// Redis answered with an error.
    #[error("rate limit store unavailable: {0}")]
    Redis(#[from] fred::error::Error),
    /// Redis did not answer within the limiter's timeout.
    #[error("rate limit store did not answer within {0:?}")]
    Timeout(Duration),
}

/// The per-pubkey write limit shared by every gateway through Redis.
#[derive(Clone)]
pub struct PubkeyLimiter {
    redis: Pool,
    prefix: String,
    per_min: u32,
    /// Longest wait for Redis; past it the check fails open.
    timeout: Duration,
}

impl PubkeyLimiter {
    /// `per_min` writes per pubkey and community a minute, counted in Redis under `<redis_prefix>rate:pk:`.
    #[must_use]
    pub fn new(redis: Pool, redis_prefix: &str, per_min: u32) -> Self {
        let timeout = crate::settings::REDIS_TIMEOUT;
        Self { redis, prefix: format!("{redis_prefix}rate:pk:"), per_min, timeout }
    }

    /// The deadline of each Redis call (default [`crate::settings::REDIS_TIMEOUT`]).
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// Admits one write by `pubkey` in `community`: `Ok(true)` admitted, `Ok(false)` over the limit.
    pub async fn admit(&self, community: Uuid, pubkey: &str) -> Result<bool, LimiterUnavailable> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let window_ms = WINDOW.as_millis();
        let window = now / window_ms;
        let into = (now % window_ms) as f64 / window_ms as f64;
        let weight = 1.0 - into;
        // One hash tag per (community, pubkey): both keys land on the same cluster slot.
        let base = format!("{}{{{community}:{pubkey}}}:", self.prefix);
        let keys = vec![format!("{base}{window}"), format!("{base}{}", window.saturating_sub(1))];
        let args = vec![format!("{weight:.6}"), self.per_min.to_string(), (window_ms * 2).to_string()];
        let eval = self.redis.eval::<i64, _, _, _>(SCRIPT, keys, args);
        let admitted = tokio::time::timeout(self.timeout, eval)
            .await
            .map_err(|_| LimiterUnavailable::Timeout(self.timeout))??;
        Ok(admitted == 1)
    }

    /// [`Self::admit`] with the fail-open policy applied: `Err(reason)` only when over the limit.
    pub async fn check(&self, community: Uuid, pubkey: &str) -> Result<(), String> {
        match self.admit(community, pubkey).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                metrics::counter!("buzz_gateway_rate_limited_total", "limit" => "pubkey").increment(1);
                Err(format!("rate-limited: more than {} events per minute from this pubkey", self.per_min))
            }
            Err(e) => {
                metrics::counter!("buzz_gateway_rate_limit_errors_total").increment(1);
                tracing::warn!(error = %e, "per-pubkey rate limit skipped (fail open)");
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new_at(2.0, 3, t0);
        assert!(b.try_take_at(t0));
        assert!(b.try_take_at(t0));
        assert!(b.try_take_at(t0));
        assert!(!b.try_take_at(t0));
        // Half a second at 2/s is one token.
        let t1 = t0 + Duration::from_millis(500);
        assert!(b.try_take_at(t1));
        assert!(!b.try_take_at(t1));
        // A long pause refills only up to the burst.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..3 {
            assert!(b.try_take_at(t2));
        }
        assert!(!b.try_take_at(t2));
    }

    #[test]
    fn a_fractional_rate_refills_slowly() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new_at(0.5, 1, t0);
        assert!(b.try_take_at(t0));
        assert!(!b.try_take_at(t0 + Duration::from_secs(1)));
        assert!(b.try_take_at(t0 + Duration::from_secs(2)));
    }
}
