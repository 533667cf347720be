//! Snapshot-service of buzz-relay: the NIP-AR stable manifest transport ("Stable manifest
//! transport", "Limits and failures") over shared Redis, served to any gateway on
//! `<p>.v1.snapshot` without session affinity: any replica serves any request of any capture.

pub mod action;
mod dispatch;
pub mod manifest;
mod reads;
pub mod service;
pub mod settings;
pub mod state;
pub mod store;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::snapshot::{SnapshotFrame, SnapshotFrameBody, SnapshotRequest, CHUNK_BYTES, LIMITS};
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
        .with_quotas(state::Quotas {
            active_captures: settings.max_captures,
            charged_bytes: settings.max_charged_bytes,
        });
        let service = Arc::new(Service {
            pool,
            state,
            statement_timeout_ms: settings.statement_timeout_ms,
            operation_timeout: Duration::from_millis(settings.operation_timeout_ms),
            ops: Arc::new(tokio::sync::Semaphore::new(LIMITS.operations_per_process)),
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

    /// Serves snapshot requests, health and metrics until `shutdown`.
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
        let (served, admin) = tokio::join!(requests, admin);
        served?;
        admin?;
        Ok(())
    }
}

/// The answer as numbered frames: the body in chunks of at most [`CHUNK_BYTES`] (cut at char
/// boundaries), then `done`; or one `failure`.
async fn send_frames(nats: &async_nats::Client, reply: async_nats::Subject, outcome: service::Outcome) {
    let mut bodies = Vec::new();
    match outcome {
        Ok(body) => {
            let mut rest = body.as_str();
            while !rest.is_empty() {
                let mut cut = rest.len().min(CHUNK_BYTES);
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                bodies.push(SnapshotFrameBody::Chunk { data: rest[..cut].to_owned() });
                rest = &rest[cut..];
            }
            bodies.push(SnapshotFrameBody::Done { bytes: body.len() as u64 });
        }
        Err(failure) => bodies.push(SnapshotFrameBody::Failure { failure }),
    }
    for (seq, body) in bodies.into_iter().enumerate() {
        let frame = SnapshotFrame { seq: u32::try_from(seq).unwrap_or(u32::MAX), body };
        buzz_bus::rpc::reply(nats, Some(&reply), &frame).await;
    }
}
