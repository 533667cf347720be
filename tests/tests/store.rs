//! Storage edge cases end to end: tag values far beyond what a B-tree index entry can hold are
//! stored and found again (the tag index keys on a hash), and the probes and metrics answer.

#![allow(clippy::unwrap_used)]

use buzz_tests::client::{create_channel, WsClient};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use uuid::Uuid;

fn huge_limits(s: &mut buzz_gateway::Settings) {
    s.limits.max_message_length = 1 << 20;
    s.limits.max_tag_value_length = 300_000;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_value_of_200_kb_is_stored_indexed_and_found_by_exact_match() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateway_settings: Some(huge_limits),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    assert!(a.publish(&create_channel(&alice, channel, "general", "open")).await.0);
    // PostgreSQL's B-tree entries top out near 2.7 kB; a plain index on the value would fail.
    let value = "v".repeat(200_000);
    let ev = alice.sign_new(
        9,
        vec![vec!["h".into(), channel.to_string()], vec!["x".into(), value.clone()]],
        "big",
    );
    assert_eq!(a.publish(&ev).await, (true, String::new()));
    // The tag index row is keyed on the value's hash and finds the event exactly.
    let found: Vec<String> = sqlx::query_scalar(
        "SELECT event_id FROM event_tags WHERE community_id = $1 AND name = 'x' AND value_hash = $2",
    )
    .bind(team.id)
    .bind(buzz_store::tag_value_hash(&value))
    .fetch_all(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(found, vec![ev.id.clone()]);
    // And the event is served whole.
    let got = a.req("id", &[json!({"ids": [ev.id]})]).await;
    assert_eq!(got.events.len(), 1);
    assert!(got.events[0] == ev, "stored event differs");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_gateway_serves_health_readiness_and_prometheus_metrics() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    assert!(a.publish(&create_channel(&alice, Uuid::new_v4(), "general", "open")).await.0);
    let http = reqwest::Client::new();
    for (g, admin) in cluster.gateways.iter().zip(&cluster.gateway_admins) {
        assert_eq!(http.get(format!("http://{g}/healthz")).send().await.unwrap().status(), 200);
        assert_eq!(http.get(format!("http://{g}/readyz")).send().await.unwrap().status(), 200);
        // Metrics are on the admin port only, never on the public (tenant) one.
        assert_eq!(http.get(format!("http://{g}/metrics")).send().await.unwrap().status(), 404);
        let metrics = http.get(format!("http://{admin}/metrics")).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("buzz_gateway_events_total"), "{metrics}");
    }
    let policy = http.get(format!("http://{}/readyz", cluster.policy)).send().await.unwrap();
    assert_eq!(policy.status(), 200);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_req_answer_larger_than_one_flush_arrives_whole_and_in_order() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    assert!(a.publish(&create_channel(&alice, channel, "general", "open")).await.0);
    let mut sent = Vec::new();
    // Three connections: each stays under the per-connection write burst.
    let mut writers = [
        WsClient::authed(cluster.gateways[0], &team.host, &alice).await,
        WsClient::authed(cluster.gateways[1], &team.host, &alice).await,
        WsClient::authed(cluster.gateways[0], &team.host, &alice).await,
    ];
    for i in 0..150 {
        let ev = alice.sign(buzz_core::UnsignedEvent {
            pubkey: alice.public_hex(),
            created_at: 1_700_000_000 + i,
            kind: 9,
            tags: vec![vec!["h".into(), channel.to_string()]],
            content: format!("m{i}"),
        });
        let w = &mut writers[usize::try_from(i % 3).unwrap()];
        assert!(w.publish(&ev).await.0);
        sent.push(ev.id);
    }
    // 150 stored events (plus EOSE) are more than the gateway writes per flush (64).
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    let got = b.req("all", &[json!({"kinds": [9], "#h": [channel.to_string()], "limit": 500})]).await;
    let ids: Vec<String> = got.events.iter().map(|e| e.id.to_string()).collect();
    sent.reverse(); // newest first
    assert_eq!(ids, sent);
    cluster.stop().await;
}
