//! The socket loop and its live handlers (the other handlers are in `auth`, `reads`, `writes`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use buzz_bus::{Actor, CommunityLease, QueryKind};
use buzz_core::{ChannelId, ClientMessage, ParseError, Pubkey, RelayMessage};
use futures::stream::SplitStream;
use futures::StreamExt;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::outbound::{self, Frame, Outbound};
use super::query::QueryUpdate;
use super::subs::{self, Subs};
use crate::live::Push;
use crate::state::AppState;

/// Live pushes queued per socket; a socket that falls this far behind is closed.
const LIVE_QUEUE: usize = 4096;

pub(super) struct Session {
    pub(super) state: Arc<AppState>,
    pub(super) community: CommunityLease,
    pub(super) host: String,
    pub(super) challenge: String,
    pub(super) actor: Option<Actor>,
    pub(super) subs: Subs,
    pub(super) read_cache: HashMap<ChannelId, bool>,
    /// The community access version the cached answers and the authentication were last checked
    /// against; a live event carrying a newer one triggers a re-check before delivery.
    validated_version: i64,
    /// The socket's outbound queue (bounded in bytes; see `outbound`).
    pub(super) out: Outbound,
    pub(super) queries: mpsc::Sender<QueryUpdate>,
    /// The socket's queries in progress, stopped when what asked for them is gone.
    pub(super) reads: super::inflight::Reads,
    pub(super) writes: Arc<Semaphore>,
    /// Per-connection write limit.
    pub(super) bucket: crate::ratelimit::TokenBucket,
    /// Per-connection read limit (REQ and COUNT).
    pub(super) read_bucket: crate::ratelimit::TokenBucket,
    /// Set when a REQ or COUNT found the read bucket empty: the loop reads nothing more from the
    /// socket until then (the bucket's next token), so a client that answers each refusal at once
    /// is slowed by TCP instead of spinning through refusals.
    pub(super) read_pause: Option<Instant>,
    /// When an unauthenticated socket is closed; `None` while authenticated. Set at connect
    /// and again whenever the socket loses its authentication.
    unauthenticated_until: Option<Instant>,
    /// NIP-FI: set when the socket was admitted with valid evidence (AUTH must prove its key;
    /// the socket closes at its deadline).
    pub(super) fi: Option<crate::fi::admission::Admission>,
    /// The key whose membership removal last dropped this socket's authentication, so that a
    /// ban of that key which follows the removal still closes the socket.
    pub(super) removed_key: Option<Pubkey>,
    /// Set when the socket's key was banned from the community: the loop ends after the close
    /// frame queued with it.
    pub(super) banned: bool,
}

/// How a socket's loop ended early.
enum End {
    Closed,
    TooSlow,
}

