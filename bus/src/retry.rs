//! Requests that survive one stalled replica (docs/design.md, "Stalls").
//!
//! A NATS queue group hands each request to one member picked at random, and a stalled member
//! (paused, swapping, stuck) still holds its subscription, so without help every request it
//! draws waits for the whole bus timeout. Idempotent requests are therefore *hedged*: a replica
//! that takes a request acknowledges it at once; when no acknowledgement (or answer) came within
//! `Retry::first`, the same payload is sent again, preferably straight to the replica of that
//! subject that answered this process most recently (every replica also listens on its own
//! direct subject and names itself in its replies), else to the queue group. Every attempt
//! replies to the same inbox and the first answer wins. At most [`MAX_ATTEMPTS`] are sent, each
//! wait twice the previous, all within `Retry::total`. A request a replica acknowledged is not
//! sent again however slow it is: hedging is for stalls, not for slow work.
//!
//! Only requests that may run twice use this: reads, and writes of events (idempotent by event
//! id). Member changes and token issue use `rpc::request`.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde::{de::DeserializeOwned, Serialize};
use tokio::time::Instant;

use crate::error::{BusError, ErrorCode};
use crate::trace;

/// Reply header naming the replica (one `serve` loop) that answered.
pub const INSTANCE_HEADER: &str = "Buzz-Instance";
/// Request header asking the replica that takes the request to say so at once (an empty
/// message with this header and [`INSTANCE_HEADER`], before the answer), and the header of that
/// acknowledgement. Only requesters that skip it ask for it (`rpc::request` does not).
pub const ACK_HEADER: &str = "Buzz-Ack";

/// Request header: the time (unix milliseconds) by which the requester must see the request
/// taken (acknowledged, or answered); it stops waiting then. A replica that takes the request
/// more than [`TAKE_BY_SLACK`] later (it was paused, stalled) drops it unanswered instead of
/// running it for nobody: for a request that is not idempotent (a snapshot capture's start),
/// that is work and quota no one would see. Requests without it run whenever they are taken.
pub const TAKE_BY_HEADER: &str = "Buzz-Take-By";

/// How late past its [`TAKE_BY_HEADER`] a request still runs: room for clocks that disagree.
pub const TAKE_BY_SLACK: Duration = Duration::from_secs(5);

/// The wall clock in unix milliseconds (what [`TAKE_BY_HEADER`] holds).
#[must_use]
pub fn unix_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// Whether a request with these headers was given up by its requester by `now_ms` (unix ms):
/// its take-by time is more than [`TAKE_BY_SLACK`] past. No or an unreadable header: never.
#[must_use]
pub fn given_up(headers: Option<&async_nats::HeaderMap>, now_ms: u128) -> bool {
    let by = headers.and_then(|h| h.get(TAKE_BY_HEADER)).and_then(|v| v.as_str().parse::<u128>().ok());
    by.is_some_and(|by| now_ms > by + TAKE_BY_SLACK.as_millis())
}

/// Most sends of one request: the first and two retries. Bounds the extra load a slow (not
/// stalled) service takes from hedging to 3x, and only for requests slower than `Retry::first`.
pub const MAX_ATTEMPTS: u32 = 3;

/// How long a replica's last answer keeps it a candidate for direct retries.
const RECENT_FOR: Duration = Duration::from_secs(60);
/// Replicas remembered per subject.
const RECENT_MAX: usize = 16;

/// When to ask again and when to give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Wait for an answer before the first retry; each later wait doubles.
    pub first: Duration,
    /// Overall deadline of the request (the bus timeout).
    pub total: Duration,
}

impl Retry {
    /// No retry: one attempt with `total` as its deadline.
    #[must_use]
    pub fn once(total: Duration) -> Self {
        Self { first: total, total }
    }
}

/// The subject one replica of `subject` listens on besides its queue group.
#[must_use]
pub fn direct_subject(subject: &str, instance: &str) -> String {
    format!("{subject}.direct.{instance}")
}

