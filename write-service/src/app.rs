//! The write-service as a process: its pools, lanes, bus subscriptions, admin listener and sweeps.

use std::net::SocketAddr;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::{Subjects, WriteRequest};
use tokio_util::sync::CancellationToken;

use crate::revision::retention;
use crate::settings::Settings;
use crate::writer::Writer;

/// How long a group-commit lane keeps a connection, and with it the plans of its statements.
const BATCH_PLAN_LIFETIME: std::time::Duration = std::time::Duration::from_secs(5);

/// The write-service: its handler, admin listener and sweeps.
pub struct Application {
    writer: Writer,
    admin: tokio::net::TcpListener,
    admin_addr: SocketAddr,
    concurrency: usize,
    sweep_every: std::time::Duration,
}

impl Application {
    /// Connects to PostgreSQL (checking the schema) and NATS and binds the admin listener.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let pool = connect(&settings, settings.max_db_connections, &[], None).await?;
        buzz_store::check_schema(&pool).await?;
        let nats = serve::connect(&settings.nats, "buzz-write").await?;
        let subjects = Subjects::new(&settings.nats_prefix).map_err(anyhow::Error::msg)?;
        let relay = buzz_core::Keys::from_secret_hex(&settings.relay_secret_key)
            .ok_or_else(|| anyhow::anyhow!("BUZZ_RELAY_SECRET_KEY is not a valid secret key"))?;
        let admin = tokio::net::TcpListener::bind(settings.admin_listen).await?;
        let admin_addr = admin.local_addr()?;
        let relay = std::sync::Arc::new(relay);
        // The lanes' own connections plan each batch statement once per connection (a custom plan
        // per batch cost 0.5 ms of planning for 0.13 ms of execution). A cached plan is as good as
        // the table sizes it was made with: the connections are replaced every few seconds, so
        // that plans made on a new, still empty database (a hashed scan of all of `events` for the
        // duplicate check) do not outlive its growth.
        // One set of lanes for kind-9 posts and one for NIP-AR revisions.
        let lanes = u32::try_from(settings.batch.lanes.saturating_mul(2)).unwrap_or(u32::MAX);
        let generic = [("plan_cache_mode", "force_generic_plan")];
        let batch_pool = connect(&settings, lanes, &generic, Some(BATCH_PLAN_LIFETIME)).await?;
        Ok(Self {
            writer: Writer::new(pool, &batch_pool, settings.batch, nats, subjects, relay),
            admin,
            admin_addr,
            concurrency: settings.concurrency,
            sweep_every: settings.ttl_sweep_every,
        })
    }

    /// The bound admin address (port 0 resolved).
    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves the write subject and runs the TTL and retention sweeps until `shutdown`.
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
        let writer = self.writer.clone();
        let manage = serve::serve(
            self.writer.nats.clone(),
            self.writer.subjects.manage(),
            buzz_bus::subjects::WRITE_GROUP,
            self.concurrency,
            shutdown.clone(),
            move |m: Incoming<buzz_bus::manage::ManageRequest>| {
                let writer = writer.clone();
                async move { Some(writer.manage(m.body).await) }
            },
        );
        tokio::spawn(sweep_loop(self.writer.pool.clone(), self.sweep_every, shutdown.clone()));
        let pool = self.writer.pool.clone();
        let nats = self.writer.nats.clone();
        let admin = axum::serve(self.admin, ready_router(pool, nats))
            .with_graceful_shutdown(shutdown.cancelled_owned());
        tracing::info!(admin = %self.admin_addr, "write-service running");
        let (a, b, c) = tokio::join!(bus, admin, manage);
        a?;
        b?;
        c?;
        self.writer.nats.flush().await.ok();
        Ok(())
    }
}

/// The write pool. Every connection starts with the write budget (`statement_timeout`,
/// `lock_timeout`) as session defaults, at no cost per write; waiting for a connection is bounded
/// by the lock timeout too. A write that runs into one is rolled back and answered
/// `error: database busy, ...` (see `error::WriteError`) well before the gateway's bus timeout.
async fn connect(
    settings: &Settings,
    size: u32,
    extra: &[(&str, &str)],
    // `None`: sqlx's default lifetime.
    max_lifetime: Option<std::time::Duration>,
) -> anyhow::Result<sqlx::PgPool> {
    let options: sqlx::postgres::PgConnectOptions = settings.database_url.parse()?;
    let options = options
        .application_name("buzz-relay")
        .options([
            ("statement_timeout", format!("{}ms", settings.statement_timeout_ms)),
            ("lock_timeout", format!("{}ms", settings.lock_timeout_ms)),
        ])
        .options(extra.iter().copied());
    let mut pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(std::time::Duration::from_millis(settings.lock_timeout_ms));
    if let Some(lifetime) = max_lifetime {
        pool = pool.max_lifetime(lifetime);
    }
    Ok(pool.connect_with(options).await?)
}

/// Removes expired TTL-channel events in batches. Reads never serve an expired event even before
/// the sweeper reaches it (every query filters on `expires_at`); this only reclaims space. Then
/// removes revision events past their community's retention (never a current revision).
async fn sweep_loop(pool: sqlx::PgPool, every: std::time::Duration, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        loop {
            match sweep_expired(&pool, 1000).await {
                Ok(n) => {
                    metrics::counter!("buzz_ttl_swept_total").increment(n);
                    if n < 1000 {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "ttl sweep failed");
                    break;
                }
            }
        }
        match retention::sweep_all(&pool).await {
            Ok(n) => metrics::counter!("buzz_artifact_retention_swept_total").increment(n),
            Err(e) => tracing::warn!(error = %e, "artifact retention sweep failed"),
        }
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

/// Deletes up to `batch` expired events (TTL channels); replicas may run this concurrently.
async fn sweep_expired(pool: &sqlx::PgPool, batch: i64) -> Result<u64, sqlx::Error> {
    let n = sqlx::query(
        "DELETE FROM events WHERE (community_id, id) IN ( \
             SELECT community_id, id FROM events WHERE expires_at IS NOT NULL AND expires_at <= now() \
             LIMIT $1 FOR UPDATE SKIP LOCKED)",
    )
    .bind(batch)
    .execute(pool)
    .await?
    .rows_affected();
    Ok(n)
}
