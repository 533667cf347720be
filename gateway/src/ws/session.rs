//! The socket loop and its handlers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use buzz_bus::{
    AccessChanged, AccessReply, AccessRequest, Actor, BusError, CommunityLease, QueryRequest, WriteReply,
    WriteRequest,
};
use buzz_core::{ClientMessage, Event, Filter, ParseError, RelayMessage};
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::query::{self, QueryUpdate};
use super::subs::{self, Pending, Subs};
use crate::live::Push;
use crate::AppState;

/// Outbound messages queued per socket before the writer applies backpressure.
const OUTBOUND_QUEUE: usize = 1024;
/// Most queued messages written before a flush.
const FLUSH_EVERY: usize = 64;
/// Live pushes queued per socket; a socket that falls this far behind is closed.
const LIVE_QUEUE: usize = 4096;

struct Session {
    state: Arc<AppState>,
    community: CommunityLease,
    host: String,
    challenge: String,
    actor: Option<Actor>,
    subs: Subs,
    read_cache: HashMap<Uuid, bool>,
    /// The community access version the cached answers and the authentication were last checked
    /// against; a live event carrying a newer one triggers a re-check before delivery.
    validated_version: i64,
    out: mpsc::Sender<Message>,
    queries: mpsc::Sender<QueryUpdate>,
    writes: Arc<Semaphore>,
    /// Per-connection write limit.
    bucket: crate::ratelimit::TokenBucket,
}

