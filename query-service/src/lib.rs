//! Query-service of buzz-relay: REQ and COUNT over stored events with access checks in SQL before
//! limits, under a statement timeout, streamed to the gateway in numbered frames.

pub mod artifacts;
pub mod chat;
pub mod error;
pub mod handler;
pub mod plan;
pub mod settings;
pub mod sql;
pub mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::{AccessRequest, QueryFrame, QueryRequest, Subjects};
use tokio_util::sync::CancellationToken;

pub use handler::Querier;
pub use settings::Settings;

/// The query-service: its bus handlers, NATS subscriptions and admin listener.
pub struct Application {
    querier: Arc<Querier>,
    nats: async_nats::Client,
    subjects: Subjects,
    admin: tokio::net::TcpListener,
    admin_addr: SocketAddr,
    concurrency: usize,
}

impl Application {
    /// Connects to PostgreSQL (checking the schema) and NATS and binds the admin listener.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let pool = buzz_store::connect(&settings.database_url, settings.max_db_connections).await?;
        buzz_store::check_schema(&pool).await?;
        let nats = serve::connect(&settings.nats, "buzz-query").await?;
        let subjects = Subjects::new(&settings.nats_prefix).map_err(anyhow::Error::msg)?;
        let admin = tokio::net::TcpListener::bind(settings.admin_listen).await?;
        let admin_addr = admin.local_addr()?;
        let querier = Arc::new(Querier {
            pool,
            limits: buzz_core::Limits::default(),
            statement_timeout_ms: settings.statement_timeout_ms,
        });
        Ok(Self { querier, nats, subjects, admin, admin_addr, concurrency: settings.concurrency })
    }

    /// The bound admin address (port 0 resolved).
    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves the query, access and chat subjects until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let q = self.querier.clone();
        let nats = self.nats.clone();
        let queries = serve::serve(
            self.nats.clone(),
            self.subjects.query(),
            buzz_bus::subjects::QUERY_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<QueryRequest>| {
                let q = q.clone();
                let nats = nats.clone();
                async move {
                    let reply = m.reply?;
                    let mut seq = 0u32;
                    q.run(m.body, |body| {
                        let frame = QueryFrame { seq, body };
                        seq += 1;
                        let nats = nats.clone();
                        let reply = reply.clone();
                        async move {
                            match serde_json::to_vec(&frame) {
                                Ok(bytes) => {
                                    if let Err(e) = nats.publish(reply, bytes.into()).await {
                                        tracing::warn!(error = %e, "query frame publish failed");
                                    }
                                }
                                Err(e) => tracing::error!(error = %e, "unserialisable query frame"),
                            }
                        }
                    })
                    .await;
                    None::<()>
                }
            },
        );
        let q = self.querier.clone();
        let access = serve::serve(
            self.nats.clone(),
            self.subjects.access(),
            buzz_bus::subjects::QUERY_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<AccessRequest>| {
                let q = q.clone();
                async move { Some(q.access(m.body).await) }
            },
        );
        let chat_pool = self.querier.pool.clone();
        let chat = serve::serve(
            self.nats.clone(),
            self.subjects.chat(),
            buzz_bus::subjects::QUERY_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<buzz_bus::ChatRequest>| {
                let pool = chat_pool.clone();
                async move { Some(chat::handle(&pool, m.body).await) }
            },
        );
        let pool = self.querier.pool.clone();
        let ready_nats = self.nats.clone();
        let admin = axum::serve(
            self.admin,
            buzz_telemetry::admin_router(move || {
                let pool = pool.clone();
                let nats = ready_nats.clone();
                async move {
                    nats.connection_state() == async_nats::connection::State::Connected
                        && sqlx::query("SELECT 1").execute(&pool).await.is_ok()
                }
            }),
        )
        .with_graceful_shutdown(shutdown.cancelled_owned());
        tracing::info!(admin = %self.admin_addr, "query-service running");
        let (a, b, c, d) = tokio::join!(queries, access, chat, admin);
        a?;
        b?;
        c?;
        d?;
        self.nats.flush().await.ok();
        Ok(())
    }
}
