//! A noisy tenant's read flood and a quiet tenant's timed reads, shared by the noisy-neighbour
//! test (`tests/noisy_reads.rs`) and benchmark (`tests/noisy_bench.rs`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::client::{create_channel, message};
use crate::{Cluster, Community, WsClient};

/// One flooding query: a REQ (closed at its `EOSE` and sent again) or a COUNT.
#[derive(Debug, Clone)]
pub enum Shot {
    /// `["REQ", id, filter]`.
    Req(Value),
    /// `["COUNT", id, filter]`.
    Count(Value),
}

/// The flood's default mix over a large channel: heavy COUNTs, a negated search (it reads every
/// message) and full pages.
#[must_use]
pub fn heavy_mix() -> Vec<Shot> {
    vec![
        Shot::Count(json!({"search": "-zzqnothing"})),
        Shot::Count(json!({"kinds": [9]})),
        Shot::Req(json!({"kinds": [9], "limit": 500})),
        Shot::Req(json!({"search": "-zzqnothing", "limit": 500})),
    ]
}

/// What one flooding socket got.
#[derive(Debug, Default, Clone, Copy)]
pub struct Flooded {
    /// COUNTs and REQs answered in full.
    pub answered: u64,
    /// Closed instead (`rate-limited:`, budget, ...).
    pub refused: u64,
}

/// Keeps `in_flight` queries of `mix` in progress on `ws` until `stop`: each answer (COUNT, EOSE
/// or CLOSED) is followed at once by the next query.
pub async fn flood(mut ws: WsClient, mix: Vec<Shot>, in_flight: usize, stop: CancellationToken) -> Flooded {
    let mut n = 0usize;
    let mut got = Flooded::default();
    let shot = |n: usize| match &mix[n % mix.len()] {
        Shot::Req(f) => json!(["REQ", format!("f{n}"), f]),
        Shot::Count(f) => json!(["COUNT", format!("f{n}"), f]),
    };
    for _ in 0..in_flight {
        ws.send_json(&shot(n)).await;
        n += 1;
    }
    while !stop.is_cancelled() {
        let Some(v) = ws.recv_within(Duration::from_millis(100)).await else { continue };
        let done = match v[0].as_str() {
            Some("COUNT") => {
                got.answered += 1;
                true
            }
            Some("EOSE") => {
                got.answered += 1;
                ws.send_json(&json!(["CLOSE", v[1]])).await;
                true
            }
            // A search REQ ends with CLOSED after its EOSE, which already counted.
            Some("CLOSED") if v[2].as_str().is_some_and(|r| r.contains("search subscriptions end")) => false,
            Some("CLOSED") => {
                got.refused += 1;
                true
            }
            _ => false,
        };
        if done {
            ws.send_json(&shot(n)).await;
            n += 1;
        }
    }
    got
}

/// How often the quiet reader sends a REQ at most: as a person's client does, under the relay's
/// per-socket read limit (20 a second).
pub const QUIET_PACE: Duration = Duration::from_millis(60);

/// `n` REQs of `filter` one after another on `ws`, one every [`QUIET_PACE`] at most; the sorted
/// latencies (to `EOSE`) and how many were refused (`CLOSED`) or answered with other than
/// `expect` events.
pub async fn timed_reqs(
    ws: &mut WsClient,
    n: usize,
    filter: &Value,
    expect: usize,
) -> (Vec<Duration>, usize) {
    let mut latencies = Vec::with_capacity(n);
    let mut failed = 0;
    let mut pace = tokio::time::interval(QUIET_PACE);
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for i in 0..n {
        pace.tick().await;
        let sub = format!("quiet{i}");
        let started = Instant::now();
        let page = ws.req(&sub, std::slice::from_ref(filter)).await;
        latencies.push(started.elapsed());
        if page.closed.is_some() || page.events.len() != expect {
            if failed == 0 {
                eprintln!("quiet REQ {i} failed: {:?}, {} events", page.closed, page.events.len());
            }
            failed += 1;
        }
        ws.send_json(&json!(["CLOSE", sub])).await;
    }
    latencies.sort();
    (latencies, failed)
}

/// A member of `community` on gateway 1 and the filter of an open channel holding `messages`
/// messages of the owner.
pub async fn quiet_channel(cluster: &Cluster, community: &Community, messages: usize) -> (WsClient, Value) {
    let reader = cluster.member(community).await;
    let ws = WsClient::authed(cluster.gateways[1], &community.host, &reader).await;
    let channel = uuid::Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[1], &community.host, &community.owner).await;
    let (ok, why) = owner.publish(&create_channel(&community.owner, channel, "general", "open")).await;
    assert!(ok, "{why}");
    for i in 0..messages {
        let (ok, why) = owner.publish(&message(&community.owner, channel, &format!("hello {i}"))).await;
        assert!(ok, "{why}");
    }
    (ws, json!({"kinds": [9], "#h": [channel.to_string()]}))
}
