//! The snapshot operations: admission (scope, per-process operation limit, elapsed limit) and
//! `start`. The other actions extend `Service` in their own module.

use std::sync::Arc;
use std::time::Duration;

use buzz_bus::snapshot::{PurgeCaptures, PurgeReply, SnapshotCode, SnapshotFailure, SnapshotRequest, LIMITS};
use buzz_bus::BusError;
use buzz_core::Filter;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use sqlx::PgPool;
use tokio::sync::Semaphore;

use crate::manifest::{self, Cursor, Token};
use crate::state::{self, SharedState};
use crate::store::{self, ReaderState};

/// What a capture is bound to, kept beside its pages.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Meta {
    /// Hex of the token's secret.
    pub secret: String,
    /// The community of the capture.
    pub community: buzz_core::CommunityId,
    /// The authenticated pubkey (an agent's own key, not its owner's).
    pub reader: buzz_core::Pubkey,
    /// sha256 of the query as captured.
    pub query: String,
    /// The capture transaction's timestamp.
    pub as_of: String,
    /// Fingerprint of the manifest, over every entry.
    pub fingerprint: String,
    /// Pages of the manifest.
    pub pages: usize,
    /// Entries of the manifest.
    pub rows: usize,
}

/// What every request is served with: the read-only pool, the shared Redis state and the limits.
pub struct Service {
    /// PostgreSQL, read only (one REPEATABLE READ transaction per operation).
    pub pool: PgPool,
    /// The shared capture store in Redis.
    pub state: SharedState,
    /// `statement_timeout` of each operation's statements.
    pub statement_timeout_ms: u64,
    /// Elapsed limit of one operation, access checks included.
    pub operation_timeout: Duration,
    /// At most `operationsPerProcess` operations at once in this process.
    pub ops: Arc<Semaphore>,
    /// Of those, at most a community's share at once per community.
    pub shares: Arc<crate::shares::OperationShares>,
    /// Bytes of one internal manifest (the spec's 16 MiB at most).
    pub max_manifest_bytes: usize,
    /// The serving write lease of a capture being registered.
    pub lease_ms: u64,
}

/// A request's answer: the reply body, or its failure.
pub type Outcome = Result<String, SnapshotFailure>;

impl Service {
    /// The reader's database authority now: member of a live community, within the inspection
    /// limits. A community that is gone or being deleted takes its captures with it.
    pub async fn admit(
        &self,
        req: &SnapshotRequest,
        tx: &mut sqlx::PgConnection,
        as_of: Option<&str>,
    ) -> Result<ReaderState, SnapshotFailure> {
        let who = store::reader_state(
            tx,
            req.community_id,
            req.reader.member_key(),
            req.reader.channel_ids.as_deref(),
            as_of,
        )
        .await?;
        if !matches!(who.lifecycle.as_deref(), Some("active" | "archived")) {
            self.state.purge_community(req.community_id).await;
            return Err(SnapshotCode::SnapshotReset.into());
        }
        if who.role.is_none() {
            return Err(normal(BusError::restricted(buzz_core::refusal::NOT_COMMUNITY_MEMBER)));
        }
        let over = |n: usize| n > LIMITS.max_inspected;
        if over(usize::try_from(who.memberships).unwrap_or(usize::MAX)) || over(who.readable.len()) {
            return Err(SnapshotCode::SnapshotLimit.into());
        }
        Ok(who)
    }

    /// `<p>.v1.snapshot.purge`: removes every capture and charge of a community being deleted
    /// (the policy-service asks before it removes the community's row). Not an operation: no
    /// operation slot, no database; Redis' own timeout bounds it.
    pub async fn purge(&self, req: &PurgeCaptures) -> PurgeReply {
        let purged = self.state.try_purge_community(req.community_id).await;
        let outcome = if purged.is_ok() { "ok" } else { "unavailable" };
        metrics::counter!("buzz_snapshot_purges_total", "outcome" => outcome).increment(1);
        purged.map_err(|_| BusError::unavailable("snapshot store unavailable"))
    }

    /// A start answers with its token or leaves no charge: a failed capture releases its
    /// reservation (and anything it published) before answering, and a start cancelled mid-flight
    /// (the operation limit drops it, perhaps after its manifest was published in Redis but
    /// before Redis' answer arrived) releases it in the background ([`Unreleased`]).
    pub(crate) async fn start(&self, req: &SnapshotRequest, query: &Filter) -> Outcome {
        let generation = self.state.reserve(req.community_id, &req.reader.pubkey, self.lease_ms).await?;
        let mut owed = Unreleased { state: self.state.clone(), generation: Some(generation) };
        let outcome = self.capture(req, query, generation).await;
        if outcome.is_ok() || self.state.release(generation).await.is_ok() {
            owed.generation = None;
        }
        outcome
    }