/// Replicas that answered, by subject: (instance, when it last answered), oldest first.
type Answerers = HashMap<String, Vec<(String, Instant)>>;

/// What this process has seen answer (shared by every client of the process: the instances are
/// unique, so several gateways in one process, as in tests, only help each other).
static RECENT: LazyLock<Mutex<Answerers>> = LazyLock::new(Default::default);

fn note_answer(subject: &str, instance: &str) {
    let Ok(mut map) = RECENT.lock() else { return };
    let seen = map.entry(subject.to_owned()).or_default();
    seen.retain(|(i, _)| i != instance);
    seen.push((instance.to_owned(), Instant::now()));
    if seen.len() > RECENT_MAX {
        seen.remove(0);
    }
}

fn forget(subject: &str, instance: &str) {
    if let Ok(mut map) = RECENT.lock() {
        if let Some(seen) = map.get_mut(subject) {
            seen.retain(|(i, _)| i != instance);
        }
    }
}

/// The replica of `subject` that answered most recently, other than those in `tried`.
fn most_recent(subject: &str, tried: &[String]) -> Option<String> {
    let map = RECENT.lock().ok()?;
    let seen = map.get(subject)?;
    seen.iter().rev().find(|(i, at)| at.elapsed() < RECENT_FOR && !tried.contains(i)).map(|(i, _)| i.clone())
}

fn unavailable() -> BusError {
    BusError::unavailable(buzz_core::refusal::BUS_UNAVAILABLE)
}

fn timed_out() -> BusError {
    BusError::new(ErrorCode::Timeout, "the service did not answer in time")
}

fn is_no_responders(msg: &async_nats::Message) -> bool {
    msg.status == Some(async_nats::StatusCode::NO_RESPONDERS)
}

/// Whether `msg` is an acknowledgement ([`ACK_HEADER`]), not an answer or a frame.
#[must_use]
pub fn is_ack(msg: &async_nats::Message) -> bool {
    msg.headers.as_ref().is_some_and(|h| h.get(ACK_HEADER).is_some())
}

/// [`ACK_HEADER`] value of a request answered by one reply: acknowledge only when the answer is
/// not ready within `serve::ACK_AFTER` (an answer says the same and more). A streamed request
/// (`open_stream`) asks with any other value and is acknowledged at once, before its frames, so
/// that an acknowledgement never arrives between frames.
pub const ACK_IF_SLOW: &str = "slow";

/// Request headers: trace context, and the ask for an acknowledgement (`ack`: [`ACK_HEADER`]'s
/// value).
fn request_headers(ack: &str) -> async_nats::HeaderMap {
    let mut headers = trace::current_headers();
    headers.insert(ACK_HEADER, ack);
    headers
}

/// What one wait on the reply inbox gave.
enum Wait {
    Reply(async_nats::Message),
    /// A replica took the request (it names itself); its answer will follow.
    Ack,
    NoResponders,
    Hedge,
}

async fn wait_until(
    replies: &mut crate::mux::Replies,
    until: Instant,
    subject: &str,
) -> Result<Wait, BusError> {
    match tokio::time::timeout_at(until, replies.next()).await {
        Err(_) => Ok(Wait::Hedge),
        Ok(None) => Err(unavailable()),
        Ok(Some(m)) if is_no_responders(&m) => Ok(Wait::NoResponders),
        Ok(Some(m)) if is_ack(&m) => {
            note_instance(subject, &m);
            Ok(Wait::Ack)
        }
        Ok(Some(m)) => Ok(Wait::Reply(m)),
    }
}

