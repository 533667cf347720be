//! The built policy-service: connects PostgreSQL, Redis and NATS, composes the operator routes,
//! binds its listeners and serves the operator API and host leases until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::{LeaseRequest, Subjects};
use tokio_util::sync::CancellationToken;

use crate::communities::{audit, lifecycle, routes};
use crate::leases::handler::handle_lease;
use crate::leases::store::DRAIN_WAITERS;
use crate::nip_fi::{revalidator, routes as fi_routes};
use crate::operator;
use crate::portability::{export, import};
use crate::settings::Settings;

/// A built policy-service: connected, listeners bound, ready to run.
pub struct Application {
    addr: SocketAddr,
    listener: tokio::net::TcpListener,
    router: axum::Router,
    /// `/metrics` and probes on their own port (`Settings::admin_listen`).
    admin: tokio::net::TcpListener,
    admin_addr: SocketAddr,
    admin_router: axum::Router,
    nats: async_nats::Client,
    subjects: Subjects,
    pool: sqlx::PgPool,
    lease_ms: u64,
    nip_fi: buzz_fi::FiSettings,
    registry: Arc<buzz_fi::Registry>,
}

impl Application {
    /// Connects to PostgreSQL (schema checked), Redis and NATS and binds the listener.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let pool = buzz_store::connect(&settings.database_url, 10).await?;
        buzz_store::check_schema(&pool).await?;
        let redis = buzz_http_auth::connect_redis(&settings.redis, 2).await?;
        let nats = serve::connect(&settings.nats, "buzz-policy").await?;
        let subjects = Subjects::new(&settings.nats_prefix).map_err(anyhow::Error::msg)?;
        let state = Arc::new(operator::OperatorState {
            pool: pool.clone(),
            guard: buzz_http_auth::ReplayGuard::new(redis, &settings.redis_prefix),
            operator_pubkeys: settings.operator_pubkeys.clone(),
            origin: settings.operator_origin.clone(),
        });
        let fi = &settings.nip_fi;
        let registry = Arc::new(buzz_fi::Registry::new(&fi.issuers, fi.jwks_max_age, fi.jwks_timeout));
        let (ready_pool, ready_nats) = (pool.clone(), nats.clone());
        let ready = move || {
            let pool = ready_pool.clone();
            let nats = ready_nats.clone();
            async move {
                nats.connection_state() == async_nats::connection::State::Connected
                    && sqlx::query("SELECT 1").execute(&pool).await.is_ok()
            }
        };
        let admin_router = buzz_telemetry::admin_router(ready.clone());
        let router = operator_routes(&settings, state, &nats, &subjects, registry.clone())
            .merge(buzz_telemetry::probe_router(ready))
            .fallback(|| async { operator::not_found("no such route") })
            .layer(axum::extract::DefaultBodyLimit::max(operator::MAX_BODY_BYTES))
            .layer(axum::middleware::from_fn(operator::contract_errors));
        let listener = tokio::net::TcpListener::bind(settings.listen).await?;
        let addr = listener.local_addr()?;
        let admin = tokio::net::TcpListener::bind(settings.admin_listen).await?;
        let admin_addr = admin.local_addr()?;
        let (lease_ms, nip_fi) = (settings.lease_ms, settings.nip_fi);
        Ok(Self {
            addr,
            listener,
            router,
            admin,
            admin_addr,
            admin_router,
            nats,
            subjects,
            pool,
            lease_ms,
            nip_fi,
            registry,
        })
    }

    /// The bound operator API address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound admin address (`/metrics`, `/healthz`, `/readyz`).
    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves until `shutdown` is cancelled, then drains.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        self.registry.spawn_refresh(self.nip_fi.jwks_refresh, shutdown.clone());
        tokio::spawn(revalidator::run(
            self.pool.clone(),
            self.nats.clone(),
            self.subjects.fi_revalidate(),
            self.nip_fi.revalidate_interval,
            shutdown.clone(),
        ));
        let pool = self.pool.clone();
        let lease_ms = self.lease_ms;
        let waiters = Arc::new(tokio::sync::Semaphore::new(DRAIN_WAITERS));
        let lease = serve::serve(
            self.nats.clone(),
            self.subjects.policy_lease(),
            buzz_bus::subjects::POLICY_GROUP,
            64,
            shutdown.clone(),
            move |m: Incoming<LeaseRequest>| {
                let (pool, waiters) = (pool.clone(), waiters.clone());
                async move { Some(handle_lease(&pool, lease_ms, &waiters, &m.body).await) }
            },
        );
        let http = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned());
        let admin = buzz_telemetry::serve_admin(self.admin, self.admin_router, shutdown.clone());
        tracing::info!(addr = %self.addr, admin = %self.admin_addr, "policy-service listening");
        let (a, b, c) = tokio::join!(lease, http, admin);
        a?;
        b?;
        c?;
        self.nats.flush().await.ok();
        Ok(())
    }
}

/// Every operator route over the shared operator `state`: communities, their audit log, the
/// NIP-FI policy plane, the lifecycle, export and import.
fn operator_routes(
    settings: &Settings,
    state: Arc<operator::OperatorState>,
    nats: &async_nats::Client,
    subjects: &Subjects,
    registry: Arc<buzz_fi::Registry>,
) -> axum::Router {
    let lifecycle_state = Arc::new(lifecycle::LifecycleState {
        op: state.clone(),
        bus: buzz_bus::Bus::new(nats.clone()),
        purge_subject: subjects.snapshot_purge(),
    });
    let export_state = Arc::new(export::ExportState {
        op: state.clone(),
        relay: settings.relay_secret_key.as_deref().and_then(buzz_core::Keys::from_secret_hex),
        max_bytes: settings.import_max_bytes,
        max_line_bytes: settings.import_max_line_bytes,
        imports: Arc::new(tokio::sync::Semaphore::new(settings.import_max_concurrent)),
    });
    let fi_state =
        Arc::new(fi_routes::FiState { op: state.clone(), settings: settings.nip_fi.clone(), registry });
    let audit_router = audit::router(state.clone());
    routes::router(state)
        .merge(audit_router)
        .merge(fi_routes::router(fi_state))
        .merge(lifecycle::router(lifecycle_state))
        .merge(export::router(export_state.clone()))
        .merge(import::route::router(export_state))
}
