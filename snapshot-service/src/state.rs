//! Shared snapshot state in Redis: ONE hash (`<prefix>snapshot`) holds every capture's manifest
//! pages, direct body records, served-page marks and the quota charges (`idx`), so eviction or
//! loss removes them together. Every change is one Lua script (atomic); time is Redis' own clock,
//! so replicas agree on expiry. There is no fallback to process memory: a failed or slow Redis
//! call is `snapshot_unavailable`, a missing record is `snapshot_reset`.
//!
//! Fields: `ugen` (the last generation handed out), `idx` (JSON charges: `g` generation as a
//! decimal string, `c` community, `r` reader, `s` `r`eserved/`a`ctive, `l` lease end ms, `x`
//! expiry ms, `b` charged bytes, `n` pages), and per capture `<g>:m` meta JSON, `<g>:x` expiry ms,
//! `<g>:p:<n>` packed page, `<g>:s:<n>` page served, `<g>:b:<32-byte revision>` body record.
//! (`gen` is 0.1.0's counter, left to 0.1.0 replicas during an upgrade: their numbers stay small,
//! ours are clock-sized, so the two never meet.)
//!
//! Generations never repeat, even when eviction or loss takes the whole hash (`ugen` with it): a
//! generation is Redis' clock in microseconds, or one more than the last when that is not
//! larger, so it grows with the clock whatever Redis forgot. (A counter in the hash restarted at 1
//! after an eviction, and a start in flight could then publish under another reader's
//! reservation.) The hash expires when its last capture (or reservation) ends, and is deleted
//! when none is left.
//!
//! Each community holds at most its share of the relay's captures and charged bytes
//! ([`Quotas`]), so one community never fills the relay for the others.

use std::time::Duration;

use buzz_bus::snapshot::{SnapshotCode, LIMITS};
use buzz_core::{CommunityId, Pubkey};
use bytes::Bytes;
use fred::clients::Pool;
use fred::interfaces::LuaInterface;
use fred::types::Value;

use crate::lua::{COMMON, PUBLISH, PURGE_COMMUNITY, READ, RELEASE, RESERVE};

/// A successful read: the capture's meta JSON, its expiry (ms) and the requested fields.
pub struct Read {
    /// The capture's meta JSON.
    pub meta: Bytes,
    /// When the capture expires, in Unix milliseconds.
    pub expires_ms: i64,
    /// The requested fields, `None` where absent.
    pub values: Vec<Option<Bytes>>,
}

/// The shared quotas (the spec's values, or tighter ones from settings), and each community's
/// share of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// Captures registered at once across every replica (the spec's 32 at most).
    pub active_captures: usize,
    /// Charged snapshot bytes across every replica (the spec's 64 MiB at most).
    pub charged_bytes: usize,
    /// Of [`Self::active_captures`], what one community may hold at once.
    pub community_captures: usize,
    /// Of [`Self::charged_bytes`], what one community's captures may be charged at once.
    pub community_bytes: usize,
}

impl Quotas {
    /// The relay-wide quotas with each community's default share: half of each (at least 1), so
    /// that no one community ever fills the relay and another can always start a capture while
    /// the relay is below its totals (docs/design.md "Community shares").
    #[must_use]
    pub fn halved(active_captures: usize, charged_bytes: usize) -> Self {
        Self {
            active_captures,
            charged_bytes,
            community_captures: (active_captures / 2).max(1),
            community_bytes: (charged_bytes / 2).max(1),
        }
    }
}

impl Default for Quotas {
    fn default() -> Self {
        Self::halved(LIMITS.max_active_captures, LIMITS.max_charged_bytes)
    }
}

/// Which quota refused a start: the `quota` label of `buzz_snapshot_quota_refusals_total`.
fn refused(quota: &'static str) -> SnapshotCode {
    metrics::counter!("buzz_snapshot_quota_refusals_total", "quota" => quota).increment(1);
    SnapshotCode::SnapshotUnavailable
}

/// The captures of every replica, in the one Redis hash `<prefix>snapshot`.
#[derive(Clone)]
pub struct SharedState {
    redis: Pool,
    key: String,
    timeout: Duration,
    quotas: Quotas,
}

fn unavailable(e: &fred::error::Error) -> SnapshotCode {
    tracing::warn!(error = %e, "snapshot store unavailable");
    SnapshotCode::SnapshotUnavailable
}

