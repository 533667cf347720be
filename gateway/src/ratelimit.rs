//! Write rate limits (docs/design.md, "Rate limits"), and the NIP-86 call limit built the same way.
//!
//! - Per connection: a token bucket owned by the socket task ([`TokenBucket`]); no shared state.
//! - Per pubkey, across every gateway: a sliding-window counter in Redis ([`PubkeyLimiter`]),
//!   keyed by community and pubkey under `BUZZ_REDIS_PREFIX` (writes: [`EVENTS`]; NIP-86 calls,
//!   under keys of their own: [`NIP86_CALLS`]). The check and the increment are one
//!   Lua script, so concurrent writes through different gateways never both take the last slot.
//!   A gateway takes a pubkey's slots in leases ([`Leases`]): the script grants up to the lease
//!   size at once (counting them all in the window), and the gateway spends them locally until
//!   the window ends, so a busy writer costs one Redis call per lease instead of one per event.
//!   Leases start at one slot and double within a window up to `per_min / 64` (at most 64), so a
//!   limit under 128 is counted event by event, and slots leased but unused can refuse a writer
//!   early by at most `lease - 1` per other gateway (never admit more than the limit).
//!
//! Limits protect capacity, not access: when Redis fails, or does not answer within the Redis
//! deadline (`BUZZ_REDIS_TIMEOUT_MS`), the pubkey limit fails open (the write proceeds) with a
//! warning and `buzz_gateway_rate_limit_errors_total`; the per-connection bucket still applies.

use std::time::{Duration, Instant};

use buzz_core::CommunityId;
use fred::prelude::*;

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
/// Grants up to ARGV[4] slots (at least one, or none): as many as keep the estimate within the
/// limit.
const SCRIPT: &str = r"
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
local grant = math.min(tonumber(ARGV[4]), math.floor(tonumber(ARGV[2]) - (prev * tonumber(ARGV[1]) + cur)))
if grant < 1 then
  return 0
end
redis.call('INCRBY', KEYS[1], grant)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return grant
";

/// Largest lease: `per_min / 64`, between 1 and 64 slots.
fn max_lease(per_min: u32) -> u32 {
    (per_min / 64).clamp(1, 64)
}

/// One pubkey's slots leased by this gateway in one window.
#[derive(Debug, Clone, Copy)]
struct Lease {
    window: u128,
    /// Slots granted and not yet spent.
    left: u32,
    /// The size of the next lease asked for in this window.
    next: u32,
}

/// The slots this gateway holds, per community and pubkey; only the current window's count.
#[derive(Debug, Default)]
pub struct Leases {
    held: std::sync::Mutex<std::collections::HashMap<(CommunityId, buzz_core::Pubkey), Lease>>,
}

/// Entries kept before the ones of past windows are dropped.
const LEASES_SWEEP_AT: usize = 4096;

impl Leases {
    /// Spends a held slot of `window`; otherwise the size of the lease to ask Redis for.
    fn take(&self, key: &(CommunityId, buzz_core::Pubkey), window: u128) -> Result<(), u32> {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match held.get_mut(key) {
            Some(l) if l.window == window && l.left > 0 => {
                l.left -= 1;
                Ok(())
            }
            Some(l) if l.window == window => Err(l.next),
            _ => Err(1),
        }
    }

    /// Records a grant of `granted` slots (one of them spent now) asked for in `window`, and
    /// doubles the next lease up to `max`.
    fn granted(&self, key: (CommunityId, buzz_core::Pubkey), window: u128, granted: u32, max: u32) {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.len() >= LEASES_SWEEP_AT {
            held.retain(|_, l| l.window >= window);
        }
        let lease = held.entry(key).or_insert(Lease { window, left: 0, next: 1 });
        if lease.window != window {
            *lease = Lease { window, left: 0, next: 1 };
        }
        lease.left += granted.saturating_sub(1);
        lease.next = (lease.next.saturating_mul(2)).min(max);
    }
}

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

/// What a [`PubkeyLimiter`] counts: its Redis key segment, its metric label and, in its refusal,
/// what went over the limit.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    key: &'static str,
    label: &'static str,
    noun: &'static str,
}

/// Client writes (`EVENT`): keys `<prefix>rate:pk:`, as every release counted them.
pub const EVENTS: Counted = Counted { key: "pk", label: "pubkey", noun: "events" };
/// NIP-86 calls (`POST /`): keys `<prefix>rate:nip86:`.
pub const NIP86_CALLS: Counted = Counted { key: "nip86", label: "nip86", noun: "NIP-86 calls" };

