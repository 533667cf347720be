//! Stalls (issue 14): a paused Redis and a paused service replica, each its own OS process
//! stopped with SIGSTOP while the rest of the cluster runs (docs/design.md, "Stalls").

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use buzz_bus::Subjects;
use buzz_core::{Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::percentile;
use buzz_tests::processes::{spawn_replica, wait_for_replicas, PrivateRedis, Process, Service};
use buzz_tests::{Cluster, ClusterOptions, Community};
use serde_json::json;
use uuid::Uuid;

/// Entry point of the replica processes (see `buzz_tests::processes`).
#[test]
#[ignore = "runs one service replica in a child process of the stall tests"]
fn replica_process() {
    buzz_tests::processes::child_main();
}

async fn channel(cluster: &Cluster, team: &Community, visibility: &str, members: &[&Keys]) -> Uuid {
    let id = Uuid::new_v4();
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let (ok, msg) = c.publish(&create_channel(&team.owner, id, "stalls", visibility)).await;
    assert!(ok, "{msg}");
    for m in members {
        let put = team.owner.sign_new(
            9000,
            vec![vec!["h".into(), id.to_string()], vec!["p".into(), m.public_hex()]],
            "",
        );
        let (ok, msg) = c.publish(&put).await;
        assert!(ok, "{msg}");
    }
    id
}

/// With one of two write replicas paused, writes still get `OK true` well within the 5 s bus
/// timeout: a write no replica took within `BUZZ_BUS_RETRY_AFTER_MS` (250 ms) is sent again, to the
/// replica that answered last, and the event id makes the second attempt safe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stalled_write_replica_does_not_cost_writes_the_bus_timeout() {
    let cluster = Cluster::start_with(ClusterOptions { writers: 0, ..ClusterOptions::default() }).await;
    let writers = [spawn_replica(&cluster, Service::Write), spawn_replica(&cluster, Service::Write)];
    let subjects = Subjects::new(&cluster.nats_prefix).unwrap();
    wait_for_replicas(&subjects.write(), 2).await;
    let team = cluster.community("stalled-writer.test").await;
    let id = channel(&cluster, &team, "open", &[]).await;
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;

    writers[0].stop();
    let mut latencies = Vec::new();
    for batch in 0..10 {
        let events: Vec<Event> = (0..10).map(|i| message(&team.owner, id, &format!("{batch}.{i}"))).collect();
        let started = Instant::now();
        for e in &events {
            c.send_json(&json!(["EVENT", e])).await;
        }
        let mut pending: HashSet<String> = events.iter().map(|e| e.id.to_string()).collect();
        while !pending.is_empty() {
            let v = c
                .wait_for(|v| v[0] == "OK" && v[1].as_str().is_some_and(|id| pending.contains(id)))
                .await
                .expect("an OK for every write");
            latencies.push(started.elapsed());
            assert_eq!(v[2], true, "{v}");
            pending.remove(v[1].as_str().unwrap());
        }
    }
    writers[0].resume();
    latencies.sort();
    let (p50, p99, max) =
        (percentile(&latencies, 50), percentile(&latencies, 99), latencies[latencies.len() - 1]);
    eprintln!(
        "write OK latency with 1 of 2 write replicas stopped (n=100): p50 {p50:?} p99 {p99:?} max {max:?}"
    );
    assert!(max < Duration::from_millis(2000), "p50 {p50:?} p99 {p99:?} max {max:?}");
    // Retried writes are stored once.
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE kind = 9 AND community_id = $1")
        .bind(team.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(stored, 100);
    drop(writers);
    cluster.stop().await;
}

/// Issue 14: with one query replica paused, subscribers of a private channel silently missed
/// live events (the per-delivery access check waited on it, timed out and dropped the event).
/// Now the check is retried on the other replica and every subscriber gets the event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stalled_query_replica_does_not_lose_live_events_of_a_private_channel() {
    let cluster = Cluster::start_with(ClusterOptions { queriers: 0, ..ClusterOptions::default() }).await;
    let queriers = [spawn_replica(&cluster, Service::Query), spawn_replica(&cluster, Service::Query)];
    let subjects = Subjects::new(&cluster.nats_prefix).unwrap();
    wait_for_replicas(&subjects.access(), 2).await;
    wait_for_replicas(&subjects.query(), 2).await;
    let team = cluster.community("stalled-querier.test").await;
    let mut members = Vec::new();
    for _ in 0..8 {
        members.push(cluster.member(&team).await);
    }
    let id = channel(&cluster, &team, "private", &members.iter().collect::<Vec<_>>()).await;
    let mut subscribers = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let mut s = WsClient::authed(cluster.gateways[i % 2], &team.host, m).await;
        let r = s.req("live", &[json!({"kinds": [9], "#h": [id]})]).await;
        assert_eq!(r.closed, None);
        subscribers.push(s);
    }

    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    queriers[0].stop();
    let post = message(&team.owner, id, "to every member");
    let started = Instant::now();
    let (ok, msg) = owner.publish(&post).await;
    assert!(ok, "{msg}");
    // Well under the 5 s bus timeout, after which the old code had dropped the event.
    let deadline = started + Duration::from_secs(4);
    let mut missed = 0;
    for s in &mut subscribers {
        let left = deadline.saturating_duration_since(Instant::now());
        match s.next_event("live", left).await {
            Some(e) => assert_eq!(e.id, post.id),
            None => missed += 1,
        }
    }
    eprintln!(
        "8 private-channel subscribers served in {:?} with 1 of 2 query replicas stopped",
        started.elapsed()
    );
    queriers[0].resume();
    assert_eq!(missed, 0, "{missed} of 8 subscribers did not receive the live event");
    drop(queriers);
    cluster.stop().await;
}