/// `actor`: the socket starts authenticated (a bearer token resolved before the upgrade).
pub async fn run(
    socket: WebSocket,
    state: Arc<AppState>,
    community: CommunityLease,
    host: String,
    actor: Option<Actor>,
    fi: Option<crate::fi::admission::Admission>,
) {
    metrics::gauge!("buzz_gateway_sockets").increment(1);
    let (sink, stream) = socket.split();
    let (out, queue) = outbound::channel(state.settings.outbound_queue_bytes);
    let mut writer = tokio::spawn(outbound::write(sink, queue));
    let (push_tx, push_rx) = mpsc::channel(LIVE_QUEUE);
    let lagged = CancellationToken::new();
    let registration = state.registry.register(community.community_id, push_tx, lagged.clone());
    let fi_registration = state.fi_sockets.register(community.community_id, fi.is_some());
    let (q_tx, q_rx) = mpsc::channel(64);
    let unauthenticated_until = actor.is_none().then(|| Instant::now() + state.settings.auth_timeout);
    let mut s = Session {
        challenge: Uuid::new_v4().simple().to_string(),
        writes: Arc::new(Semaphore::new(state.settings.max_inflight_writes)),
        state: state.clone(),
        community,
        host,
        actor,
        bucket: crate::ratelimit::TokenBucket::new(
            state.settings.rate_conn_per_sec,
            state.settings.rate_conn_burst,
        ),
        read_bucket: crate::ratelimit::TokenBucket::new(
            state.settings.rate_read_per_sec,
            state.settings.rate_read_burst,
        ),
        read_pause: None,
        subs: Subs::default(),
        read_cache: HashMap::new(),
        validated_version: 0,
        out,
        queries: q_tx,
        reads: super::inflight::Reads::new(state.settings.max_inflight_queries),
        unauthenticated_until,
        fi,
        removed_key: None,
        banned: false,
    };
    s.send(RelayMessage::Auth(s.challenge.clone()));
    let ended = s.serve(stream, push_rx, q_rx, lagged, fi_registration.revoked.clone()).await;
    if let End::TooSlow = ended {
        let community = s.community.community_id;
        tracing::warn!(%community, queued = s.out.queued(), "closing socket: {}", outbound::TOO_SLOW);
    }
    drop(registration);
    drop(fi_registration);
    drop(s);
    // A peer that stopped reading cannot hold the writer (and its memory) past the grace period.
    if tokio::time::timeout(state.settings.shutdown_grace, &mut writer).await.is_err() {
        writer.abort();
    }
    metrics::gauge!("buzz_gateway_sockets").decrement(1);
}

impl Session {
    /// The loop: never waits on the network for writes, so every check below keeps running.
    async fn serve(
        &mut self,
        mut stream: SplitStream<WebSocket>,
        mut push_rx: mpsc::Receiver<Push>,
        mut q_rx: mpsc::Receiver<QueryUpdate>,
        lagged: CancellationToken,
        fi_revoked: CancellationToken,
    ) -> End {
        let state = self.state.clone();
        let mut ping = tokio::time::interval(state.settings.ping_interval);
        ping.tick().await;
        let mut last_seen = Instant::now();
        let fi_deadline = self.fi.as_ref().map(|a| a.deadline);
        loop {
            let paced = self.out.has_room();
            tokio::select! {
                biased;
                () = state.shutdown.cancelled() => {
                    self.close(1001, "relay shutting down");
                    return End::Closed;
                }
                () = self.out.overflowed() => return End::TooSlow,
                () = lagged.cancelled() => {
                    self.send(RelayMessage::Notice("error: live events were lost (too slow to follow them, or the relay lost its bus); reconnect and replay".into()));
                    self.close(1008, "too slow");
                    return End::Closed;
                }
                () = fi_revoked.cancelled() => {
                    self.send(RelayMessage::Notice("restricted: this community now requires federated identity; reconnect with evidence".into()));
                    self.close(1008, "federated identity required");
                    return End::Closed;
                }
                () = until(fi_deadline) => {
                    self.send(RelayMessage::Notice("restricted: federated identity lifetime ended; reconnect".into()));
                    self.close(1008, "federated identity lifetime ended");
                    return End::Closed;
                }
                () = until(self.unauthenticated_until) => {
                    let secs = state.settings.auth_timeout.as_secs_f64();
                    self.send(RelayMessage::Notice(format!("auth-required: not authenticated within {secs} s")));
                    self.close(1008, "auth timeout");
                    return End::Closed;
                }
                () = until(self.read_pause) => self.read_pause = None,
                m = stream.next(), if self.read_pause.is_none() => {
                    let Some(Ok(msg)) = m else { return End::Closed };
                    last_seen = Instant::now();
                    match msg {
                        Message::Text(text) => self.on_text(text.as_str()).await,
                        Message::Binary(_) => self.send(RelayMessage::Notice("invalid: binary messages are not supported".into())),
                        Message::Close(_) => return End::Closed,
                        Message::Ping(_) | Message::Pong(_) => {}
                    }
                }
                Some(update) = q_rx.recv(), if paced => self.on_query(update),
                () = self.out.drained(), if !paced => {}
                Some(push) = push_rx.recv() => {
                    self.on_push(push).await;
                    if self.banned {
                        return End::Closed;
                    }
                }
                _ = ping.tick() => {
                    if last_seen.elapsed() > state.settings.idle_timeout {
                        self.close(1000, "idle timeout");
                        return End::Closed;
                    }
                    // A ping is never what overflows the queue.
                    self.out.push_paced(Frame::Ping);
                }
            }
            self.track_authentication();
        }
    }

