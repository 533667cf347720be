//! The foundation slice end to end: two gateways, two write and two query replicas, real
//! PostgreSQL, Redis and NATS.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::Cluster;
use serde_json::json;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_through_gateway_a_reaches_a_live_subscriber_on_gateway_b_and_later_reqs_on_both() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let channel = Uuid::new_v4();

    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    assert_eq!(a.publish(&create_channel(&alice, channel, "general", "open")).await, (true, String::new()));

    let sub = b.req("live", &[json!({"kinds": [9], "#h": [channel.to_string()]})]).await;
    assert!(sub.closed.is_none() && sub.events.is_empty());

    let msg = message(&alice, channel, "hello from gateway A");
    assert_eq!(a.publish(&msg).await, (true, String::new()));
    let live = b.next_event("live", Duration::from_secs(5)).await.expect("live delivery on gateway B");
    assert_eq!(live, msg);

    for client in [&mut a, &mut b] {
        let got = client.req("later", &[json!({"kinds": [9], "#h": [channel.to_string()]})]).await;
        assert_eq!(got.events, vec![msg.clone()]);
        assert_eq!(client.count("n", &[json!({"kinds": [9]})]).await, Ok(1));
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_req_count_and_event_get_auth_required() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut c = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    let (ok, msg) = c.publish(&message(&alice, Uuid::new_v4(), "hi")).await;
    assert!(!ok);
    assert!(msg.starts_with("auth-required:"), "{msg}");
    let r = c.req("s", &[json!({"kinds": [9]})]).await;
    assert!(r.closed.as_deref().unwrap().starts_with("auth-required:"));
    assert!(c.count("c", &[json!({})]).await.unwrap_err().starts_with("auth-required:"));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_community_members_authenticate_and_the_relay_tag_must_name_this_host() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let stranger = Keys::generate();
    let mut c = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    let (ok, msg) = c.auth(&stranger).await;
    assert!(!ok);
    assert_eq!(msg, "restricted: not a member of this community");

    let alice = cluster.member(&team).await;
    let mut c = WsClient::connect(cluster.gateways[1], &team.host).await.unwrap();
    c.host = "other.test".into(); // sign for the wrong relay
    let (ok, msg) = c.auth(&alice).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    c.host = team.host.clone();
    assert!(c.auth(&alice).await.0);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_of_community_a_sees_nothing_of_community_b_even_with_the_same_channel_uuid() {
    let cluster = Cluster::start().await;
    let a = cluster.community("a.test").await;
    let b = cluster.community("b.test").await;
    let alice = cluster.member(&a).await;
    let bob = cluster.member(&b).await;
    let channel = Uuid::new_v4();

    let mut ca = WsClient::authed(cluster.gateways[0], &a.host, &alice).await;
    let mut cb = WsClient::authed(cluster.gateways[1], &b.host, &bob).await;
    // The same channel UUID exists in both communities.
    assert!(ca.publish(&create_channel(&alice, channel, "x", "open")).await.0);
    assert!(cb.publish(&create_channel(&bob, channel, "x", "open")).await.0);
    let filter = json!({"#h": [channel.to_string()]});
    assert!(ca.req("live", std::slice::from_ref(&filter)).await.closed.is_none());

    let secret = message(&bob, channel, "only for community b");
    assert!(cb.publish(&secret).await.0);
    // Alice's live subscription, REQ and COUNT see only community A.
    assert!(ca.next_event("live", Duration::from_millis(500)).await.is_none());
    let got = ca
        .req("r", &[filter.clone(), json!({"ids": [secret.id]}), json!({"authors": [bob.public_hex()]})])
        .await;
    assert!(got.events.iter().all(|e| e.pubkey == alice.public_hex()), "{:?}", got.events);
    assert_eq!(ca.count("c", &[json!({"ids": [secret.id]})]).await, Ok(0));
    // Bob cannot even authenticate to A, and A's member cannot use B's host.
    let mut cross = WsClient::connect(cluster.gateways[0], &a.host).await.unwrap();
    assert!(!cross.auth(&bob).await.0);
    // A member of B cannot post into A's channel by crafting the same h.
    let mut cb2 = WsClient::authed(cluster.gateways[0], &b.host, &bob).await;
    assert!(cb2.publish(&message(&bob, channel, "still in b")).await.0);
    let mut ca2 = WsClient::authed(cluster.gateways[1], &a.host, &alice).await;
    assert_eq!(ca2.count("c", &[json!({"kinds": [9]})]).await, Ok(0));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_event_sent_twice_is_stored_once() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    assert!(a.publish(&create_channel(&alice, channel, "general", "open")).await.0);
    let msg = message(&alice, channel, "once");
    assert_eq!(a.publish(&msg).await, (true, String::new()));
    // Through the other gateway (and so possibly another write replica): OK true, duplicate.
    let (ok, text) = b.publish(&msg).await;
    assert!(ok);
    assert!(text.starts_with("duplicate:"), "{text}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE id = $1")
        .bind(&msg.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(stored, 1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_across_replicas_store_one_row_and_all_get_ok_true() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    assert!(a.publish(&create_channel(&alice, channel, "general", "open")).await.0);
    let msg = message(&alice, channel, "raced");
    let mut tasks = Vec::new();
    for g in 0..4 {
        let (addr, host, keys, msg) =
            (cluster.gateways[g % 2], team.host.clone(), alice.clone(), msg.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = WsClient::authed(addr, &host, &keys).await;
            c.publish(&msg).await
        }));
    }
    for t in tasks {
        assert!(t.await.unwrap().0);
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE id = $1")
        .bind(&msg.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(stored, 1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_host_gets_404_and_no_upgrade() {
    let cluster = Cluster::start().await;
    cluster.community("team.test").await;
    let res = reqwest::Client::new()
        .get(format!("http://{}/", cluster.gateways[0]))
        .header("host", "nobody.test")
        .header("accept", "application/nostr+json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"], "no community is configured for this host");
    assert!(WsClient::connect(cluster.gateways[0], "nobody.test").await.is_err());
    // The host is normalised: case, trailing dot and default port do not matter.
    assert!(WsClient::connect(cluster.gateways[0], "TEAM.test.:80").await.is_ok());
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nip11_advertises_the_relay_key_and_every_enforced_limit() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let res = reqwest::Client::new()
        .get(format!("http://{}/", cluster.gateways[1]))
        .header("host", &team.host)
        .header("accept", "application/nostr+json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/nostr+json");
    let doc: serde_json::Value = res.json().await.unwrap();
    assert_eq!(doc["pubkey"], cluster.relay.public_hex());
    // Exactly the NIPs the relay serves: 9 with kind-5 deletion (tests/tests/channels.rs), 45
    // with COUNT, 50 with `search` (tests/tests/search.rs); nothing it does not serve (no NIP-40
    // expiration tags).
    assert_eq!(doc["supported_nips"], json!([1, 9, 11, 29, 42, 45, 50, 86, 98]));
    let lim = &doc["limitation"];
    for field in [
        "max_message_length",
        "max_subscriptions",
        "max_filters",
        "max_limit",
        "max_event_tags",
        "max_content_length",
        "max_subid_length",
        "max_tag_value_length",
    ] {
        assert!(lim[field].as_u64().is_some(), "{field} missing");
    }
    assert_eq!(lim["auth_required"], true);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_channel_is_invisible_to_non_members_live_and_stored() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    assert!(a.publish(&create_channel(&alice, channel, "secret", "private")).await.0);
    assert!(b.req("live", &[json!({"kinds": [9]})]).await.closed.is_none());
    assert!(a.req("mine", &[json!({"kinds": [9]})]).await.closed.is_none());
    let msg = message(&alice, channel, "members only");
    assert!(a.publish(&msg).await.0);
    assert_eq!(a.next_event("mine", Duration::from_secs(5)).await.as_ref(), Some(&msg));
    assert!(b.next_event("live", Duration::from_millis(500)).await.is_none());
    assert!(b.req("r", &[json!({"ids": [msg.id]})]).await.events.is_empty());
    // Posting there is refused without revealing that the channel exists.
    let (ok, reason) = b.publish(&message(&bob, channel, "let me in")).await;
    assert!(!ok);
    let (_, missing) = b.publish(&message(&bob, Uuid::new_v4(), "nowhere")).await;
    assert_eq!(reason, missing);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_open_sockets_cleanly_with_going_away() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    cluster.gateway_shutdown.cancel();
    assert_eq!(c.closed(Duration::from_secs(5)).await, Some(1001));
    cluster.stop().await;
}
