//! REQ and COUNT of one socket: the query task per request and its answer, paced by the socket's
//! outbound queue, with live events held back until `EOSE`.

use buzz_bus::{QueryKind, QueryRequest};
use buzz_core::{EventId, Filter, RelayMessage};
use tracing::Instrument;

use super::outbound::Frame;
use super::query::{self, Answered, QueryUpdate, Ticket};
use super::session::Session;
use super::subs::Pending;

impl Session {
    pub(super) fn on_req(&mut self, sub_id: String, filters: Vec<Filter>, kind: QueryKind) {
        let Some(actor) = self.actor.clone() else {
            let message = "auth-required: authenticate to read".to_owned();
            return self.send(RelayMessage::Closed { sub_id, message });
        };
        let ticket = if kind == QueryKind::Count {
            Ticket::Count
        } else {
            match self.subs.open(&sub_id, filters.clone(), self.state.settings.limits.max_subscriptions) {
                Some(generation) => Ticket::Page { generation },
                None => {
                    let message = format!(
                        "invalid: too many subscriptions (max {})",
                        self.state.settings.limits.max_subscriptions
                    );
                    return self.send(RelayMessage::Closed { sub_id, message });
                }
            }
        };
        let req = QueryRequest {
            community_id: self.community.community_id,
            reader: actor,
            filters,
            kind: ticket.kind(),
        };
        let span = tracing::info_span!("gateway.req", sub_id = %sub_id, count = kind == QueryKind::Count);
        tokio::spawn(
            query::run(
                self.state.nats.client().clone(),
                self.state.subjects.query(),
                req,
                sub_id,
                ticket,
                self.state.settings.bus_retry(),
                self.queries.clone(),
            )
            .instrument(span),
        );
    }

    pub(super) fn on_query(&mut self, update: QueryUpdate) {
        match update {
            // A COUNT is answered by its number only.
            QueryUpdate::Events { ticket: Ticket::Count, .. } => {}
            QueryUpdate::Events { sub_id, ticket: Ticket::Page { generation }, events } => {
                let Some(sub) = self.subs.current(&sub_id, generation) else { return };
                if let Some(p) = &mut sub.pending {
                    p.sent.extend(events.iter().filter_map(|raw| event_id(raw)));
                }
                for event_json in events {
                    self.answer(RelayMessage::Event { sub_id: sub_id.clone(), event_json });
                }
            }
            QueryUpdate::Done { sub_id, ticket: Ticket::Count, result } => match result {
                Ok(Answered::Count(count)) => self.answer(RelayMessage::Count { sub_id, count }),
                Ok(Answered::End) => self.answer(RelayMessage::Count { sub_id, count: 0 }),
                Err(e) => self.answer(RelayMessage::Closed { sub_id, message: e.nip01() }),
            },
            QueryUpdate::Done { sub_id, ticket: Ticket::Page { generation }, result } => {
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
