//! Query-service of buzz-relay: REQ and COUNT over stored events with access checks in SQL before
//! limits, under a statement timeout, streamed to the gateway in numbered frames.

pub mod artifacts;
pub mod cancel;
pub mod chat;
pub mod error;
pub mod fair;
pub mod handler;
pub mod plan;
pub mod settings;
pub mod sql;
pub mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::{
    AccessRequest, BusError, ErrorCode, QueryCancel, QueryFrame, QueryFrameBody, QueryRequest, Subjects,
};
use buzz_core::CommunityId;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::cancel::Inflight;
use crate::fair::FairGate;

pub use handler::Querier;
pub use settings::Settings;

/// The query-service: its bus handlers, NATS subscriptions and admin listener.
pub struct Application {
    querier: Arc<Querier>,
    /// REQ, COUNT and read-model requests share this replica's connections through it.
    gate: Arc<FairGate<CommunityId>>,
    /// The queries a cancel from a gateway can stop.
    inflight: Arc<Inflight>,
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
        // One connection apart from the pool, opened when first needed, for cancelling statements.
        let control = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(std::time::Duration::from_secs(2))
            .connect_lazy(&settings.database_url)?;
        let querier = Arc::new(Querier {
            pool,
            limits: buzz_core::Limits::default(),
            statement_timeout_ms: settings.statement_timeout_ms,
            control: Some(control),
        });
        let gate = FairGate::new(settings.shares());
        let inflight = Arc::default();
        Ok(Self {
            querier,
            gate,
            inflight,
            nats,
            subjects,
            admin,
            admin_addr,
            concurrency: settings.concurrency,
        })
    }

    /// The bound admin address (port 0 resolved).
    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves the query, access and chat subjects until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let queries = self.serve_queries(&shutdown);
        let cancels = serve_cancels(
            self.nats.clone(),
            self.subjects.query_cancel(),
            self.inflight.clone(),
            shutdown.clone(),
        );
        let access = self.serve_access(&shutdown);
        let chat = self.serve_chat(&shutdown);
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
        let (a, b, c, d, e) = tokio::join!(queries, access, chat, admin, cancels);
        a?;
        b?;
        c?;
        d?;
        e?;
        self.nats.flush().await.ok();
        Ok(())
    }

    /// REQ and COUNT: each waits its community's turn at the gate (`answer_query`).
    fn serve_queries(
        &self,
        shutdown: &CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), async_nats::SubscribeError>> {
        let (q, gate, inflight, nats) =
            (self.querier.clone(), self.gate.clone(), self.inflight.clone(), self.nats.clone());
        serve::serve(
            self.nats.clone(),
            self.subjects.query(),
            buzz_bus::subjects::QUERY_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<QueryRequest>| {
                let (q, gate, inflight, nats) = (q.clone(), gate.clone(), inflight.clone(), nats.clone());
                async move {
                    let reply = m.reply?;
                    answer_query(&q, &gate, &inflight, &nats, reply, m.body).await;
                    None::<()>
                }
            },
        )
    }

    /// Membership, channel-read and token answers: short lookups outside the gate, on the part of
    /// the pool the gate leaves them.
    fn serve_access(
        &self,
        shutdown: &CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), async_nats::SubscribeError>> {
        let q = self.querier.clone();
        serve::serve(
            self.nats.clone(),
            self.subjects.access(),
            buzz_bus::subjects::QUERY_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<AccessRequest>| {
                let q = q.clone();
                async move { Some(q.access(m.body).await) }
            },
        )
    }

    /// The chat read model, through the same gate as REQ and COUNT.
    fn serve_chat(
        &self,
        shutdown: &CancellationToken,
    ) -> impl std::future::Future<Output = Result<(), async_nats::SubscribeError>> {
        let (pool, gate) = (self.querier.pool.clone(), self.gate.clone());
        serve::serve(
            self.nats.clone(),
            self.subjects.chat(),
            buzz_bus::subjects::QUERY_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<buzz_bus::ChatRequest>| {
                let (pool, gate) = (pool.clone(), gate.clone());
                async move {
                    let Ok(_slot) = gate.acquire(m.body.community_id()).await else {
                        return Some(Err(busy()));
                    };
                    Some(chat::handle(&pool, m.body).await)
                }
            },
        )
    }
}

/// The answer to a community whose queue of waiting queries is full.
fn busy() -> BusError {
    BusError::new(
        ErrorCode::RateLimited,
        "this community has too many queries in progress; try again shortly",
    )
}

/// One REQ/COUNT: waits its community's turn for a slot, runs until done or cancelled, and
/// streams its frames to `reply` numbered from 0.
async fn answer_query(
    q: &Querier,
    gate: &Arc<FairGate<CommunityId>>,
    inflight: &Inflight,
    nats: &async_nats::Client,
    reply: async_nats::Subject,
    req: QueryRequest,
) {
    let registered = req.query_id.map(|id| inflight.register(id));
    let cancel = registered.as_ref().map_or_else(CancellationToken::new, |r| r.token.clone());
    let mut seq = 0u32;
    let mut emit = |body| {
        let frame = QueryFrame { seq, body };
        seq += 1;
        let (nats, reply) = (nats.clone(), reply.clone());
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
    };
    let slot = tokio::select! {
        biased;
        () = cancel.cancelled() => return,
        slot = gate.acquire(req.community_id) => slot,
    };
    let Ok(_slot) = slot else {
        metrics::counter!("buzz_query_refused_busy_total").increment(1);
        return emit(QueryFrameBody::Error { error: busy() }).await;
    };
    q.run_until(req, emit, &cancel).await;
}

/// Every replica hears every cancel (no queue group) and stops the queries it holds.
async fn serve_cancels(
    nats: async_nats::Client,
    subject: String,
    inflight: Arc<Inflight>,
    shutdown: CancellationToken,
) -> Result<(), async_nats::SubscribeError> {
    let mut sub = nats.subscribe(subject).await?;
    loop {
        let msg = tokio::select! {
            () = shutdown.cancelled() => break,
            m = sub.next() => match m { Some(m) => m, None => break },
        };
        match serde_json::from_slice::<QueryCancel>(&msg.payload) {
            Ok(c) => inflight.cancel(&c.query_ids),
            Err(e) => tracing::warn!(error = %e, "undecodable query cancel"),
        }
    }
    let _ = sub.unsubscribe().await;
    Ok(())
}
