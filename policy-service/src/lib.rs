//! Policy-service of buzz-relay: the operator HTTP API (communities) and the host → community
//! answers gateways lease over the bus.

pub mod fi_accept;
pub mod fi_bindings;
pub mod fi_request;
pub mod fi_routes;
pub mod fi_store;
pub mod fi_view;
pub mod operator;
pub mod revalidator;
pub mod settings;
pub mod store;

use std::net::SocketAddr;
use std::sync::Arc;

use buzz_bus::serve::{self, Incoming};
use buzz_bus::{LeaseReply, LeaseRequest, Subjects};
use tokio_util::sync::CancellationToken;

pub use settings::Settings;

pub struct Application {
    addr: SocketAddr,
    listener: tokio::net::TcpListener,
    router: axum::Router,
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
            guard: buzz_http_auth::ReplayGuard::new(redis.clone(), &settings.redis_prefix),
            operator_pubkeys: settings.operator_pubkeys.clone(),
            origin: settings.operator_origin.clone(),
        });
        let fi = &settings.nip_fi;
        let registry = Arc::new(buzz_fi::Registry::new(&fi.issuers, fi.jwks_max_age, fi.jwks_timeout));
        let fi_state = Arc::new(fi_routes::FiState {
            op: state.clone(),
            settings: fi.clone(),
            registry: registry.clone(),
        });
        let ready_pool = pool.clone();
        let ready_nats = nats.clone();
        let router = operator::router(state)
            .merge(fi_routes::router(fi_state))
            .merge(buzz_telemetry::admin_router(move || {
                let pool = ready_pool.clone();
                let nats = ready_nats.clone();
                async move {
                    nats.connection_state() == async_nats::connection::State::Connected
                        && sqlx::query("SELECT 1").execute(&pool).await.is_ok()
                }
            }))
            .fallback(|| async { operator::ApiError::not_found("no such route") })
            .layer(axum::extract::DefaultBodyLimit::max(operator::MAX_BODY_BYTES))
            .layer(axum::middleware::from_fn(operator::contract_errors));
        let listener = tokio::net::TcpListener::bind(settings.listen).await?;
        let addr = listener.local_addr()?;
        let (lease_ms, nip_fi) = (settings.lease_ms, settings.nip_fi);
        Ok(Self { addr, listener, router, nats, subjects, pool, lease_ms, nip_fi, registry })
    }

    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
        let lease = serve::serve(
            self.nats.clone(),
            self.subjects.policy_lease(),
            buzz_bus::subjects::POLICY_GROUP,
            64,
            shutdown.clone(),
            move |m: Incoming<LeaseRequest>| {
                let pool = pool.clone();
                async move { Some(handle_lease(&pool, lease_ms, &m.body).await) }
            },
        );
        let http = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown.clone().cancelled_owned());
        tracing::info!(addr = %self.addr, "policy-service listening");
        let (a, b) = tokio::join!(lease, http);
        a?;
        b?;
        self.nats.flush().await.ok();
        Ok(())
    }
}

/// host → community, for gateways. Unknown hosts answer `community: None`. The read waits while
/// an optional→required NIP-FI transition drains the host's leases (see `fi_store::lease`).
pub async fn handle_lease(
    pool: &sqlx::PgPool,
    lease_ms: u64,
    req: &LeaseRequest,
) -> Result<LeaseReply, buzz_bus::BusError> {
    let Some(host) = buzz_core::host::normalize_host(&req.host) else {
        return Ok(LeaseReply { community: None, lease_ms });
    };
    match fi_store::lease(pool, &host).await {
        Ok(row) => {
            let community = row.map(|(c, fi_issuers)| buzz_bus::CommunityLease {
                community_id: c.community_id,
                host: c.host,
                owner_pubkey: c.owner_pubkey,
                requires_nip_fi: c.requires_nip_fi,
                policy_generation: c.policy_generation,
                fi_issuers,
            });
            // Optional leases last at most one second (the drain waits 1.1 s).
            Ok(LeaseReply { community, lease_ms: lease_ms.min(1000) })
        }
        Err(e) => {
            tracing::error!(error = %e, "host lease lookup failed");
            Err(buzz_bus::BusError::unavailable("policy store unavailable"))
        }
    }
}