/// Publishes `events` while `querier` is stopped and expects `CLOSED live` with the replay point
/// of the last one, then re-subscribes to `subscribed` from there once the querier is back.
async fn expect_interrupted(
    querier: &Process,
    owner: &mut WsClient,
    s: &mut WsClient,
    events: &[Event],
    subscribed: &[Uuid],
) {
    querier.stop();
    for e in events {
        let (ok, msg) = owner.publish(e).await;
        assert!(ok, "{msg}");
    }
    let post = events.last().unwrap();
    let closed = s.wait_for(|v| v[0] == "CLOSED" && v[1] == "live").await;
    querier.resume();
    let expected = format!("error: live delivery interrupted, replay from {}", post.created_at);
    assert_eq!(closed.expect("CLOSED for the live subscription")[2], expected.as_str());
    let replay = json!({"kinds": [9], "#h": subscribed, "since": post.created_at});
    let replayed = s.req("live", &[replay]).await;
    assert!(replayed.events.iter().any(|e| e.id == post.id), "the replay lacks the event");
}

/// When no replica answers a live access check at all (the channel check, or the membership
/// re-check after an access change), the event is not delivered (fail closed) but not silently
/// lost either: each subscription it matched is closed with the point to replay from, and
/// subscriptions it did not match stay open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecidable_live_access_check_closes_the_subscription_with_a_replay_point() {
    let cluster = Cluster::start_with(ClusterOptions {
        queriers: 0,
        gateway_settings: Some(|s| s.bus_timeout = Duration::from_secs(2)),
        ..ClusterOptions::default()
    })
    .await;
    let querier = spawn_replica(&cluster, Service::Query);
    let subjects = Subjects::new(&cluster.nats_prefix).unwrap();
    wait_for_replicas(&subjects.access(), 1).await;
    wait_for_replicas(&subjects.query(), 1).await;
    let team = cluster.community("undecidable.test").await;
    let bob = cluster.member(&team).await;
    let a = channel(&cluster, &team, "private", &[&bob]).await;
    let b = channel(&cluster, &team, "private", &[&bob]).await;
    let mut s = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    assert_eq!(s.req("live", &[json!({"kinds": [9], "#h": [a, b]})]).await.closed, None);
    assert_eq!(s.req("other", &[json!({"kinds": [9007]})]).await.closed, None);
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    // Bob's socket checks its membership and channel a while the querier answers.
    let first = message(&team.owner, a, "checked");
    assert!(owner.publish(&first).await.0);
    assert_eq!(s.next_event("live", Duration::from_secs(5)).await.map(|e| e.id), Some(first.id));

    // The channel check for b gets no answer.
    let post = message(&team.owner, b, "nobody checks b");
    expect_interrupted(&querier, &mut owner, &mut s, &[post], &[a, b]).await;
    // An access change (carol joins a) while stopped: the membership re-check gets no answer.
    let carol = cluster.member(&team).await;
    let tags = vec![vec!["h".into(), a.to_string()], vec!["p".into(), carol.public_hex()]];
    let put = team.owner.sign_new(9000, tags, "");
    let post = message(&team.owner, a, "nobody re-checks bob");
    expect_interrupted(&querier, &mut owner, &mut s, &[put, post], &[a, b]).await;

    // The unrelated subscription was left open all along.
    let create = create_channel(&team.owner, Uuid::new_v4(), "later", "open");
    assert!(owner.publish(&create).await.0);
    assert_eq!(s.next_event("other", Duration::from_secs(5)).await.map(|e| e.id), Some(create.id));
    drop(querier);
    cluster.stop().await;
}