    /// Starts the unauthenticated deadline when the socket has just lost its authentication
    /// (token expiry, membership removal) and clears it once authenticated.
    fn track_authentication(&mut self) {
        match (&self.actor, self.unauthenticated_until) {
            (Some(_), Some(_)) => self.unauthenticated_until = None,
            (None, None) => {
                self.unauthenticated_until = Some(Instant::now() + self.state.settings.auth_timeout);
            }
            _ => {}
        }
    }

    /// Queues `msg` without waiting; a queue over its byte limit ends the socket as too slow.
    pub(super) fn send(&self, msg: RelayMessage) {
        self.out.push(Frame::reply(&msg));
    }

    /// Queues part of a REQ/COUNT answer; the loop paces these (see `Outbound::push_paced`).
    pub(super) fn answer(&self, msg: RelayMessage) {
        self.out.push_paced(Frame::reply(&msg));
    }

    /// Queues a close frame without waiting; the writer sends it after what is queued before it.
    pub(super) fn close(&self, code: u16, reason: &str) {
        self.out.push(Frame::Close(code, reason.to_owned()));
    }

    async fn on_text(&mut self, text: &str) {
        let limits = &self.state.settings.limits;
        if text.len() > limits.max_message_length {
            let notice = format!(
                "invalid: message too large ({} bytes, max {})",
                text.len(),
                limits.max_message_length
            );
            return self.send(RelayMessage::Notice(notice));
        }
        if self.actor.as_ref().is_some_and(|a| a.expired(buzz_core::unix_now())) {
            self.expire();
        }
        let state = self.state.clone();
        let parsed = ClientMessage::parse(text, &state.settings.limits);
        super::meter::message_in(&parsed);
        match parsed {
            Ok(ClientMessage::Event(event)) => self.on_event(*event).await,
            Ok(ClientMessage::Req { sub_id, filters }) => self.on_req(sub_id, filters, QueryKind::Page),
            Ok(ClientMessage::Count { sub_id, filters }) => self.on_req(sub_id, filters, QueryKind::Count),
            Ok(ClientMessage::Close(sub_id)) => {
                self.subs.map.remove(&sub_id);
                self.reads.cancel_sub(&sub_id);
            }
            Ok(ClientMessage::Auth(event)) => self.on_auth(*event).await,
            Err(ParseError::Notice(text)) => self.send(RelayMessage::Notice(text)),
            Err(ParseError::Ok { id, reason }) => {
                self.send(RelayMessage::Ok { id, accepted: false, message: reason })
            }
            Err(ParseError::Closed { sub_id, reason }) => {
                self.send(RelayMessage::Closed { sub_id, message: reason })
            }
        }
    }

    async fn on_push(&mut self, push: Push) {
        match push {
            Push::Event(ev, json) => {
                if self.actor.is_none() || self.subs.map.is_empty() {
                    return;
                }
                if self.actor.as_ref().is_some_and(|a| a.expired(buzz_core::unix_now())) {
                    return self.expire();
                }
                // Access is checked only for events a subscription asks for: the others would not
                // be delivered anyway, and each check may wait on the bus.
                if !self.subs.map.values().any(|sub| subs::wants(sub, &ev)) {
                    return;
                }
                if ev.access_version > self.validated_version {
                    match self.revalidate(ev.access_version).await {
                        Some(true) => {}
                        Some(false) => return,
                        None => return self.interrupt(&ev),
                    }
                }
                let Some(actor) = &self.actor else { return };
                let readable = match subs::live_access(actor, &ev) {
                    Some(b) => Some(b),
                    None => self.can_read_channel(ev.channel_id).await,
                };
                match readable {
                    Some(true) => self.deliver(&ev, &json),
                    Some(false) => {}
                    None => self.interrupt(&ev),
                }
            }
            Push::Access(change) => self.on_access(&change),
        }
    }