/// A per-pubkey limit shared by every gateway through Redis.
#[derive(Clone)]
pub struct PubkeyLimiter {
    redis: Pool,
    prefix: String,
    counted: Counted,
    per_min: u32,
    leases: std::sync::Arc<Leases>,
    /// Longest wait for Redis; past it the check fails open.
    timeout: Duration,
}

impl PubkeyLimiter {
    /// `per_min` writes per pubkey and community a minute, counted in Redis under `<redis_prefix>rate:pk:`.
    #[must_use]
    pub fn new(redis: Pool, redis_prefix: &str, per_min: u32) -> Self {
        Self::counting(EVENTS, redis, redis_prefix, per_min)
    }

    /// `per_min` of what `counted` names per pubkey and community a minute, counted in Redis
    /// under `<redis_prefix>rate:<its key>:`.
    #[must_use]
    pub fn counting(counted: Counted, redis: Pool, redis_prefix: &str, per_min: u32) -> Self {
        let timeout = crate::settings::REDIS_TIMEOUT;
        let leases = std::sync::Arc::default();
        let prefix = format!("{redis_prefix}rate:{}:", counted.key);
        Self { redis, prefix, counted, per_min, leases, timeout }
    }

    /// The deadline of each Redis call (default [`crate::settings::REDIS_TIMEOUT`]).
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// Admits one write by `pubkey` in `community` (from a held lease, or a new one from Redis):
    /// `Ok(true)` admitted, `Ok(false)` over the limit.
    pub async fn admit(
        &self,
        community: CommunityId,
        pubkey: &buzz_core::Pubkey,
    ) -> Result<bool, LimiterUnavailable> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let window_ms = WINDOW.as_millis();
        let window = now / window_ms;
        let key = (community, pubkey.clone());
        let want = match self.leases.take(&key, window) {
            Ok(()) => return Ok(true),
            Err(want) => want,
        };
        let into = (now % window_ms) as f64 / window_ms as f64;
        let weight = 1.0 - into;
        // One hash tag per (community, pubkey): both keys land on the same cluster slot.
        let base = format!("{}{{{community}:{pubkey}}}:", self.prefix);
        let keys = vec![format!("{base}{window}"), format!("{base}{}", window.saturating_sub(1))];
        let args = vec![
            format!("{weight:.6}"),
            self.per_min.to_string(),
            (window_ms * 2).to_string(),
            want.to_string(),
        ];
        let eval = self.redis.eval::<i64, _, _, _>(SCRIPT, keys, args);
        let granted = tokio::time::timeout(self.timeout, eval)
            .await
            .map_err(|_| LimiterUnavailable::Timeout(self.timeout))??;
        let granted = u32::try_from(granted).unwrap_or(0);
        if granted == 0 {
            return Ok(false);
        }
        self.leases.granted(key, window, granted, max_lease(self.per_min));
        Ok(true)
    }

    /// [`Self::admit`] with the fail-open policy applied: `Err(reason)` only when over the limit.
    pub async fn check(&self, community: CommunityId, pubkey: &buzz_core::Pubkey) -> Result<(), String> {
        match self.admit(community, pubkey).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                metrics::counter!("buzz_gateway_rate_limited_total", "limit" => self.counted.label)
                    .increment(1);
                let (n, noun) = (self.per_min, self.counted.noun);
                Err(format!("rate-limited: more than {n} {noun} per minute from this pubkey"))
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
    fn leases_start_at_one_double_to_the_cap_and_end_with_their_window() {
        let leases = Leases::default();
        let key = (CommunityId::nil(), buzz_core::Pubkey::parse(&"a".repeat(64)).unwrap());
        assert_eq!(max_lease(5), 1, "a small limit is counted event by event");
        assert_eq!(max_lease(1200), 18);
        assert_eq!(max_lease(u32::MAX), 64);
        assert_eq!(leases.take(&key, 7), Err(1));
        leases.granted(key.clone(), 7, 1, 4);
        assert_eq!(leases.take(&key, 7), Err(2));
        leases.granted(key.clone(), 7, 2, 4);
        assert_eq!(leases.take(&key, 7), Ok(()));
        assert_eq!(leases.take(&key, 7), Err(4));
        // Redis granted less than asked (the limit is near): only what was granted is spent.
        leases.granted(key.clone(), 7, 2, 4);
        assert_eq!(leases.take(&key, 7), Ok(()));
        assert_eq!(leases.take(&key, 7), Err(4), "the cap holds");
        leases.granted(key.clone(), 7, 4, 4);
        // A new window: held slots are dropped and leases start at one again.
        assert_eq!(leases.take(&key, 8), Err(1));
        leases.granted(key.clone(), 8, 1, 4);
        assert_eq!(leases.take(&key, 8), Err(2));
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