/// `rpc::request` for idempotent requests whose reply is itself a `Result<R, BusError>` (every
/// request/reply subject's reply type is), hedged as the module describes. One error either way:
/// the bus's (`Unavailable` when nobody serves `subject`, `Timeout` when no attempt was answered)
/// or the one the service answered with. Timed, all attempts together, in
/// `buzz_bus_request_seconds` (outcome `ok` when an answer arrived, whatever it says).
pub async fn request_retrying<T: Serialize, R: DeserializeOwned>(
    client: &crate::Bus,
    subject: String,
    body: &T,
    retry: Retry,
) -> Result<R, BusError> {
    let started = std::time::Instant::now();
    let result: Result<Result<R, BusError>, BusError> =
        request_hedged(client, subject.clone(), body, retry).await;
    crate::latency::record(&subject, started, &result);
    result?
}

async fn request_hedged<T: Serialize, R: DeserializeOwned>(
    client: &crate::Bus,
    subject: String,
    body: &T,
    retry: Retry,
) -> Result<R, BusError> {
    let payload: Bytes = serde_json::to_vec(body).map_err(|_| BusError::internal())?.into();
    let headers = request_headers(ACK_IF_SLOW);
    let mut replies = client.inbox().await.map_err(|_| unavailable())?;
    let inbox = replies.subject.clone();
    let deadline = Instant::now() + retry.total;
    let mut wait = retry.first;
    let mut tried: Vec<String> = Vec::new();
    let mut target: Option<String> = None;
    let mut acked = false;
    let mut attempt = 1;
    loop {
        let to = target.as_deref().map_or_else(|| subject.clone(), |i| direct_subject(&subject, i));
        client
            .publish_with_reply_and_headers(to, inbox.clone(), headers.clone(), payload.clone())
            .await
            .map_err(|_| unavailable())?;
        let hedge_at = if attempt == MAX_ATTEMPTS { deadline } else { (Instant::now() + wait).min(deadline) };
        let mut gone = false;
        loop {
            // Once a replica has taken the request, only its (or an earlier attempt's) answer is
            // awaited: a slow request is not sent again.
            match wait_until(&mut replies, if acked { deadline } else { hedge_at }, &subject).await? {
                Wait::Reply(msg) => return decode(&subject, &msg),
                Wait::Ack => acked = true,
                // Nobody serves the subject at all: no point in waiting for anyone.
                Wait::NoResponders if target.is_none() => {
                    return Err(BusError::unavailable("no service is available"))
                }
                Wait::NoResponders => {
                    forget(&subject, target.as_deref().unwrap_or_default());
                    gone = true;
                    break;
                }
                Wait::Hedge if acked => return Err(timed_out()),
                Wait::Hedge => break,
            }
        }
        if Instant::now() >= deadline {
            break;
        }
        tried.extend(target.take());
        target = most_recent(&subject, &tried);
        // A replica asked directly that is gone (killed, restarted under a new name) answered
        // nothing: the next candidate, or the queue group, is asked at once, and that costs no
        // attempt (each gone one is forgotten, so this ends).
        if gone {
            continue;
        }
        if attempt == MAX_ATTEMPTS {
            break;
        }
        attempt += 1;
        wait *= 2;
        metrics::counter!("buzz_bus_retries_total").increment(1);
        tracing::debug!(%subject, attempt, direct = target.is_some(), "bus request retried");
    }
    Err(timed_out())
}

fn note_instance(subject: &str, msg: &async_nats::Message) {
    if let Some(instance) = msg.headers.as_ref().and_then(|h| h.get(INSTANCE_HEADER)) {
        note_answer(subject, instance.as_str());
    }
}

fn decode<R: DeserializeOwned>(subject: &str, msg: &async_nats::Message) -> Result<R, BusError> {
    note_instance(subject, msg);
    serde_json::from_slice(&msg.payload).map_err(|e| {
        tracing::error!(%subject, error = %e, "undecodable bus reply");
        BusError::internal()
    })
}

/// Opens a streamed answer (numbered frames on a private inbox): sends `body` to `subject`'s
/// queue group and, while no replica has taken it, again on the same schedule as
/// [`request_retrying`], each attempt on its own inbox. Returns the inbox of the first attempt a
/// replica took, and its first frame; the other attempts are dropped (unsubscribed). The time
/// to the first frame is what `buzz_bus_request_seconds` records.
pub async fn open_stream<T: Serialize>(
    client: &async_nats::Client,
    subject: String,
    body: &T,
    retry: Retry,
) -> Result<(async_nats::Subscriber, async_nats::Message), BusError> {
    let started = std::time::Instant::now();
    let result = open_hedged(client, subject.clone(), body, retry).await;
    crate::latency::record(&subject, started, &result);
    result
}

