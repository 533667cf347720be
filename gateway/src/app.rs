//! The built gateway: connects NATS and Redis, binds the public and admin listeners, builds the
//! shared [`AppState`] and serves until shutdown, then drains the sockets within the grace period.

use std::net::SocketAddr;
use std::sync::Arc;

use buzz_bus::Subjects;
use tokio_util::sync::CancellationToken;

use crate::fi::sockets;
use crate::settings::Settings;
use crate::state::AppState;
use crate::{access, hosts, http, listener, live, ratelimit, slots};

/// A built gateway: connected, listeners bound, ready to run.
pub struct Application {
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    /// `/metrics` and probes, on their own port (`Settings::admin_listen`).
    admin: tokio::net::TcpListener,
    admin_addr: SocketAddr,
}

impl Application {
    /// Connects to NATS and Redis, binds the public and admin listeners and builds the shared state.
    pub async fn build(settings: Settings, shutdown: CancellationToken) -> anyhow::Result<Self> {
        let nats = buzz_bus::Bus::new(buzz_bus::serve::connect(&settings.nats, "buzz-gateway").await?);
        let redis = buzz_http_auth::connect_redis(&settings.redis, 2).await?;
        let subjects = Subjects::new(&settings.nats_prefix).map_err(anyhow::Error::msg)?;
        let listener = tokio::net::TcpListener::bind(settings.listen).await?;
        let addr = listener.local_addr()?;
        let admin = tokio::net::TcpListener::bind(settings.admin_listen).await?;
        let admin_addr = admin.local_addr()?;
        let state = Arc::new(AppState {
            hosts: hosts::HostCache::new(nats.clone(), subjects.clone(), settings.bus_retry())
                .identity_only(settings.nip_fi.mode == buzz_fi::Mode::Off),
            access: access::AccessClient::new(nats.clone(), &subjects, settings.bus_retry()),
            rate: ratelimit::PubkeyLimiter::new(
                redis.clone(),
                &settings.redis_prefix,
                settings.rate_pubkey_per_min,
            )
            .with_timeout(settings.redis_timeout),
            manage_rate: ratelimit::PubkeyLimiter::counting(
                ratelimit::NIP86_CALLS,
                redis.clone(),
                &settings.redis_prefix,
                settings.rate_manage_per_min,
            )
            .with_timeout(settings.redis_timeout),
            guard: buzz_http_auth::ReplayGuard::new(redis, &settings.redis_prefix)
                .with_timeout(settings.redis_timeout),
            registry: Arc::new(live::Registry::default()),
            fi_trust: Arc::new(buzz_fi::Registry::new(
                &settings.nip_fi.issuers,
                settings.nip_fi.jwks_max_age,
                settings.nip_fi.jwks_timeout,
            )),
            fi_sockets: Arc::default(),
            key_slots: slots::KeySlots::default(),
            nats,
            subjects,
            settings,
            shutdown,
        });
        Ok(Self { state, listener, addr, admin, admin_addr })
    }

    /// The bound public address (WebSockets and tenant HTTP).
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound admin address (`/metrics`, `/healthz`, `/readyz`).
    #[must_use]
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves until the shutdown token fires; then stops accepting, tells every socket to close
    /// and waits for them up to the grace period.
    pub async fn run(self) -> anyhow::Result<()> {
        let state = self.state.clone();
        let shutdown = state.shutdown.clone();
        let live = tokio::spawn(live::run(
            state.nats.client().clone(),
            state.subjects.clone(),
            state.registry.clone(),
            shutdown.clone(),
        ));
        state.fi_trust.spawn_refresh(state.settings.nip_fi.jwks_refresh, shutdown.clone());
        let (nats, subject) = (state.nats.client().clone(), state.subjects.fi_revalidate());
        let subscribe = move || {
            let (nats, subject) = (nats.clone(), subject.clone());
            async move { Ok(nats.subscribe(subject).await?) }
        };
        let fi = tokio::spawn(sockets::supervise(
            subscribe,
            state.settings.nip_fi.mode,
            state.fi_sockets.clone(),
            shutdown.clone(),
        ));
        // The admin port outlives the drain: a draining gateway is still scraped and probed.
        let admin_stop = CancellationToken::new();
        let admin = tokio::spawn(buzz_telemetry::serve_admin(
            self.admin,
            http::router::admin_router(
                state.nats.clone(),
                state.fi_sockets.clone(),
                state.settings.nip_fi.mode,
            ),
            admin_stop.clone(),
        ));
        tracing::info!(addr = %self.addr, admin = %self.admin_addr, "gateway listening");
        let app = http::router::router(state.clone());
        listener::serve(self.listener, app, &state.settings, shutdown.clone()).await;
        let deadline = tokio::time::Instant::now() + state.settings.shutdown_grace;
        while state.registry.socket_count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        live.abort();
        fi.abort();
        state.nats.flush().await.ok();
        admin_stop.cancel();
        admin.await??;
        Ok(())
    }
}
