//! Acknowledgements of hedged bus requests over real NATS (docs/design.md "Stalls", issue 13): a
//! single-reply request is acknowledged only when its answer is slow, and a streamed request is
//! acknowledged before its frames, never between them.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_bus::retry::{self, is_ack, Retry};
use buzz_bus::serve::{self, Incoming, ACK_AFTER};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

async fn nats() -> async_nats::Client {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    async_nats::connect(url).await.unwrap()
}

fn subject(name: &str) -> String {
    format!("t{}.acks.{name}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

const RETRY: Retry = Retry { first: Duration::from_millis(250), total: Duration::from_secs(3) };

/// A streamed answer that runs longer than `ACK_AFTER`: three frames, the ack before them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_streamed_request_is_acknowledged_before_its_frames_never_between_them() {
    let client = nats().await;
    let subject = subject("stream");
    let shutdown = CancellationToken::new();
    let server = client.clone();
    let served = tokio::spawn(serve::serve(
        client.clone(),
        subject.clone(),
        "acks",
        4,
        shutdown.clone(),
        move |m: Incoming<Value>| {
            let server = server.clone();
            async move {
                let reply = m.reply?;
                // The first frame at once, the others after `ACK_AFTER` has passed: a delayed
                // acknowledgement would land between them.
                for i in 0..3 {
                    server.publish(reply.clone(), format!("frame {i}").into()).await.unwrap();
                    tokio::time::sleep(ACK_AFTER * 2).await;
                }
                None::<Value>
            }
        },
    ));
    // The serve loop subscribes in its own task.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (mut frames, first) = retry::open_stream(&client, subject, &json!({}), RETRY).await.unwrap();
    assert!(!is_ack(&first), "open_stream skips a leading ack");
    let mut got = vec![String::from_utf8(first.payload.to_vec()).unwrap()];
    while got.len() < 3 {
        let m = tokio::time::timeout(Duration::from_secs(2), frames.next()).await.unwrap().unwrap();
        assert!(!is_ack(&m), "an acknowledgement arrived between frames after {got:?}");
        got.push(String::from_utf8(m.payload.to_vec()).unwrap());
    }
    assert_eq!(got, ["frame 0", "frame 1", "frame 2"]);
    shutdown.cancel();
    served.await.unwrap().unwrap();
}

/// Single-reply requests through the multiplexed inbox: a fast one gets its answer and no ack, a
/// slow one is acknowledged first and still answered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_reply_requests_are_acknowledged_only_when_slow() {
    let client = nats().await;
    let subject = subject("single");
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(serve::serve(
        client.clone(),
        subject.clone(),
        "acks",
        4,
        shutdown.clone(),
        |m: Incoming<Value>| async move {
            let delay = m.body["delay_ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            // Every request/reply subject answers a `Result`, which the requester flattens.
            Some(Ok::<Value, buzz_bus::BusError>(json!({ "echo": delay })))
        },
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Watch every message on the inboxes of this bus connection.
    let bus = buzz_bus::Bus::new(client.clone());
    let watcher = nats().await;
    let probe = bus.inbox().await.unwrap();
    let prefix = probe.subject.rsplit_once('.').unwrap().0.to_owned();
    drop(probe);
    let mut seen = watcher.subscribe(format!("{prefix}.*")).await.unwrap();
    watcher.flush().await.unwrap();

    let fast: Value =
        retry::request_retrying(&bus, subject.clone(), &json!({ "delay_ms": 0 }), RETRY).await.unwrap();
    assert_eq!(fast, json!({ "echo": 0 }));
    let m = tokio::time::timeout(Duration::from_secs(1), seen.next()).await.unwrap().unwrap();
    assert!(!is_ack(&m), "a fast request was acknowledged");
    assert!(tokio::time::timeout(Duration::from_millis(300), seen.next()).await.is_err(), "one message only");

    let slow_ms = u64::try_from((ACK_AFTER * 3).as_millis()).unwrap();
    let slow: Value =
        retry::request_retrying(&bus, subject.clone(), &json!({ "delay_ms": slow_ms }), RETRY).await.unwrap();
    assert_eq!(slow, json!({ "echo": slow_ms }));
    let first = tokio::time::timeout(Duration::from_secs(1), seen.next()).await.unwrap().unwrap();
    let second = tokio::time::timeout(Duration::from_secs(1), seen.next()).await.unwrap().unwrap();
    assert!(is_ack(&first) && !is_ack(&second), "a slow request: the ack, then the answer");
    shutdown.cancel();
    served.await.unwrap().unwrap();
}

/// A raw replica named `instance` on `sub`: answers `{"Ok": {"by": instance}}` with its name in
/// the instance header, `answers` times (then unsubscribes) or for ever (`None`).
fn answer_as(
    client: async_nats::Client,
    mut sub: async_nats::Subscriber,
    instance: &'static str,
    answers: Option<usize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut left = answers.unwrap_or(usize::MAX);
        while left > 0 {
            let Some(m) = sub.next().await else { break };
            let Some(reply) = m.reply else { continue };
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(retry::INSTANCE_HEADER, instance);
            let body = json!({ "Ok": { "by": instance } }).to_string();
            client.publish_with_headers(reply, headers, body.into()).await.unwrap();
            left -= 1;
        }
        sub.unsubscribe().await.unwrap();
        client.flush().await.unwrap();
    })
}

/// A hedged request whose first attempt lands on a stalled replica while most replicas it
/// remembers are gone (a replica killed and restarted keeps its old name in the requester's
/// memory for a minute): a direct attempt that finds nobody costs no attempt, and the request
/// reaches the live replica instead of failing at once with "did not answer in time" (issue 28:
/// the fault suite saw `error:` 0.25 s after one of two write replicas was killed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedge_skips_replicas_that_are_gone_and_reaches_a_live_one() {
    let client = nats().await;
    let bus = buzz_bus::Bus::new(client.clone());
    let subject = subject("gone");
    let group = "gone";
    let empty = json!({});
    let ask = || retry::request_retrying::<_, Value>(&bus, subject.clone(), &empty, RETRY);

    // The live replica answers one request through the queue group (so it is remembered) and
    // then serves only its direct subject; two more answer one each after it and are gone.
    let direct = client.subscribe(retry::direct_subject(&subject, "live")).await.unwrap();
    let _live = answer_as(client.clone(), direct, "live", None);
    for name in ["live", "gone-1", "gone-2"] {
        let sub = client.queue_subscribe(subject.clone(), group.to_owned()).await.unwrap();
        let member = answer_as(client.clone(), sub, name, Some(1));
        client.flush().await.unwrap();
        assert_eq!(ask().await.unwrap(), json!({ "by": name }));
        member.await.unwrap();
    }
    // The queue group's only member now takes requests and never answers.
    let _stalled = client.queue_subscribe(subject.clone(), group.to_owned()).await.unwrap();
    client.flush().await.unwrap();

    let t0 = std::time::Instant::now();
    let answer = ask().await;
    assert_eq!(
        answer.as_ref().ok(),
        Some(&json!({ "by": "live" })),
        "after {:?}: {answer:?} (the live replica was reachable)",
        t0.elapsed()
    );
}

