//! Snapshot-service of buzz-relay: the stable manifest transport (NIP-AR "Stable manifest
//! transport") over shared Redis. This first part connects to Redis and NATS and serves health
//! and metrics; the transport itself lands with its own issue.

pub mod settings;

use std::net::SocketAddr;

use fred::interfaces::ClientLike;
use tokio_util::sync::CancellationToken;

pub use settings::Settings;

/// The snapshot-service: its Redis and NATS connections and admin listener.
pub struct Application {
    nats: async_nats::Client,
    redis: fred::clients::Pool,
    admin: tokio::net::TcpListener,
    admin_addr: SocketAddr,
}

impl Application {
    /// Connects to Redis and NATS and binds the admin listener.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let redis = buzz_http_auth::connect_redis(&settings.redis, 2).await?;
        let nats = buzz_bus::serve::connect(&settings.nats, "buzz-snapshot").await?;
        let admin = tokio::net::TcpListener::bind(settings.admin_listen).await?;
        let admin_addr = admin.local_addr()?;
        Ok(Self { nats, redis, admin, admin_addr })
    }

    /// The bound admin address (port 0 resolved).
    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves health and metrics until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
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
        axum::serve(self.admin, router).with_graceful_shutdown(shutdown.cancelled_owned()).await?;
        Ok(())
    }
}