    /// Captures every matching current identity in one transaction, then publishes the whole
    /// manifest before the token exists.
    async fn capture(&self, req: &SnapshotRequest, query: &Filter, generation: u64) -> Outcome {
        let mut tx = store::begin(&self.pool, self.statement_timeout_ms).await?;
        let who = self.admit(req, &mut tx, None).await?;
        if store::candidates(&mut tx, req.community_id, query, &who.readable).await? > LIMITS.max_inspected {
            return Err(SnapshotCode::SnapshotLimit.into());
        }
        let found = store::matches(&mut tx, req.community_id, query, &who.readable).await?;
        drop(tx);
        if found.iter().any(|m| m.ttl) {
            return Err(SnapshotCode::SnapshotUnsupportedScope.into());
        }
        // `maxRows` needs no check of its own: every match is a candidate, and a start with more
        // than `max_inspected` (= `max_rows`) candidates failed above (asserted below).
        let entries: Vec<_> = found.into_iter().map(|m| m.entry).collect();
        let pages = manifest::pages(&entries);
        let secret: [u8; 16] = rand::random();
        let meta = Meta {
            secret: hex::encode(secret),
            community: req.community_id,
            reader: req.reader.pubkey.clone(),
            query: hex::encode(sha2::Sha256::digest(query.to_value().to_string())),
            as_of: who.as_of,
            fingerprint: who.fingerprint,
            pages: pages.len(),
            rows: entries.len(),
        };
        let meta_json = serde_json::to_vec(&meta).map_err(|_| SnapshotCode::SnapshotUnavailable)?;
        let mut fields = vec![
            (state::meta_field(generation), Bytes::from(meta_json)),
            (state::served_field(generation, 0).into_bytes(), Bytes::from_static(b"1")),
        ];
        fields.extend(
            pages
                .iter()
                .enumerate()
                .map(|(n, p)| (state::page_field(generation, n).into_bytes(), Bytes::from(p.clone()))),
        );
        fields.extend(
            entries
                .iter()
                .map(|e| (state::body_field(generation, &e.revision), Bytes::from(e.body_record()))),
        );
        let bytes = state::charge(&fields, generation, pages.len());
        if bytes > self.max_manifest_bytes {
            return Err(SnapshotCode::SnapshotLimit.into());
        }
        let owner = (req.community_id, &req.reader.pubkey);
        let expires_ms = self.state.publish(generation, owner, bytes, pages.len(), fields).await?;
        metrics::histogram!("buzz_snapshot_capture_rows").record(entries.len() as f64);
        let token = Token { generation, secret };
        let first = manifest::unpack(&pages[0])?;
        Ok(page_body(&token, expires_ms, &first, 0, pages.len()))
    }
}

/// "A capture above the row or byte limit fails": the rows are bounded by the candidate limit,
/// which is checked first and is no larger than `maxRows` (a build with a larger inspection limit
/// would need a row check after matching).
/// (An unnamed constant: always evaluated, so such a build fails here.)
const _: () = assert!(LIMITS.max_inspected <= LIMITS.max_rows);

/// A reservation a start still owes a release. Dropped while it holds one (the start was
/// cancelled, or its release failed) it releases in the background until Redis answers.
struct Unreleased {
    state: SharedState,
    generation: Option<u64>,
}

impl Drop for Unreleased {
    fn drop(&mut self) {
        let Some(generation) = self.generation.take() else { return };
        let state = self.state.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { state.release_eventually(generation).await });
            }
            Err(_) => tracing::warn!(generation, "snapshot reservation not released: no runtime"),
        }
    }
}

/// A start or page response.
#[must_use]
pub fn page_body(
    token: &Token,
    expires_ms: i64,
    entries: &[manifest::Entry],
    page: u32,
    pages: usize,
) -> String {
    let next = page + 1;
    let next_token = if (next as usize) < pages {
        format!("\"{}\"", Cursor { generation: token.generation, page: next }.encode())
    } else {
        "null".to_owned()
    };
    format!(
        "{{\"version\":1,\"token\":\"{}\",\"expiresAt\":{},\"entries\":{},\"nextToken\":{}}}",
        token.encode(),
        expires_ms.div_euclid(1000),
        manifest::entries_json(entries),
        next_token
    )
}

/// A failure answered with an ordinary bus error.
pub fn normal(error: BusError) -> SnapshotFailure {
    SnapshotFailure::Normal { error }
}