/// A streamed request is acknowledged as soon as a replica takes it; one taken after its
/// requester's take-by time (plus the clock slack) was given up on and is dropped unanswered: a
/// paused replica that wakes does not run work (a snapshot capture's start) nobody waits for
/// (issue 28: `stop:snapshot`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_given_up_by_its_requester_is_dropped_and_a_live_one_acknowledged_at_once() {
    let client = nats().await;
    let subject = subject("takeby");
    let shutdown = CancellationToken::new();
    let (ran_tx, mut ran) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let served = tokio::spawn(serve::serve(
        client.clone(),
        subject.clone(),
        "takeby",
        4,
        shutdown.clone(),
        move |m: Incoming<Value>| {
            let ran_tx = ran_tx.clone();
            async move {
                ran_tx.send(m.body["n"].as_u64().unwrap()).unwrap();
                Some(Ok::<Value, buzz_bus::BusError>(json!({ "n": m.body["n"] })))
            }
        },
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let send = |n: u64, take_by: u128| {
        let client = client.clone();
        let subject = subject.clone();
        async move {
            let inbox = client.new_inbox();
            let mut replies = client.subscribe(inbox.clone()).await.unwrap();
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(retry::ACK_HEADER, "1");
            headers.insert(retry::TAKE_BY_HEADER, take_by.to_string().as_str());
            let body = json!({ "n": n }).to_string();
            client.publish_with_reply_and_headers(subject, inbox, headers, body.into()).await.unwrap();
            let mut got = Vec::new();
            while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), replies.next()).await {
                got.push(is_ack(&m));
            }
            got
        }
    };
    // Given up 6 s ago (past the 5 s slack): neither acknowledged nor run.
    let stale = now_ms - (retry::TAKE_BY_SLACK.as_millis() + 1000);
    assert_eq!(send(1, stale).await, Vec::<bool>::new());
    // Taken in time: the acknowledgement, then the answer; a take-by a little past (within the
    // slack, clocks disagree) still runs.
    assert_eq!(send(2, now_ms + 1000).await, [true, false]);
    assert_eq!(send(3, now_ms - 1000).await, [true, false]);
    assert_eq!(ran.recv().await, Some(2));
    assert_eq!(ran.recv().await, Some(3));
    assert!(ran.try_recv().is_err(), "the given-up request ran");
    shutdown.cancel();
    served.await.unwrap().unwrap();
}