/// `actor`: the socket starts authenticated (a bearer token resolved before the upgrade).
pub async fn run(
    socket: WebSocket,
    state: Arc<AppState>,
    community: CommunityLease,
    host: String,
    actor: Option<Actor>,
) {
    metrics::gauge!("buzz_gateway_sockets").increment(1);
    let (mut sink, mut stream) = socket.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(OUTBOUND_QUEUE);
    let writer = tokio::spawn(async move {
        // Write whatever is queued, then flush once: a REQ answer of many events becomes a few
        // large writes instead of one syscall (and TCP segment) per event.
        'outer: while let Some(first) = out_rx.recv().await {
            let mut next = Some(first);
            let mut fed = 0;
            while let Some(m) = next.take() {
                let close = matches!(m, Message::Close(_));
                if sink.feed(m).await.is_err() {
                    break 'outer;
                }
                if close {
                    let _ = sink.flush().await;
                    break 'outer;
                }
                // At most FLUSH_EVERY messages per flush, so a busy socket still flushes regularly.
                fed += 1;
                if fed < FLUSH_EVERY {
                    next = out_rx.try_recv().ok();
                }
            }
            if sink.flush().await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    let (push_tx, mut push_rx) = mpsc::channel(LIVE_QUEUE);
    let lagged = CancellationToken::new();
    let registration = state.registry.register(community.community_id, push_tx, lagged.clone());
    let (q_tx, mut q_rx) = mpsc::channel(64);
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
        subs: Subs::default(),
        read_cache: HashMap::new(),
        validated_version: 0,
        out: out_tx,
        queries: q_tx,
    };
    s.send(RelayMessage::Auth(s.challenge.clone())).await;
    let mut ping = tokio::time::interval(state.settings.ping_interval);
    ping.tick().await;
    let mut last_seen = Instant::now();
    loop {
        tokio::select! {
            biased;
            () = state.shutdown.cancelled() => {
                s.close(1001, "relay shutting down").await;
                break;
            }
            () = lagged.cancelled() => {
                s.send(RelayMessage::Notice("error: too slow to follow live events; reconnect and replay".into())).await;
                s.close(1008, "too slow").await;
                break;
            }
            m = stream.next() => {
                let Some(Ok(msg)) = m else { break };
                last_seen = Instant::now();
                match msg {
                    Message::Text(text) => s.on_text(text.as_str()).await,
                    Message::Binary(_) => s.send(RelayMessage::Notice("invalid: binary messages are not supported".into())).await,
                    Message::Close(_) => break,
                    Message::Ping(_) | Message::Pong(_) => {}
                }
            }
            Some(update) = q_rx.recv() => s.on_query(update).await,
            Some(push) = push_rx.recv() => s.on_push(push).await,
            _ = ping.tick() => {
                if last_seen.elapsed() > state.settings.idle_timeout {
                    s.close(1000, "idle timeout").await;
                    break;
                }
                let _ = s.out.send(Message::Ping(Vec::new().into())).await;
            }
        }
    }
    drop(registration);
    drop(s);
    let _ = tokio::time::timeout(state.settings.shutdown_grace, writer).await;
    metrics::gauge!("buzz_gateway_sockets").decrement(1);
}

impl Session {
    async fn send(&self, msg: RelayMessage) {
        let _ = self.out.send(Message::Text(msg.to_json().into())).await;
    }

    async fn close(&self, code: u16, reason: &str) {
        let frame = CloseFrame { code, reason: reason.to_owned().into() };
        let _ = self.out.send(Message::Close(Some(frame))).await;
    }

    async fn on_text(&mut self, text: &str) {
        let limits = &self.state.settings.limits;
        if text.len() > limits.max_message_length {
            let notice = format!(
                "invalid: message too large ({} bytes, max {})",
                text.len(),
                limits.max_message_length
            );
            return self.send(RelayMessage::Notice(notice)).await;
        }
        if self.actor.as_ref().is_some_and(|a| a.expired(buzz_core::unix_now())) {
            self.expire().await;
        }
        let state = self.state.clone();
        match ClientMessage::parse(text, &state.settings.limits) {
            Ok(ClientMessage::Event(event)) => self.on_event(*event).await,
            Ok(ClientMessage::Req { sub_id, filters }) => self.on_req(sub_id, filters, false).await,
            Ok(ClientMessage::Count { sub_id, filters }) => self.on_req(sub_id, filters, true).await,
            Ok(ClientMessage::Close(sub_id)) => {
                self.subs.map.remove(&sub_id);
            }
            Ok(ClientMessage::Auth(event)) => self.on_auth(*event).await,
            Err(ParseError::Notice(text)) => self.send(RelayMessage::Notice(text)).await,
            Err(ParseError::Ok { id, reason }) => {
                self.send(RelayMessage::Ok { id, accepted: false, message: reason }).await
            }
            Err(ParseError::Closed { sub_id, reason }) => {
                self.send(RelayMessage::Closed { sub_id, message: reason }).await
            }
        }
    }

    async fn on_auth(&mut self, event: Event) {
        let id = event.id.clone();
        let reply = |accepted: bool, message: String| RelayMessage::Ok { id: id.clone(), accepted, message };
        let (event, owner) = match verify(event, true).await {
            Ok(v) => v,
            Err(reason) => return self.send(reply(false, reason)).await,
        };
        if let Err(reason) =
            buzz_core::nip42::validate_auth_event(&event, &self.challenge, &self.host, buzz_core::unix_now())
        {
            return self.send(reply(false, format!("invalid: {reason}"))).await;
        }
        // A NIP-OA agent authenticates with its owner's grant in the AUTH event.
        let mut actor = Actor::session(event.pubkey.clone());
        let mut admitted = self.is_member(&event.pubkey).await;
        if let (Ok(false), Some(owner)) = (&admitted, owner) {
            admitted = self.is_member(&owner).await;
            actor.agent_of = Some(owner);
        }
        match admitted {
            Ok(true) => {
                self.actor = Some(actor);
                self.read_cache.clear();
                self.send(reply(true, String::new())).await;
            }
            Ok(false) => self.send(reply(false, "restricted: not a member of this community".into())).await,
            Err(e) => self.send(reply(false, e.nip01())).await,
        }
    }

    async fn is_member(&self, pubkey: &str) -> Result<bool, BusError> {
        let req =
            AccessRequest::Member { community_id: self.community.community_id, pubkey: pubkey.to_owned() };
        let answer: Result<AccessReply, BusError> = buzz_bus::retry::request_retrying(
            &self.state.nats,
            self.state.subjects.access(),
            &req,
            self.state.settings.bus_retry(),
        )
        .await?;
        Ok(answer?.role.is_some())
    }

    async fn on_event(&mut self, event: Event) {
        let Some(actor) = self.actor.clone() else {
            let message = "auth-required: authenticate to publish".to_owned();
            return self.send(RelayMessage::Ok { id: event.id, accepted: false, message }).await;
        };
        if event.pubkey != actor.pubkey {
            let message = "restricted: event pubkey is not the authenticated pubkey".to_owned();
            return self.send(RelayMessage::Ok { id: event.id, accepted: false, message }).await;
        }
        if !self.bucket.try_take() {
            metrics::counter!("buzz_gateway_rate_limited_total", "limit" => "connection").increment(1);
            let message = "rate-limited: too many events on this connection; slow down".to_owned();
            return self.send(RelayMessage::Ok { id: event.id, accepted: false, message }).await;
        }
        let Ok(permit) = self.writes.clone().acquire_owned().await else { return };
        let state = self.state.clone();
        let out = self.out.clone();
        let community_id = self.community.community_id;
        let span = tracing::info_span!("gateway.event", event_id = %event.id, kind = event.kind);
        tokio::spawn(async move {
            let _permit = permit;
            let id = event.id.clone();
            if let Err(message) = state.rate.check(community_id, &actor.pubkey).await {
                let msg = RelayMessage::Ok { id, accepted: false, message };
                let _ = out.send(Message::Text(msg.to_json().into())).await;
                return;
            }
            let (accepted, message) = match verify(event, false).await {
                Err(reason) => (false, reason),
                Ok((_, owner)) if owner.is_some() && owner != actor.agent_of && actor.agent_of.is_some() => {
                    (false, "restricted: the auth tag names another owner".to_owned())
                }
                Ok((_, None)) if actor.agent_of.is_some() => {
                    (false, "restricted: an agent's events carry its owner's auth tag".to_owned())
                }
                Ok((event, _)) => {
                    let req = WriteRequest::Event { community_id, actor, event };
                    let reply: Result<WriteReply, BusError> =
                        buzz_bus::retry::request_retrying(&state.nats, state.subjects.write(), &req, state.settings.bus_retry()).await;
                    match reply.and_then(|r| r) {
                        Ok(ok) => (true, ok.message),
                        Err(e) => (false, e.nip01()),
                    }
                }
            };
            metrics::counter!("buzz_gateway_events_total", "accepted" => if accepted { "true" } else { "false" }).increment(1);
            let msg = RelayMessage::Ok { id, accepted, message };
            let _ = out.send(Message::Text(msg.to_json().into())).await;
        }.instrument(span));
    }

    async fn on_req(&mut self, sub_id: String, filters: Vec<Filter>, count: bool) {
        let Some(actor) = self.actor.clone() else {
            let message = "auth-required: authenticate to read".to_owned();
            return self.send(RelayMessage::Closed { sub_id, message }).await;
        };
        let generation = if count {
            0
        } else {
            match self.subs.open(&sub_id, filters.clone(), self.state.settings.limits.max_subscriptions) {
                Some(g) => g,
                None => {
                    let message = format!(
                        "invalid: too many subscriptions (max {})",
                        self.state.settings.limits.max_subscriptions
                    );
                    return self.send(RelayMessage::Closed { sub_id, message }).await;
                }
            }
        };
        let req = QueryRequest { community_id: self.community.community_id, reader: actor, filters, count };
        let span = tracing::info_span!("gateway.req", sub_id = %sub_id, count);
        tokio::spawn(
            query::run(
                self.state.nats.clone(),
                self.state.subjects.query(),
                req,
                sub_id,
                generation,
                self.state.settings.bus_retry(),
                self.queries.clone(),
            )
            .instrument(span),
        );
    }

    async fn on_query(&mut self, update: QueryUpdate) {
        match update {
            QueryUpdate::Events { sub_id, generation, events } => {
                let Some(sub) = self.subs.current(&sub_id, generation) else { return };
                if let Some(p) = &mut sub.pending {
                    p.sent.extend(events.iter().filter_map(|raw| event_id(raw)));
                }
                for event_json in events {
                    self.send(RelayMessage::Event { sub_id: sub_id.clone(), event_json }).await;
                }
            }
            QueryUpdate::Done { sub_id, generation: 0, result } => match result {
                Ok(Some(count)) => self.send(RelayMessage::Count { sub_id, count }).await,
                Ok(None) => self.send(RelayMessage::Count { sub_id, count: 0 }).await,
                Err(e) => self.send(RelayMessage::Closed { sub_id, message: e.nip01() }).await,
            },
            QueryUpdate::Done { sub_id, generation, result } => {
                let Some(sub) = self.subs.current(&sub_id, generation) else { return };
                match result {
                    Ok(_) => {
                        let pending = sub.pending.take();
                        self.send(RelayMessage::Eose(sub_id.clone())).await;
                        if let Some(Pending { buffer, sent }) = pending {
                            for (ev, json) in buffer {
                                if !sent.contains(&ev.event.id) {
                                    self.send(RelayMessage::Event {
                                        sub_id: sub_id.clone(),
                                        event_json: json.to_string(),
                                    })
                                    .await;
                                }
                            }
                        }
                    }
                    Err(e) => {
                        self.subs.map.remove(&sub_id);
                        self.send(RelayMessage::Closed { sub_id, message: e.nip01() }).await;
                    }
                }
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
                    return self.expire().await;
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
                        None => return self.interrupt(&ev).await,
                    }
                }
                let Some(actor) = &self.actor else { return };
                let readable = match subs::live_access(actor, &ev) {
                    Some(b) => Some(b),
                    None => self.can_read_channel(ev.channel_id).await,
                };
                match readable {
                    Some(true) => self.deliver(&ev, &json).await,
                    Some(false) => {}
                    None => self.interrupt(&ev).await,
                }
            }
            Push::Access(change) => match change.as_ref() {
                AccessChanged::MemberRemoved { pubkey } => {
                    if self.actor.as_ref().is_some_and(|a| &a.pubkey == pubkey || a.member_key() == pubkey) {
                        self.deauthenticate().await;
                    }
                }
                AccessChanged::Channel { channel_id } => {
                    self.read_cache.remove(channel_id);
                }
            },
        }
    }

    /// The socket's token expired: drop authentication and every subscription; the client may
    /// authenticate again (NIP-42) or reconnect with a new token.
    async fn expire(&mut self) {
        self.actor = None;
        self.read_cache.clear();
        let ids: Vec<String> = self.subs.map.drain().map(|(id, _)| id).collect();
        for sub_id in ids {
            self.send(RelayMessage::Closed { sub_id, message: "auth-required: token expired".into() }).await;
        }
    }

    /// The socket's key lost its community membership: drop authentication and every subscription.
    async fn deauthenticate(&mut self) {
        self.actor = None;
        self.read_cache.clear();
        let ids: Vec<String> = self.subs.map.drain().map(|(id, _)| id).collect();
        for sub_id in ids {
            let message = "restricted: no longer a member of this community".to_owned();
            self.send(RelayMessage::Closed { sub_id, message }).await;
        }
    }

    /// Access changed since this socket last checked: drop cached answers and re-check membership.
    /// `Some(false)` when the event must not be delivered (no longer a member), `None` when there
    /// was no answer (no delivery either: fail closed, but see [`Self::interrupt`]).
    async fn revalidate(&mut self, version: i64) -> Option<bool> {
        self.read_cache.clear();
        let key = self.actor.as_ref().map(|a| a.member_key().to_owned())?;
        match self.is_member(&key).await {
            Ok(true) => {
                self.validated_version = version;
                Some(true)
            }
            Ok(false) => {
                self.deauthenticate().await;
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
    async fn interrupt(&mut self, ev: &buzz_bus::LiveEvent) {
        metrics::counter!("buzz_gateway_live_interrupted_total").increment(1);
        let closed: Vec<String> =
            self.subs.map.iter().filter(|(_, sub)| subs::wants(sub, ev)).map(|(id, _)| id.clone()).collect();
        for sub_id in closed {
            self.subs.map.remove(&sub_id);
            let message = format!("error: live delivery interrupted, replay from {}", ev.event.created_at);
            self.send(RelayMessage::Closed { sub_id, message }).await;
        }
    }

    async fn deliver(&mut self, ev: &Arc<buzz_bus::LiveEvent>, json: &Arc<str>) {
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
            self.send(RelayMessage::Event { sub_id, event_json: json.to_string() }).await;
        }
        for sub_id in overflowed {
            self.subs.map.remove(&sub_id);
            let message = "error: too many live events before the stored answer completed".to_owned();
            self.send(RelayMessage::Closed { sub_id, message }).await;
        }
    }

    /// Private channels and DMs: ask the query-service once (retried on another replica when the
    /// first does not answer), cache until an access change. `None`: no answer (no delivery).
    async fn can_read_channel(&mut self, channel: Option<Uuid>) -> Option<bool> {
        let (Some(channel_id), Some(actor)) = (channel, &self.actor) else { return Some(false) };
        if let Some(b) = self.read_cache.get(&channel_id) {
            return Some(*b);
        }
        let req = AccessRequest::CanRead {
            community_id: self.community.community_id,
            reader: actor.clone(),
            channel_id,
        };
        let answer: Result<Result<AccessReply, BusError>, BusError> = buzz_bus::retry::request_retrying(
            &self.state.nats,
            self.state.subjects.access(),
            &req,
            self.state.settings.bus_retry(),
        )
        .await;
        match answer.and_then(|r| r) {
            Ok(r) => {
                self.read_cache.insert(channel_id, r.can_read);
                Some(r.can_read)
            }
            Err(e) => {
                tracing::warn!(error = %e, "live access check failed");
                None
            }
        }
    }
}

/// Id, signature and NIP-OA `auth` tag checks on the blocking pool. Returns the event and the
/// owner named by a valid `auth` tag; `Err` is the NIP-01 reason. An AUTH event's tag is checked
/// without its kind (an AUTH publishes nothing).
async fn verify(event: Event, is_auth: bool) -> Result<(Event, Option<String>), String> {
    let checked = tokio::task::spawn_blocking(move || {
        event.verify().map_err(|e| e.to_string())?;
        let kind = (!is_auth).then_some(event.kind);
        let artifact = event.kind == buzz_core::nipar::KIND_REVISION;
        let owner = buzz_core::nipoa::check_event(&event, kind).map_err(|r| {
            format!("invalid: {}", if artifact { r.replace("auth tag", "artifact auth tag") } else { r })
        })?;
        Ok((event, owner))
    });
    checked.await.unwrap_or_else(|_| Err("error: verification failed".into()))
}

fn event_id(raw: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        id: String,
    }
    serde_json::from_str::<IdOnly>(raw).ok().map(|e| e.id)
}