impl SharedState {
    /// The hash `<prefix>snapshot` on `redis`; each command waits at most `timeout`.
    #[must_use]
    pub fn new(redis: Pool, prefix: &str, timeout: Duration) -> Self {
        Self { redis, key: format!("{prefix}snapshot"), timeout, quotas: Quotas::default() }
    }

    /// The same store under other (tighter) quotas.
    #[must_use]
    pub fn with_quotas(mut self, quotas: Quotas) -> Self {
        self.quotas = quotas;
        self
    }

    /// The Redis key of the one snapshot hash.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    async fn eval(&self, body: &str, args: Vec<Value>) -> Result<Vec<Value>, SnapshotCode> {
        let script = format!("{COMMON}{body}");
        let call = self.redis.eval::<Value, _, _, _>(script, vec![self.key.clone()], args);
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(v)) => Ok(v.into_array()),
            Ok(Err(e)) => Err(unavailable(&e)),
            Err(_) => {
                tracing::warn!("snapshot store did not answer in time");
                Err(SnapshotCode::SnapshotUnavailable)
            }
        }
    }

    /// Reserves a capture slot under the shared quotas (active captures, the community's share of
    /// them, captures per reader per community), with a serving lease that must still hold when the capture is published.
    /// Removes a bounded number of expired captures first.
    pub async fn reserve(
        &self,
        community: CommunityId,
        reader: &Pubkey,
        lease_ms: u64,
    ) -> Result<u64, SnapshotCode> {
        let args = vec![
            Value::from(community.to_string()),
            Value::from(reader.as_str()),
            Value::from(self.quotas.active_captures as i64),
            Value::from(LIMITS.captures_per_reader as i64),
            Value::from(i64::try_from(lease_ms).unwrap_or(i64::MAX)),
            Value::from(2),
            Value::from(self.quotas.community_captures as i64),
        ];
        let out = self.eval(RESERVE, args).await?;
        match out.first().and_then(Value::as_i64) {
            Some(g) if g > 0 => Ok(u64::try_from(g).unwrap_or_default()),
            // Shared quotas free up as captures expire: retry with backoff.
            _ => Err(refused(match out.get(1).and_then(Value::as_str).as_deref() {
                Some("community") => "community_captures",
                Some("reader") => "reader_captures",
                _ => "captures",
            })),
        }
    }

    /// Publishes a reserved capture atomically: every field at once, charged against the shared
    /// byte quota, only while the lease holds and only under the reservation this reader made in
    /// this community, and within the community's share of the bytes. Returns the fixed expiry (ms). A reservation that is gone (released,
    /// expired, or lost with the hash) is `snapshot_unavailable`: the start failed and is retried
    /// like any other (there is no capture yet to reset).
    pub async fn publish(
        &self,
        generation: u64,
        owner: (CommunityId, &Pubkey),
        bytes: usize,
        pages: usize,
        fields: Vec<(Vec<u8>, Bytes)>,
    ) -> Result<i64, SnapshotCode> {
        let (community, reader) = owner;
        let mut args = vec![
            Value::from(generation.to_string()),
            Value::from(i64::try_from(bytes).unwrap_or(i64::MAX)),
            Value::from(self.quotas.charged_bytes as i64),
            Value::from(lifetime_ms()),
            Value::from(pages as i64),
            Value::from(community.to_string()),
            Value::from(reader.as_str()),
            Value::from(self.quotas.community_bytes as i64),
        ];
        for (f, v) in fields {
            args.push(Value::Bytes(Bytes::from(f)));
            args.push(Value::Bytes(v));
        }
        let out = self.eval(PUBLISH, args).await?;
        match (out.first().and_then(Value::as_i64), out.get(1).and_then(Value::as_i64)) {
            (Some(1), Some(x)) => Ok(x),
            (Some(-3), _) => Err(refused("bytes")),
            (Some(-4), _) => Err(refused("community_bytes")),
            _ => Err(SnapshotCode::SnapshotUnavailable),
        }
    }

    /// Gives a reservation (or a capture published by a start that then failed) back; removing
    /// one that is already gone is no error, so this may be repeated.
    pub async fn release(&self, generation: u64) -> Result<(), SnapshotCode> {
        let args = vec![Value::from(generation.to_string())];
        self.eval(RELEASE, args).await.map(|_| ())
    }

    /// [`Self::release`] until Redis answers, with backoff (100 ms doubling to 5 s), for at most
    /// a capture's lifetime (by then the charge has expired anyway): what a start that could not
    /// release in time leaves running, so that it never keeps its reader's slot.
    pub async fn release_eventually(&self, generation: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(LIMITS.lifetime_seconds);
        let mut wait = Duration::from_millis(100);
        while self.release(generation).await.is_err() {
            if tokio::time::Instant::now() + wait > deadline {
                tracing::warn!(generation, "snapshot reservation not released: it ends with its lease");
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        }
    }

    /// Removes every capture and charge of `community` (deleted or being deleted).
    pub async fn purge_community(&self, community: CommunityId) {
        let _ = self.try_purge_community(community).await;
    }

    /// [`Self::purge_community`] that reports whether Redis did it: what a community deletion's
    /// purge request (`Service::purge`) answers, so that the deletion fails (503, a retry
    /// finishes it) when it did not.
    pub async fn try_purge_community(&self, community: CommunityId) -> Result<(), SnapshotCode> {
        let args = vec![Value::from(community.to_string())];
        self.eval(PURGE_COMMUNITY, args).await.map(|_| ())
    }

    /// Reads a live capture's meta and `fields`, optionally setting `mark` in the same step.
    pub async fn read(
        &self,
        generation: u64,
        mark: Option<String>,
        fields: Vec<Vec<u8>>,
    ) -> Result<Read, SnapshotCode> {
        let mut args = vec![Value::from(generation.to_string()), Value::from(mark.unwrap_or_default())];
        args.extend(fields.into_iter().map(|f| Value::Bytes(Bytes::from(f))));
        let mut out = self.eval(READ, args).await?.into_iter();
        if out.next().and_then(|v| v.as_i64()) != Some(1) {
            return Err(SnapshotCode::SnapshotReset);
        }
        let meta = out.next().and_then(Value::into_bytes).ok_or(SnapshotCode::SnapshotReset)?;
        let expires_ms = out
            .next()
            .and_then(|v| v.as_bytes().and_then(|b| std::str::from_utf8(b).ok()?.parse().ok()))
            .ok_or(SnapshotCode::SnapshotReset)?;
        let values = out.map(|v| if v.is_null() { None } else { v.into_bytes() }).collect();
        Ok(Read { meta, expires_ms, values })
    }
}

