//! One busy socket, key or community cannot take the relay's read capacity from another tenant
//! (issue 37, item 2): queries are bounded per socket and per key at the gateway, shared fairly
//! between communities at the query-service, and a query nobody waits for any more is stopped,
//! in PostgreSQL too.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_tests::client::WsClient;
use buzz_tests::cluster::eventually;
use buzz_tests::noisy;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::{json, Value};
use uuid::Uuid;

/// Backends of the cluster's database (other than the caller's) waiting on a lock, i.e. queries
/// stuck behind the test's `LOCK TABLE events`.
async fn waiting_on_the_lock(cluster: &Cluster) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
         AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND state = 'active' ORDER BY pid",
    )
    .fetch_all(&cluster.pool)
    .await
    .unwrap()
}

async fn waiting_is(cluster: &Cluster, n: usize) {
    eventually(Duration::from_secs(5), || async { waiting_on_the_lock(cluster).await.len() == n }).await;
}

/// A REQ, COUNT or `POST /query` whose asker is gone is cancelled in PostgreSQL: its statement
/// (here stuck behind a table lock, with a 60 s budget) ends at once instead of at its budget,
/// and the connection serves the next query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_whose_asker_is_gone_is_cancelled_in_postgresql() {
    let cluster = Cluster::start_with(ClusterOptions {
        queriers: 1,
        statement_timeout_ms: 60_000,
        ..Default::default()
    })
    .await;
    let team = cluster.community("cancel.test").await;
    let member = cluster.member(&team).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &member).await;

    let mut lock = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE events IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.unwrap();

    // CLOSE of the subscription.
    ws.send_json(&json!(["REQ", "a", {"kinds": [9]}])).await;
    waiting_is(&cluster, 1).await;
    ws.send_json(&json!(["CLOSE", "a"])).await;
    waiting_is(&cluster, 0).await;

    // A REQ that reuses the id replaces the earlier one: only the new query is left.
    ws.send_json(&json!(["REQ", "b", {"kinds": [9]}])).await;
    waiting_is(&cluster, 1).await;
    let first = waiting_on_the_lock(&cluster).await;
    ws.send_json(&json!(["REQ", "b", {"kinds": [9], "limit": 5}])).await;
    eventually(Duration::from_secs(5), || async {
        let now = waiting_on_the_lock(&cluster).await;
        now.len() == 1 && now != first
    })
    .await;
    ws.send_json(&json!(["CLOSE", "b"])).await;
    waiting_is(&cluster, 0).await;

    // The socket closes with a COUNT and a REQ in progress.
    let mut other = WsClient::authed(cluster.gateways[1], &team.host, &member).await;
    other.send_json(&json!(["COUNT", "c", {"kinds": [9]}])).await;
    other.send_json(&json!(["REQ", "d", {"kinds": [9]}])).await;
    waiting_is(&cluster, 2).await;
    drop(other);
    waiting_is(&cluster, 0).await;

    // An HTTP client that gives up on `POST /query` (closes its connection before the answer).
    let body = json!([{"artifact": "current"}]).to_string();
    let signed_url = format!("https://{}/query", team.host);
    let header = buzz_core::nip98::authorization_header(&member, "POST", &signed_url, body.as_bytes());
    let mut tcp = tokio::net::TcpStream::connect(cluster.gateways[0]).await.unwrap();
    let request = format!(
        "POST /query HTTP/1.1\r\nhost: {}\r\nauthorization: {header}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        team.host,
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut tcp, request.as_bytes()).await.unwrap();
    waiting_is(&cluster, 1).await;
    drop(tcp);
    waiting_is(&cluster, 0).await;

    // The cancelled queries left the pool healthy: the next query answers.
    lock.rollback().await.unwrap();
    let page = ws.req("e", &[json!({"kinds": [9]})]).await;
    assert_eq!(page.closed, None);
    cluster.stop().await;
}

/// Sends `n` COUNTs of `filter` under ids `prefix0..` without waiting for answers.
async fn flood(ws: &mut WsClient, prefix: &str, n: usize, filter: &Value) {
    for i in 0..n {
        ws.send_json(&json!(["COUNT", format!("{prefix}{i}"), filter])).await;
    }
}