async fn open_hedged<T: Serialize>(
    client: &async_nats::Client,
    subject: String,
    body: &T,
    retry: Retry,
) -> Result<(async_nats::Subscriber, async_nats::Message), BusError> {
    let payload: Bytes = serde_json::to_vec(body).map_err(|_| BusError::internal())?.into();
    let headers = request_headers("1");
    let deadline = Instant::now() + retry.total;
    let mut wait = retry.first;
    let mut attempts: Vec<async_nats::Subscriber> = Vec::new();
    for attempt in 1..=MAX_ATTEMPTS {
        let inbox = client.new_inbox();
        attempts.push(client.subscribe(inbox.clone()).await.map_err(|_| unavailable())?);
        client
            .publish_with_reply_and_headers(subject.clone(), inbox, headers.clone(), payload.clone())
            .await
            .map_err(|_| unavailable())?;
        let hedge_at = if attempt == MAX_ATTEMPTS { deadline } else { (Instant::now() + wait).min(deadline) };
        let first = {
            let nexts = attempts.iter_mut().map(StreamExt::next);
            let first = tokio::time::timeout_at(hedge_at, futures::future::select_all(nexts)).await;
            first.map(|(msg, i, _rest)| (msg, i))
        };
        match first {
            Ok((Some(msg), _)) if is_no_responders(&msg) => {
                return Err(BusError::unavailable("no service is available"))
            }
            Ok((Some(msg), i)) => return first_frame(attempts.swap_remove(i), msg, deadline).await,
            Ok((None, _)) => return Err(unavailable()),
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            break;
        }
        wait *= 2;
        metrics::counter!("buzz_bus_retries_total").increment(1);
        tracing::debug!(%subject, attempt = attempt + 1, "bus stream retried");
    }
    Err(BusError::new(ErrorCode::Timeout, buzz_core::refusal::QUERY_TIMEOUT))
}

/// Skips the acknowledgement `msg` may be and returns the first frame of `replies`.
async fn first_frame(
    mut replies: async_nats::Subscriber,
    msg: async_nats::Message,
    deadline: Instant,
) -> Result<(async_nats::Subscriber, async_nats::Message), BusError> {
    if !is_ack(&msg) {
        return Ok((replies, msg));
    }
    match tokio::time::timeout_at(deadline, replies.next()).await {
        Ok(Some(frame)) => Ok((replies, frame)),
        Ok(None) => Err(unavailable()),
        Err(_) => Err(BusError::new(ErrorCode::Timeout, buzz_core::refusal::QUERY_TIMEOUT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_recent_untried_answerer_is_picked_and_forgotten_ones_are_not() {
        let subject = "unit.v1.pick";
        assert_eq!(most_recent(subject, &[]), None);
        note_answer(subject, "a");
        note_answer(subject, "b");
        assert_eq!(most_recent(subject, &[]).as_deref(), Some("b"));
        assert_eq!(most_recent(subject, &["b".to_owned()]).as_deref(), Some("a"));
        note_answer(subject, "a");
        assert_eq!(most_recent(subject, &[]).as_deref(), Some("a"));
        forget(subject, "a");
        assert_eq!(most_recent(subject, &[]).as_deref(), Some("b"));
        assert_eq!(most_recent("unit.v1.other", &[]), None);
    }

    #[test]
    fn a_direct_subject_is_not_matched_by_the_per_community_wildcards() {
        // `<p>.v1.access.*` (access changes) must not receive direct access requests.
        let direct = direct_subject("p.v1.access", "abc");
        assert_eq!(direct.split('.').count(), 5);
    }
}