    /// The socket's token expired: drop authentication and every subscription; the client may
    /// authenticate again (NIP-42) or reconnect with a new token.
    fn expire(&mut self) {
        self.actor = None;
        self.read_cache.clear();
        self.reads.cancel_all();
        let ids: Vec<String> = self.subs.map.drain().map(|(id, _)| id).collect();
        for sub_id in ids {
            self.send(RelayMessage::Closed { sub_id, message: "auth-required: token expired".into() });
        }
    }

    /// Access changed since this socket last checked: drop cached answers and re-check membership.
    /// `Some(false)` when the event must not be delivered (no longer a member), `None` when there
    /// was no answer (no delivery either: fail closed, but see [`Self::interrupt`]).
    async fn revalidate(&mut self, version: i64) -> Option<bool> {
        self.read_cache.clear();
        let actor = self.actor.clone()?;
        match self.still_admitted(&actor).await {
            Ok(true) => {
                self.validated_version = version;
                Some(true)
            }
            Ok(false) => {
                self.deauthenticate();
                Some(false)
            }
            Err(e) => {
                tracing::warn!(error = %e, "access re-check failed");
                None
            }
        }
    }

    /// Live access could not be decided for `ev` (the access check got no answer, even from a
    /// second replica): it is not delivered, and every subscription it would have gone to is
    /// closed with the point to replay from, so no event is lost without the client knowing.
    fn interrupt(&mut self, ev: &buzz_bus::LiveEvent) {
        metrics::counter!("buzz_gateway_live_interrupted_total").increment(1);
        let closed: Vec<String> =
            self.subs.map.iter().filter(|(_, sub)| subs::wants(sub, ev)).map(|(id, _)| id.clone()).collect();
        for sub_id in closed {
            self.subs.map.remove(&sub_id);
            self.reads.cancel_sub(&sub_id);
            let message = format!("error: live delivery interrupted, replay from {}", ev.event.created_at);
            self.send(RelayMessage::Closed { sub_id, message });
        }
    }

    fn deliver(&mut self, ev: &Arc<buzz_bus::LiveEvent>, json: &Arc<str>) {
        let mut overflowed = Vec::new();
        let mut ready = Vec::new();
        for (sub_id, sub) in &mut self.subs.map {
            if !subs::wants(sub, ev) {
                continue;
            }
            match &mut sub.pending {
                Some(p) if p.buffer.len() >= subs::MAX_PENDING => overflowed.push(sub_id.clone()),
                Some(p) => p.buffer.push((ev.clone(), json.clone())),
                None => ready.push(sub_id.clone()),
            }
        }
        for sub_id in ready {
            self.out.push(Frame::Event { sub_id, raw: json.clone() });
        }
        for sub_id in overflowed {
            self.subs.map.remove(&sub_id);
            let message = "error: too many live events before the stored answer completed".to_owned();
            self.send(RelayMessage::Closed { sub_id, message });
        }
    }

    /// Private channels and DMs: ask the query-service once (retried on another replica when the
    /// first does not answer), cache until an access change. `None`: no answer (no delivery).
    async fn can_read_channel(&mut self, channel: Option<ChannelId>) -> Option<bool> {
        let (Some(channel_id), Some(actor)) = (channel, &self.actor) else { return Some(false) };
        if let Some(b) = self.read_cache.get(&channel_id) {
            return Some(*b);
        }
        match self.state.access.can_read(self.community.community_id, actor, channel_id).await {
            Ok(can_read) => {
                self.read_cache.insert(channel_id, can_read);
                Some(can_read)
            }
            Err(e) => {
                tracing::warn!(error = %e, "live access check failed");
                None
            }
        }
    }
}

/// Resolves at `deadline`; never when there is none.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
