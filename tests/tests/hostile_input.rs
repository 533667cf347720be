//! Hostile input that used to look like an outage: NUL characters (PostgreSQL text cannot hold
//! U+0000) and timestamps far in the future. Each is a specific `invalid:` answer (WebSocket) or a
//! 400 with the contract's JSON (HTTP), nothing is stored, and the relay keeps serving.

#![allow(clippy::unwrap_used)]

use buzz_core::event::UnsignedEvent;
use buzz_core::{Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::tag;
use buzz_tests::{Cluster, ClusterOptions, Community};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

/// A signed event of `keys` with an explicit `created_at`.
fn at(keys: &Keys, created_at: i64, kind: u32, tags: Vec<Vec<String>>, content: &str) -> Event {
    keys.sign(UnsignedEvent {
        pubkey: keys.public_hex(),
        created_at,
        kind,
        tags,
        content: content.to_owned(),
    })
}

/// Events of client input stored in the community (the relay's own 39000/39002 excluded).
async fn stored_client_events(cluster: &Cluster) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM events WHERE pubkey <> $1")
        .bind(cluster.relay.public_hex())
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
}

async fn refused(c: &mut WsClient, ev: &Event, want: &str) {
    let (accepted, msg) = c.publish(ev).await;
    assert!(!accepted, "accepted: {ev:?}");
    assert!(msg.starts_with("invalid:") && msg.contains(want), "{msg:?} is not invalid: ...{want}...");
}

struct Setup {
    cluster: Cluster,
    team: Community,
    alice: Keys,
    channel: Uuid,
    ws: WsClient,
}