/// A cluster whose gateways use `redis` with a 200 ms Redis deadline.
async fn with_private_redis(redis: &PrivateRedis) -> Cluster {
    let url: &'static str = Box::leak(redis.url.clone().into_boxed_str());
    Cluster::start_with(ClusterOptions {
        gateway_redis_url: Some(url),
        gateway_settings: Some(|s| s.redis_timeout = Duration::from_millis(200)),
        ..ClusterOptions::default()
    })
    .await
}

/// Issue 14: a 12 s Redis pause held every write for 12 s. The per-pubkey rate limit now waits
/// at most the Redis deadline and then fails open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_delays_a_write_by_at_most_the_redis_deadline() {
    let redis = PrivateRedis::start().await;
    let cluster = with_private_redis(&redis).await;
    let team = cluster.community("stalled-redis-write.test").await;
    let id = channel(&cluster, &team, "open", &[]).await;
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;

    redis.process.stop();
    let started = Instant::now();
    let (ok, msg) = c.publish(&message(&team.owner, id, "while redis is paused")).await;
    let took = started.elapsed();
    redis.process.resume();
    assert!(ok, "{msg}");
    assert!(took < Duration::from_millis(1500), "write took {took:?}");
    cluster.stop().await;
}

/// Issue 14: NIP-98 calls waited for a paused Redis with no limit. The replay guard now waits at
/// most the Redis deadline and then fails closed: an unrecorded signature could be replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_fails_nip98_closed_with_a_503() {
    let redis = PrivateRedis::start().await;
    let cluster = with_private_redis(&redis).await;
    let team = cluster.community("stalled-redis-nip98.test").await;
    let body = json!({ "pubkey": Keys::generate().public_hex(), "role": "member" });

    redis.process.stop();
    let started = Instant::now();
    let call =
        cluster.tenant_request(0, &team, reqwest::Method::POST, "/api/members", Some(&body), &team.owner);
    let res = tokio::time::timeout(Duration::from_secs(3), call).await;
    let took = started.elapsed();
    redis.process.resume();
    let res = res.expect("the NIP-98 call answered while redis was paused");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(res.status(), 503);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v, json!({"error": "authorization unavailable", "code": "authorization_unavailable"}));
    // Nothing was applied, and once Redis answers again the same change goes through.
    let res = cluster
        .tenant_request(0, &team, reqwest::Method::POST, "/api/members", Some(&body), &team.owner)
        .await;
    assert_eq!(res.status(), 201);
    cluster.stop().await;
}