/// What Redis holds for one hash field beyond its name and value: the entry, both strings'
/// headers, allocator rounding and the field's share of the bucket array. Measured with `MEMORY
/// USAGE` on Redis 7.0 (hashtable encoding, jemalloc): 63 to 74 bytes per field for captures of
/// 1 000 to 50 000 body records (docs/design.md, "Charged bytes"; pinned by
/// `tests/tests/snapshot_memory.rs`).
pub const FIELD_OVERHEAD: usize = 80;

/// The bytes a capture is charged: every field it publishes and the served mark each page will
/// get, each with [`FIELD_OVERHEAD`], so that the charge is what Redis holds for it.
#[must_use]
pub fn charge(fields: &[(Vec<u8>, Bytes)], generation: u64, pages: usize) -> usize {
    let published: usize = fields.iter().map(|(f, v)| f.len() + v.len() + FIELD_OVERHEAD).sum();
    let marks: usize = (1..pages).map(|n| served_field(generation, n).len() + 1 + FIELD_OVERHEAD).sum();
    published + marks
}

fn lifetime_ms() -> i64 {
    i64::try_from(LIMITS.lifetime_seconds * 1000).unwrap_or(i64::MAX)
}

/// Field names of a capture.
#[must_use]
pub fn meta_field(g: u64) -> Vec<u8> {
    format!("{g}:m").into_bytes()
}
/// Field of page `n` of capture `g`.
#[must_use]
pub fn page_field(g: u64, n: usize) -> String {
    format!("{g}:p:{n}")
}
/// Field marking page `n` of capture `g` as served.
#[must_use]
pub fn served_field(g: u64, n: usize) -> String {
    format!("{g}:s:{n}")
}
/// Field of the body of `revision` in capture `g`.
#[must_use]
pub fn body_field(g: u64, revision: &[u8; 32]) -> Vec<u8> {
    let mut f = format!("{g}:b:").into_bytes();
    f.extend_from_slice(revision);
    f
}