async fn setup(opts: ClusterOptions) -> Setup {
    let cluster = Cluster::start_with(opts).await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let channel = Uuid::new_v4();
    assert!(ws.publish(&create_channel(&alice, channel, "general", "open")).await.0);
    Setup { cluster, team, alice, channel, ws }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_anywhere_in_an_event_is_invalid_not_an_outage() {
    let Setup { cluster, alice, channel, mut ws, .. } = setup(ClusterOptions::default()).await;
    let h = tag("h", channel.to_string());
    let cases = [
        ("tag name", alice.sign_new(9, vec![h.clone(), tag("t\u{0}x", "v")], "hi")),
        ("one-letter tag name", alice.sign_new(9, vec![h.clone(), tag("\u{0}", "v")], "hi")),
        ("tag value", alice.sign_new(9, vec![h.clone(), tag("t", "a\u{0}b")], "hi")),
        (
            "later tag element",
            alice.sign_new(9, vec![h.clone(), vec!["t".into(), "a".into(), "\u{0}".into()]], "hi"),
        ),
        ("content", alice.sign_new(9, vec![h.clone()], "before\u{0}after")),
        (
            "channel name",
            alice.sign_new(
                9007,
                vec![
                    tag("h", Uuid::new_v4().to_string()),
                    tag("name", "gen\u{0}eral"),
                    tag("visibility", "open"),
                    tag("channel_type", "stream"),
                ],
                "",
            ),
        ),
        ("channel rename", alice.sign_new(9002, vec![h.clone(), tag("name", "x\u{0}")], "")),
    ];
    for (name, ev) in &cases {
        let (accepted, msg) = ws.publish(ev).await;
        assert!(!accepted, "{name}: accepted");
        assert!(msg.starts_with("invalid:") && msg.contains("NUL"), "{name}: {msg:?}");
    }
    assert_eq!(stored_client_events(&cluster).await, 1, "only the channel creation is stored");
    // The socket and the relay keep working.
    assert!(ws.publish(&message(&alice, channel, "still here")).await.0);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_in_a_filter_is_invalid_over_websocket_and_http() {
    let Setup { cluster, team, alice, mut ws, .. } = setup(ClusterOptions::default()).await;
    let filters = [
        json!({"#\u{0}": ["x"]}),
        json!({"#t": ["a\u{0}"]}),
        json!({"artifact": "current", "#ty\u{0}pe": ["x"]}),
        json!({"artifact": "current", "#type": ["x\u{0}"]}),
    ];
    for f in &filters {
        let r = ws.req("nul", std::slice::from_ref(f)).await;
        let reason = r.closed.unwrap_or_else(|| panic!("REQ {f} was answered with EOSE"));
        assert!(reason.starts_with("invalid:") && reason.contains("NUL"), "REQ {f}: {reason:?}");
        let counted = ws.count("nul", std::slice::from_ref(f)).await;
        let reason = counted.expect_err("COUNT answered");
        assert!(reason.starts_with("invalid:") && reason.contains("NUL"), "COUNT {f}: {reason:?}");
    }
    for f in &filters[2..] {
        let body = json!([f]);
        let res = cluster.tenant_request(0, &team, Method::POST, "/query", Some(&body), &alice).await;
        assert_eq!(res.status(), 400, "POST /query {f}");
        assert_eq!(res.headers()["content-type"], "application/json");
        let v: Value = res.json().await.unwrap();
        assert_eq!(v["code"], "invalid", "{v}");
        assert!(v["error"].as_str().unwrap().contains("NUL"), "{v}");
    }
    assert_eq!(ws.count("alive", &[json!({"kinds": [9]})]).await, Ok(0));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_in_an_http_api_body_is_a_400_naming_the_field() {
    let Setup { cluster, team, alice, channel, mut ws, .. } = setup(ClusterOptions::default()).await;
    let posted = message(&alice, channel, "x");
    assert!(ws.publish(&posted).await.0);
    let nul_key = format!("{}\u{0}", &alice.public_hex()[1..]);
    let cases = [
        ("/api/members", json!({"pubkey": nul_key, "role": "member"}), "pubkey"),
        ("/api/members", json!({"pubkey": alice.public_hex(), "role": "mem\u{0}ber"}), "role"),
        ("/api/tokens", json!({"scopes": ["messages:read\u{0}"]}), "scopes"),
        ("/api/tokens", json!({"scopes": ["messages:read"], "channel_ids": ["\u{0}"]}), "channel_ids"),
    ];
    let read_path = format!("/api/channels/{channel}/read");
    let read = (read_path.as_str(), json!({"up_to": format!("{}\u{0}", &posted.id[1..])}), "up_to");
    for (path, body, field) in cases.iter().map(|(p, b, f)| (*p, b.clone(), *f)).chain([read]) {
        let res = cluster.tenant_request(0, &team, Method::POST, path, Some(&body), &team.owner).await;
        assert_eq!(res.status(), 400, "{path} {body}");
        assert_eq!(res.headers()["content-type"], "application/json");
        let v: Value = res.json().await.unwrap();
        let error = v["error"].as_str().unwrap();
        assert!(error.contains(field), "{path}: {error:?} does not name {field}");
    }
    let body =
        json!({"community_id": Uuid::new_v4(), "host": "nul\u{0}.test", "owner_pubkey": alice.public_hex()});
    let res =
        cluster.operator_request(Method::POST, "/operator/communities", Some(&body), &cluster.operator).await;
    assert_eq!(res.status(), 400);
    let v: Value = res.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("host"), "{v}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_too_far_in_the_future_are_invalid_and_the_limit_is_advertised() {
    let Setup { cluster, team, alice, channel, mut ws } = setup(ClusterOptions::default()).await;
    let h = || vec![tag("h", channel.to_string())];
    let now = buzz_core::unix_now();
    refused(&mut ws, &at(&alice, i64::MAX, 9, h(), "forever first"), "created_at").await;
    refused(&mut ws, &at(&alice, now + 3600, 9, h(), "an hour ahead"), "future").await;
    refused(&mut ws, &at(&alice, -1, 9, h(), "before 1970"), "created_at").await;
    // Within the default 900 s: clock skew is tolerated.
    let soon = at(&alice, now + 600, 9, h(), "ten minutes ahead");
    assert!(ws.publish(&soon).await.0);
    let stored = ws.req("all", &[json!({"kinds": [9]})]).await.events;
    assert_eq!(stored.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), vec![soon.id]);

    let res = reqwest::Client::new()
        .get(format!("http://{}/", cluster.gateways[1]))
        .header("host", &team.host)
        .header("accept", "application/nostr+json")
        .send()
        .await
        .unwrap();
    let info: Value = res.json().await.unwrap();
    assert_eq!(info["limitation"]["created_at_upper_limit"], 900, "{info}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_future_limit_follows_its_setting() {
    let opts = ClusterOptions {
        gateway_settings: Some(|s| s.limits.created_at_upper_limit = 30),
        ..ClusterOptions::default()
    };
    let Setup { cluster, team, alice, channel, mut ws } = setup(opts).await;
    let now = buzz_core::unix_now();
    let h = || vec![tag("h", channel.to_string())];
    refused(&mut ws, &at(&alice, now + 120, 9, h(), "two minutes ahead"), "future").await;
    assert!(ws.publish(&at(&alice, now + 5, 9, h(), "five seconds ahead")).await.0);
    let res = reqwest::Client::new()
        .get(format!("http://{}/", cluster.gateways[0]))
        .header("host", &team.host)
        .header("accept", "application/nostr+json")
        .send()
        .await
        .unwrap();
    let info: Value = res.json().await.unwrap();
    assert_eq!(info["limitation"]["created_at_upper_limit"], 30);
    cluster.stop().await;
}
