//! Snapshot-service of buzz-relay: the NIP-AR stable manifest transport ("Stable manifest
//! transport", "Limits and failures") over shared Redis, served to any gateway on
//! `<p>.v1.snapshot` without session affinity: any replica serves any request of any capture.
//! It alone knows how captures are stored: a community deletion asks it, on
//! `<p>.v1.snapshot.purge`, to remove that community's captures.

pub mod action;
mod dispatch;
mod lua;
pub mod manifest;
mod reads;
pub mod service;
pub mod settings;
pub mod shares;
pub mod state;
pub mod store;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::snapshot::{
    PurgeCaptures, SnapshotCode, SnapshotFrame, SnapshotFrameBody, SnapshotRequest, CHUNK_BYTES, LIMITS,
};
use buzz_bus::Subjects;
use fred::interfaces::ClientLike;
use tokio_util::sync::CancellationToken;

pub use service::Service;
pub use settings::Settings;

/// A failed request, as it crosses the bus.
pub type Failure = buzz_bus::snapshot::SnapshotFailure;

/// The snapshot-service: its PostgreSQL pool, Redis and NATS connections and admin listener.
pub struct Application {
    service: Arc<Service>,
    nats: async_nats::Client,
    redis: fred::clients::Pool,
    subjects: Subjects,
    admin: tokio::net::TcpListener,
    admin_addr: SocketAddr,
}

impl Application {
    /// Checks the settings, connects to PostgreSQL (schema checked), Redis and NATS and binds the
    /// admin listener.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        settings.check()?;
        let pool = buzz_store::connect(&settings.database_url, settings.max_db_connections).await?;
        buzz_store::check_schema(&pool).await?;
        let redis = buzz_http_auth::connect_redis(&settings.redis, 4).await?;
        let nats = serve::connect(&settings.nats, "buzz-snapshot").await?;
        let subjects = Subjects::new(&settings.nats_prefix).map_err(anyhow::Error::msg)?;
        let admin = tokio::net::TcpListener::bind(settings.admin_listen).await?;
        let admin_addr = admin.local_addr()?;
        let state = state::SharedState::new(
            redis.clone(),
            &settings.redis_prefix,
            Duration::from_millis(settings.redis_timeout_ms),
        )
        .with_quotas(settings.quotas());
        let service = Arc::new(Service {
            pool,
            state,
            statement_timeout_ms: settings.statement_timeout_ms,
            operation_timeout: Duration::from_millis(settings.operation_timeout_ms),
            ops: Arc::new(tokio::sync::Semaphore::new(LIMITS.operations_per_process)),
            shares: shares::OperationShares::new(settings.community_operations),
            max_manifest_bytes: settings.max_manifest_bytes,
            lease_ms: settings.lease_ms.min(settings.operation_timeout_ms),
        });
        Ok(Self { service, nats, redis, subjects, admin, admin_addr })
    }

    /// The bound admin address (port 0 resolved).
    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves snapshot requests, community purges, health and metrics until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let service = self.service.clone();
        let nats = self.nats.clone();
        // Requests beyond the per-process operation limit are answered at once (busy), so the
        // subscribe loop itself takes more than that many.
        let requests = serve::serve(
            self.nats.clone(),
            self.subjects.snapshot(),
            buzz_bus::subjects::SNAPSHOT_GROUP,
            64,
            shutdown.clone(),
            move |m: Incoming<SnapshotRequest>| {
                let service = service.clone();
                let nats = nats.clone();
                async move {
                    let outcome = service.handle(m.body).await;
                    if let Some(reply) = m.reply {
                        send_frames(&nats, reply, outcome).await;
                    }
                    None::<()>
                }
            },
        );
        // Community deletions (rare; each one Redis script) on their own subject.
        let service = self.service.clone();
        let purges = serve::serve(
            self.nats.clone(),
            self.subjects.snapshot_purge(),
            buzz_bus::subjects::SNAPSHOT_GROUP,
            4,
            shutdown.clone(),
            move |m: Incoming<PurgeCaptures>| {
                let service = service.clone();
                async move { Some(service.purge(&m.body).await) }
            },
        );
        let redis = self.redis.clone();
        let nats = self.nats.clone();
        let router = buzz_telemetry::admin_router(move || {
            let redis = redis.clone();
            let nats = nats.clone();
            async move {
                nats.connection_state() == async_nats::connection::State::Connected
                    && redis.ping::<String>(None).await.is_ok()
            }
        });
        tracing::info!(admin = %self.admin_addr, "snapshot-service running");
        let admin =
            axum::serve(self.admin, router).with_graceful_shutdown(shutdown.clone().cancelled_owned());
        let (served, purged, admin) = tokio::join!(requests, purges, admin);
        served?;
        purged?;
        admin?;
        Ok(())
    }
}

