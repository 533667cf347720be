//! A snapshot action no replica takes (the only one is paused: it holds its queue subscription but
//! runs nothing) is answered `503 snapshot_unavailable` ("Retry with bounded backoff", NIP-AR)
//! within about the gateway's 1 s take wait, not after the action's 10 s limit (docs/design.md
//! "Stalls"; issue 28's `stop:snapshot`). The request carries its take-by time.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use buzz_tests::client::WsClient;
use buzz_tests::snapshot::{assert_snapshot_error, channel, snap, start};
use buzz_tests::{Cluster, ClusterOptions};
use futures::StreamExt;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_no_replica_takes_is_unavailable_after_the_take_wait() {
    let cluster = Cluster::start_with(ClusterOptions { snapshots: 0, ..ClusterOptions::default() }).await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    channel(&mut a, &alice, "open", &[]).await;

    // The snapshot queue group's only member: it takes requests and never answers.
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let nats = async_nats::connect(url).await.unwrap();
    let subject = buzz_bus::Subjects::new(&cluster.nats_prefix).unwrap().snapshot();
    let mut paused =
        nats.queue_subscribe(subject, buzz_bus::subjects::SNAPSHOT_GROUP.to_owned()).await.unwrap();
    nats.flush().await.unwrap();

    let t0 = Instant::now();
    let answer = snap(&cluster, 0, &team, &alice, start(json!({"artifact": "current"}))).await;
    let waited = t0.elapsed();
    assert_snapshot_error(&answer, 503, "snapshot_unavailable");
    assert!(waited < Duration::from_secs(3), "answered after {waited:?} (the take wait is 1 s)");

    let taken = tokio::time::timeout(Duration::from_secs(1), paused.next()).await.unwrap().unwrap();
    let take_by = taken.headers.as_ref().and_then(|h| h.get(buzz_bus::retry::TAKE_BY_HEADER));
    assert!(take_by.is_some_and(|v| v.as_str().parse::<u128>().is_ok()), "no take-by time: {take_by:?}");
    cluster.stop().await;
}