/// A socket's COUNTs in progress are bounded (a COUNT holds no subscription slot): one past the
/// bound is closed `rate-limited:` at once, and the socket keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_past_the_sockets_bound_is_closed_rate_limited() {
    let cluster =
        Cluster::start_with(ClusterOptions { statement_timeout_ms: 60_000, ..Default::default() }).await;
    let team = cluster.community("counts.test").await;
    let member = cluster.member(&team).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &member).await;
    let max = buzz_core::Limits::default().max_subscriptions;

    let mut lock = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE events IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.unwrap();
    flood(&mut ws, "n", max + 1, &json!({"kinds": [9]})).await;
    let over = format!("n{max}");
    let closed = ws
        .wait_for(|v| v[0] == "CLOSED" && v[1] == over.as_str())
        .await
        .expect("the COUNT past the bound is closed at once");
    let reason = closed[2].as_str().unwrap();
    assert!(reason.starts_with("rate-limited: too many COUNTs in progress"), "{reason}");
    assert!(reason.contains(&format!("max {max}")), "{reason}");
    lock.rollback().await.unwrap();
    for i in 0..max {
        let id = format!("n{i}");
        let v = ws.wait_for(|v| v[1] == id.as_str()).await.unwrap();
        assert_eq!(v[0], "COUNT", "{v}");
    }
    assert_eq!(ws.count("after", &[json!({"kinds": [9]})]).await, Ok(0));
    cluster.stop().await;
}

/// While members of one community keep every query they may in flight from many sockets (heavy
/// COUNTs, searches and full pages over 30 000 messages), another community's REQs on the same
/// query replica keep answering, none refused and none slow. Before the bounds, 256 such COUNTs
/// made every other tenant's REQ fail "the query did not complete in time".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_community_reads_while_one_community_floods_counts() {
    // One query replica (8 connections: 6 running queries, 2 per community by default) takes
    // every query, as one replica of a deployment under attack would.
    let cluster = Cluster::start_with(ClusterOptions { queriers: 1, ..Default::default() }).await;
    let noisy = cluster.community("noisy.test").await;
    let quiet = cluster.community("quiet.test").await;
    buzz_tests::seed::open_channel_messages(
        &cluster,
        noisy.id,
        &noisy.owner.public_hex(),
        Uuid::new_v4(),
        30_000,
    )
    .await;
    let (mut reader, filter) = noisy::quiet_channel(&cluster, &quiet, 5).await;

    // 3 keys, 4 sockets each over both gateways, each keeping 32 queries in flight.
    let stop = tokio_util::sync::CancellationToken::new();
    let mut attackers = Vec::new();
    for k in 0..3 {
        let keys = if k == 0 { noisy.owner.clone() } else { cluster.member(&noisy).await };
        for s in 0..4 {
            let ws = WsClient::authed(cluster.gateways[s % 2], &noisy.host, &keys).await;
            attackers.push(tokio::spawn(noisy::flood(ws, noisy::heavy_mix(), 32, stop.clone())));
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (latencies, failed) = noisy::timed_reqs(&mut reader, 40, &filter, 5).await;
    stop.cancel();
    let mut answered = 0;
    for a in attackers {
        answered += a.await.unwrap().answered;
    }
    let worst = latencies[latencies.len() - 1];
    println!(
        "quiet REQs during the flood: median {:?}, worst {worst:?}; noisy answers {answered}",
        latencies[20]
    );
    assert_eq!(failed, 0, "a quiet REQ was refused or short during the flood");
    assert!(answered > 0, "the flood was answered (its queries ran)");
    assert!(worst < Duration::from_millis(1500), "a quiet REQ took {worst:?}");
    cluster.stop().await;
}

/// Reads have a bucket per socket (`BUZZ_RATE_READ_PER_SEC`, `BUZZ_RATE_READ_BURST`): a REQ or
/// COUNT past it is `CLOSED rate-limited:` at once, and the socket is then not read until the
/// bucket's next token (a client that answers each refusal at once is slowed, not spinning);
/// another socket of the same key starts full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_past_the_sockets_bucket_are_closed_rate_limited_and_the_socket_waits_for_a_token() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateway_settings: Some(|s| {
            s.rate_read_burst = 3;
            s.rate_read_per_sec = 2.0;
        }),
        ..Default::default()
    })
    .await;
    let team = cluster.community("read-limit.test").await;
    let member = cluster.member(&team).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &member).await;
    for i in 0..3 {
        let sub = format!("r{i}");
        if i % 2 == 0 {
            assert_eq!(ws.req(&sub, &[json!({"kinds": [9]})]).await.closed, None);
        } else {
            assert_eq!(ws.count(&sub, &[json!({"kinds": [9]})]).await, Ok(0));
        }
    }
    let refused = ws.count("over", &[json!({"kinds": [9]})]).await.unwrap_err();
    assert!(refused.starts_with("rate-limited: too many REQ and COUNT"), "{refused}");
    let refused_at = std::time::Instant::now();
    // The next REQ, sent at once, is read only once the bucket holds a token again (1/2 s).
    assert_eq!(ws.req("next", &[json!({"kinds": [9]})]).await.closed, None);
    let waited = refused_at.elapsed();
    assert!(waited >= Duration::from_millis(350), "answered after {waited:?}");
    // Another socket of the same key starts with a full bucket.
    let mut other = WsClient::authed(cluster.gateways[1], &team.host, &member).await;
    for i in 0..3 {
        assert_eq!(other.req(&format!("o{i}"), &[json!({"kinds": [9]})]).await.closed, None);
    }
    cluster.stop().await;
}
