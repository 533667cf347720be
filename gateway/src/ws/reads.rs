//! REQ and COUNT of one socket: the query task per request and its answer, paced by the socket's
//! outbound queue, with live events held back until `EOSE`.

use buzz_bus::{QueryKind, QueryRequest};
use buzz_core::{EventId, Filter, RelayMessage};
use tracing::Instrument;

use super::outbound::Frame;
use super::query::{self, Answered, QueryBus, QueryUpdate, Ticket};
use super::session::Session;
use super::subs::Pending;

impl Session {
    pub(super) fn on_req(&mut self, sub_id: String, filters: Vec<Filter>, kind: QueryKind) {
        let Some(actor) = self.actor.clone() else {
            let message = "auth-required: authenticate to read".to_owned();
            return self.send(RelayMessage::Closed { sub_id, message });
        };
        if !self.read_bucket.try_take() {
            let s = &self.state.settings;
            let wait =
                std::time::Duration::from_secs_f64(1.0 / s.rate_read_per_sec.max(0.001)).min(s.idle_timeout);
            self.read_pause = Some(tokio::time::Instant::now() + wait);
            let message = format!(
                "rate-limited: too many REQ and COUNT messages on this connection ({} per second, bursts of {})",
                s.rate_read_per_sec, s.rate_read_burst
            );
            return self.send(RelayMessage::Closed { sub_id, message });
        }
        let max = self.state.settings.limits.max_subscriptions;
        let ticket = if kind == QueryKind::Count {
            // A COUNT holds no subscription: its own bound keeps a socket from queueing without end.
            if self.reads.counts() >= max {
                let message =
                    format!("rate-limited: too many COUNTs in progress on this connection (max {max})");
                return self.send(RelayMessage::Closed { sub_id, message });
            }
            Ticket::Count { serial: self.reads.next_serial() }
        } else {
            // A REQ reusing an id replaces it (NIP-01): the earlier REQ's query is stopped first.
            self.reads.cancel_sub(&sub_id);
            match self.subs.open(&sub_id, filters.clone(), max) {
                Some(generation) => Ticket::Page { generation },
                None => {
                    let message = format!("invalid: too many subscriptions (max {max})");
                    return self.send(RelayMessage::Closed { sub_id, message });
                }
            }
        };
        let req = QueryRequest {
            community_id: self.community.community_id,
            filters,
            kind: ticket.kind(),
            query_id: None,
            reader: actor,
        };
        let span = tracing::info_span!("gateway.req", sub_id = %sub_id, count = kind == QueryKind::Count);
        // The query waits for a slot of this socket, then of its key on this gateway, before it
        // asks the query-service (more wait their turn: a client opening many REQs at once is
        // served in order, not refused).
        let socket_slots = self.reads.slots.clone();
        let key_slots =
            self.state.key_slots.of(&req.reader.pubkey, self.state.settings.max_inflight_queries_per_key);
        let (bus, tx, sub) = (QueryBus::of(&self.state), self.queries.clone(), sub_id.clone());
        let task = tokio::spawn(
            async move {
                let (Ok(_socket), Ok(_key)) =
                    (socket_slots.acquire_owned().await, key_slots.acquire_owned().await)
                else {
                    return;
                };
                query::run(bus, req, sub, ticket, tx).await;
            }
            .instrument(span),
        );
        self.reads.started(ticket, sub_id, task.abort_handle());
    }

    pub(super) fn on_query(&mut self, update: QueryUpdate) {
        match update {
            // A COUNT is answered by its number only.
            QueryUpdate::Events { ticket: Ticket::Count { .. }, .. } => {}
            QueryUpdate::Events { sub_id, ticket: Ticket::Page { generation }, events } => {
                let Some(sub) = self.subs.current(&sub_id, generation) else { return };
                if let Some(p) = &mut sub.pending {
                    p.sent.extend(events.iter().filter_map(|raw| event_id(raw)));
                }
                for event_json in events {
                    self.answer(RelayMessage::Event { sub_id: sub_id.clone(), event_json });
                }
            }
            QueryUpdate::Done { sub_id, ticket: ticket @ Ticket::Count { .. }, result } => {
                if !self.reads.finished(ticket) {
                    return;
                }
                match result {
                    Ok(Answered::Count(count)) => self.answer(RelayMessage::Count { sub_id, count }),
                    Ok(Answered::End) => self.answer(RelayMessage::Count { sub_id, count: 0 }),
                    Err(e) => self.answer(RelayMessage::Closed { sub_id, message: e.nip01() }),
                }
            }
            QueryUpdate::Done { sub_id, ticket: ticket @ Ticket::Page { generation }, result } => {
                self.reads.finished(ticket);
                let Some(sub) = self.subs.current(&sub_id, generation) else { return };
                match result {
                    Ok(_) => {
                        let pending = sub.pending.take();
                        let search_only = sub.filters.iter().all(|f| f.search.is_some());
                        self.answer(RelayMessage::Eose(sub_id.clone()));
                        // NIP-50 search is answered from the store only (docs/design.md "Search"):
                        // a REQ of searches alone ends here; in a mixed REQ the other filters stay
                        // live and the searches match nothing new (`Filter::matches`).
                        if search_only {
                            self.subs.map.remove(&sub_id);
                            let message = SEARCH_ENDS_AT_EOSE.to_owned();
                            return self.answer(RelayMessage::Closed { sub_id, message });
                        }
                        // Held live events are live traffic: they count against the queue limit.
                        if let Some(Pending { buffer, sent }) = pending {
                            for (ev, raw) in buffer {
                                if !sent.contains(&ev.event.id) {
                                    self.out.push(Frame::Event { sub_id: sub_id.clone(), raw });
                                }
                            }
                        }
                    }
                    Err(e) => {
                        self.subs.map.remove(&sub_id);
                        self.answer(RelayMessage::Closed { sub_id, message: e.nip01() });
                    }
                }
            }
        }
    }
}

/// The `CLOSED` reason after the stored answer of a REQ whose filters all `search`.
pub const SEARCH_ENDS_AT_EOSE: &str =
    "unsupported: search subscriptions end at EOSE (new events are not matched live; search again)";

fn event_id(raw: &str) -> Option<EventId> {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        id: EventId,
    }
    serde_json::from_str::<IdOnly>(raw).ok().map(|e| e.id)
}