/// Room for a frame's envelope (`seq`, `type`, the quotes of `data`) beside its chunk.
const FRAME_OVERHEAD: usize = 1024;

/// The answer as numbered frames: the body in chunks whose JSON-escaped text is at most
/// [`CHUNK_BYTES`] (and fits the server's `max_payload` with the envelope), cut at char
/// boundaries, then `done`; or one `failure`. A frame that cannot be published ends the answer
/// with a `failure` in its place, so the gateway answers 503 at once instead of waiting.
async fn send_frames(nats: &async_nats::Client, reply: async_nats::Subject, outcome: service::Outcome) {
    let mut bodies = Vec::new();
    match outcome {
        Ok(body) => {
            let budget = frame_budget(nats.server_info().max_payload);
            bodies.extend(chunks(&body, budget).map(|c| SnapshotFrameBody::Chunk { data: c.to_owned() }));
            bodies.push(SnapshotFrameBody::Done { bytes: body.len() as u64 });
        }
        Err(failure) => bodies.push(SnapshotFrameBody::Failure { failure }),
    }
    for (seq, body) in bodies.into_iter().enumerate() {
        let seq = u32::try_from(seq).unwrap_or(u32::MAX);
        let failed = matches!(body, SnapshotFrameBody::Failure { .. });
        let Ok(payload) = serde_json::to_vec(&SnapshotFrame { seq, body }) else { return };
        if let Err(e) = nats.publish(reply.clone(), payload.into()).await {
            tracing::warn!(error = %e, seq, "snapshot frame not sent");
            metrics::counter!("buzz_snapshot_frames_failed_total").increment(1);
            if !failed {
                let body = SnapshotFrameBody::Failure { failure: SnapshotCode::SnapshotUnavailable.into() };
                if let Ok(payload) = serde_json::to_vec(&SnapshotFrame { seq, body }) {
                    let _ = nats.publish(reply, payload.into()).await;
                }
            }
            return;
        }
    }
}

/// Escaped bytes a chunk may hold on a server whose largest payload is `max_payload`.
#[must_use]
pub fn frame_budget(max_payload: usize) -> usize {
    CHUNK_BYTES.min(max_payload.saturating_sub(FRAME_OVERHEAD)).max(64)
}

/// The bytes `c` takes inside a JSON string as serde_json writes it.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// `body` cut at char boundaries into pieces whose JSON-escaped length is at most `budget`
/// (at least 6: one escaped char always fits).
pub fn chunks(body: &str, budget: usize) -> impl Iterator<Item = &str> {
    let mut rest = body;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (mut cut, mut escaped) = (0, 0);
        for (i, c) in rest.char_indices() {
            let n = escaped_len(c);
            if escaped + n > budget && cut > 0 {
                break;
            }
            escaped += n;
            cut = i + c.len_utf8();
        }
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// "NATS frame size": a body heavy in what JSON escapes (`"` and `\` double, control
    /// characters take six bytes) is cut by its escaped length, so no frame grows past the
    /// chunk budget, even at `bodyBytes` (8 MiB, the largest answer).
    #[test]
    fn frames_of_a_body_of_escaped_characters_stay_within_the_budget_and_rejoin_exactly() {
        let worst = [
            "\\".repeat(LIMITS.body_bytes),
            "\"".repeat(LIMITS.body_bytes),
            "\u{1}".repeat(LIMITS.body_bytes),
            "a\\é\"\n\u{1f}€𝄞".repeat(LIMITS.body_bytes / 16),
        ];
        for body in &worst {
            let budget = frame_budget(1024 * 1024);
            assert_eq!(budget, CHUNK_BYTES);
            let pieces: Vec<&str> = chunks(body, budget).collect();
            for (n, piece) in pieces.iter().enumerate() {
                let frame = SnapshotFrame {
                    seq: u32::MAX,
                    body: SnapshotFrameBody::Chunk { data: (*piece).to_owned() },
                };
                let wire = serde_json::to_vec(&frame).unwrap().len();
                assert!(wire <= CHUNK_BYTES + FRAME_OVERHEAD, "{wire}");
                if n + 1 < pieces.len() {
                    assert!(wire > CHUNK_BYTES - 8, "frames are filled: {wire}");
                }
            }
            assert!(pieces.concat() == *body);
        }
        // A small server payload shrinks the budget; nothing is ever empty or lost.
        let small = frame_budget(4096);
        assert_eq!(small, 4096 - FRAME_OVERHEAD);
        let body = "\"x".repeat(10_000);
        assert_eq!(chunks(&body, small).collect::<String>(), body);
        assert!(chunks(&body, small).all(|c| serde_json::to_string(c).unwrap().len() <= small + 2));
    }
}
