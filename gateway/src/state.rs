//! What every request and socket of this gateway shares: [`AppState`], built once by
//! `Application::build`.

use std::sync::Arc;

use buzz_bus::Subjects;
use tokio_util::sync::CancellationToken;

use crate::fi::admission::Gate;
use crate::fi::sockets::FiSockets;
use crate::settings::Settings;
use crate::slots::KeySlots;
use crate::{access, hosts, live, ratelimit};

/// Shared by every request and socket of this gateway.
pub struct AppState {
    /// The gateway's configuration.
    pub settings: Settings,
    /// The NATS connection every bus request and subscription uses.
    pub nats: buzz_bus::Bus,
    /// Subject names under the configured prefix.
    pub subjects: Subjects,
    /// Host → community leases.
    pub hosts: hosts::HostCache,
    /// Membership, channel-read and token answers of the query-service.
    pub access: access::AccessClient,
    /// NIP-98 replay protection shared by every gateway (Redis).
    pub guard: buzz_http_auth::ReplayGuard,
    /// The per-pubkey write limit shared by every gateway (Redis).
    pub rate: ratelimit::PubkeyLimiter,
    /// The per-pubkey NIP-86 call limit shared by every gateway (Redis).
    pub manage_rate: ratelimit::PubkeyLimiter,
    /// Live sockets by community, for fan-out of live events and access notices.
    pub registry: Arc<live::Registry>,
    /// NIP-FI: the issuer trust registry (`BUZZ_NIP_FI_ISSUERS`) and sockets for revalidation.
    pub fi_trust: Arc<buzz_fi::Registry>,
    /// Sockets by community and FI admission, for NIP-FI revalidation.
    pub fi_sockets: Arc<FiSockets>,
    /// Query slots per key over all its sockets (`max_inflight_queries_per_key`).
    pub key_slots: KeySlots,
    /// Cancelled when the gateway shuts down.
    pub shutdown: CancellationToken,
}

impl AppState {
    /// What NIP-FI admission reads of this state.
    #[must_use]
    pub fn fi_gate(&self) -> Gate<'_> {
        Gate { settings: &self.settings.nip_fi, trust: &self.fi_trust, hosts: &self.hosts }
    }
}
