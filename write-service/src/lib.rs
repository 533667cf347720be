//! Write-service of buzz-relay: every state change. A write is acknowledged only after its
//! transaction commits; what was accepted is then published for live fan-out.

pub mod events;
pub mod members;
pub mod read_model;
pub mod settings;
pub mod store;
pub mod tokens;

use std::net::SocketAddr;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::{AccessChanged, Subjects, WriteReply, WriteRequest};
use tokio_util::sync::CancellationToken;

pub use settings::Settings;

/// What a handler needs; cheap to clone.
#[derive(Clone)]
pub struct Writer {
    pub pool: sqlx::PgPool,
    pub nats: async_nats::Client,
    pub subjects: Subjects,
}

impl Writer {
    /// Handles one write request: decide and commit, then publish, then answer.
    pub async fn handle(&self, req: WriteRequest) -> WriteReply {
        let started = std::time::Instant::now();
        let reply = match req {
            WriteRequest::Event { community_id, actor, event } => {
                let accepted = events::write_event(&self.pool, community_id, &actor, event).await?;
                if let Some(live) = accepted.live {
                    self.publish(self.subjects.live(community_id), &live).await;
                }
                Ok(accepted.ok)
            }
            WriteRequest::PutMember { community_id, actor, pubkey, role } => {
                members::put_member(&self.pool, community_id, &actor, &pubkey, role).await
            }
            WriteRequest::RemoveMember { community_id, actor, pubkey } => {
                let removed = members::remove_member(&self.pool, community_id, &actor, &pubkey).await?;
                if removed {
                    let changed = AccessChanged::MemberRemoved { pubkey };
                    self.publish(self.subjects.access_changed(community_id), &changed).await;
                }
                Ok(buzz_bus::WriteOk { duplicate: !removed, message: String::new(), data: None })
            }
            WriteRequest::IssueToken { community_id, actor, token_hash, scopes, channel_ids, expires_in } => {
                tokens::issue(
                    &self.pool,
                    community_id,
                    &actor,
                    &token_hash,
                    &scopes,
                    channel_ids.as_deref(),
                    expires_in,
                )
                .await
            }
            WriteRequest::MarkRead { community_id, actor, channel_id, up_to } => {
                read_model::mark_read(&self.pool, community_id, &actor, channel_id, &up_to).await
            }
        };
        metrics::histogram!("buzz_write_seconds").record(started.elapsed().as_secs_f64());
        metrics::counter!("buzz_writes_total", "ok" => if reply.is_ok() { "true" } else { "false" })
            .increment(1);
        reply
    }

    async fn publish<T: serde::Serialize>(&self, subject: String, body: &T) {
        match serde_json::to_vec(body) {
            Ok(bytes) => {
                if let Err(e) = self
                    .nats
                    .publish_with_headers(subject, buzz_bus::trace::current_headers(), bytes.into())
                    .await
                {
                    // Live delivery is at-most-once; the event is stored and replayable.
                    tracing::warn!(error = %e, "live publish failed");
                }
            }
            Err(e) => tracing::error!(error = %e, "unserialisable live event"),
        }
    }
}

pub struct Application {
    writer: Writer,
    admin: tokio::net::TcpListener,
    admin_addr: SocketAddr,
    concurrency: usize,
}

impl Application {
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let pool = buzz_store::connect(&settings.database_url, settings.max_db_connections).await?;
        buzz_store::check_schema(&pool).await?;
        let nats = serve::connect(&settings.nats_url, "buzz-write").await?;
        let subjects = Subjects::new(&settings.nats_prefix).map_err(anyhow::Error::msg)?;
        let admin = tokio::net::TcpListener::bind(settings.admin_listen).await?;
        let admin_addr = admin.local_addr()?;
        Ok(Self {
            writer: Writer { pool, nats, subjects },
            admin,
            admin_addr,
            concurrency: settings.concurrency,
        })
    }

    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let writer = self.writer.clone();
        let bus = serve::serve(
            self.writer.nats.clone(),
            self.writer.subjects.write(),
            buzz_bus::subjects::WRITE_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<WriteRequest>| {
                let writer = writer.clone();
                async move { Some(writer.handle(m.body).await) }
            },
        );
        let pool = self.writer.pool.clone();
        let nats = self.writer.nats.clone();
        let admin = axum::serve(self.admin, ready_router(pool, nats))
            .with_graceful_shutdown(shutdown.cancelled_owned());
        tracing::info!(admin = %self.admin_addr, "write-service running");
        let (a, b) = tokio::join!(bus, admin);
        a?;
        b?;
        self.writer.nats.flush().await.ok();
        Ok(())
    }
}

fn ready_router(pool: sqlx::PgPool, nats: async_nats::Client) -> axum::Router {
    buzz_telemetry::admin_router(move || {
        let pool = pool.clone();
        let nats = nats.clone();
        async move {
            nats.connection_state() == async_nats::connection::State::Connected
                && sqlx::query("SELECT 1").execute(&pool).await.is_ok()
        }
    })
}
