//! Client writes (`EVENT`) of one socket: limits, signature checks on the event's task, the write
//! request over the bus and the `OK` answer, each in its own task.

use buzz_bus::{BusError, WriteOk, WriteRequest};
use buzz_core::{Event, Pubkey, RelayMessage};
use tracing::Instrument;

use super::outbound::Frame;
use super::session::Session;

impl Session {
    pub(super) async fn on_event(&mut self, event: Event) {
        let Some(actor) = self.actor.clone() else {
            let message = "auth-required: authenticate to publish".to_owned();
            return self.send(RelayMessage::Ok { id: event.id, accepted: false, message });
        };
        if event.pubkey != actor.pubkey {
            let message = format!("restricted: {}", buzz_core::refusal::WRONG_AUTHOR);
            return self.send(RelayMessage::Ok { id: event.id, accepted: false, message });
        }
        if !self.bucket.try_take() {
            metrics::counter!("buzz_gateway_rate_limited_total", "limit" => "connection").increment(1);
            let message = "rate-limited: too many events on this connection; slow down".to_owned();
            return self.send(RelayMessage::Ok { id: event.id, accepted: false, message });
        }
        let Ok(permit) = self.writes.clone().acquire_owned().await else { return };
        let state = self.state.clone();
        let out = self.out.clone();
        let community_id = self.community.community_id;
        let (host, connect_kinds) = (self.host.clone(), self.community.kinds.clone());
        let span = tracing::info_span!("gateway.event", event_id = %event.id, kind = event.kind);
        tokio::spawn(async move {
            let _permit = permit;
            let id = event.id.clone();
            if let Err(message) = state.rate.check(community_id, &actor.pubkey).await {
                out.push(Frame::reply(&RelayMessage::Ok { id, accepted: false, message }));
                return;
            }
            // The community's kind rules (NIP-86) as its current host lease says (at most a second
            // old); without an answer, as they were when the socket connected.
            let kinds = match state.hosts.lookup(&host).await {
                Ok(Some(lease)) => lease.kinds,
                _ => connect_kinds,
            };
            if !kinds.admits(event.kind) {
                let message = format!("blocked: kind {} is not allowed in this community", event.kind);
                out.push(Frame::reply(&RelayMessage::Ok { id, accepted: false, message }));
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
                    let reply: Result<WriteOk, BusError> =
                        buzz_bus::retry::request_retrying(&state.nats, state.subjects.write(), &req, state.settings.bus_retry()).await;
                    match reply {
                        Ok(ok) => (true, ok.message),
                        Err(e) => (false, e.nip01()),
                    }
                }
            };
            metrics::counter!("buzz_gateway_events_total", "accepted" => if accepted { "true" } else { "false" }).increment(1);
            out.push(Frame::reply(&RelayMessage::Ok { id, accepted, message }));
        }.instrument(span));
    }
}

/// Id, signature and NIP-OA `auth` tag checks. Returns the event and the owner named by a valid
/// `auth` tag; `Err` is the NIP-01 reason. An AUTH event's tag is checked without its kind (an
/// AUTH publishes nothing). Runs on the event's own task: a check is about 50 µs of CPU, less than
/// handing it to the blocking pool and back cost (the pool's wake-ups were 5 % of the relay's CPU
/// under load, issue 13), and each event already has its own task.
#[allow(clippy::unused_async)]
pub(super) async fn verify(event: Event, is_auth: bool) -> Result<(Event, Option<Pubkey>), String> {
    event.verify().map_err(|e| e.to_string())?;
    let kind = (!is_auth).then_some(event.kind);
    let artifact = event.kind == buzz_core::nipar::KIND_REVISION;
    let owner = buzz_core::nipoa::check_event(&event, kind).map_err(|r| {
        format!("invalid: {}", if artifact { r.replace("auth tag", "artifact auth tag") } else { r })
    })?;
    Ok((event, owner))
}
