//! Claims of docs/security.md that no other test held: a NIP-42 AUTH event replayed on another
//! socket is refused, a tenant NIP-98 request replayed on any gateway is refused, and a bearer
//! token is stored only as its hash.

#![allow(clippy::unwrap_used)]

use buzz_tests::client::WsClient;
use buzz_tests::Cluster;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nip42_auth_event_replayed_on_another_socket_is_refused() {
    let cluster = Cluster::start().await;
    let team = cluster.community("replay42.test").await;
    let alice = cluster.member(&team).await;
    let mut first = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    let auth = alice.sign_new(
        22242,
        vec![
            vec!["relay".into(), format!("ws://{}", team.host)],
            vec!["challenge".into(), first.challenge.clone()],
        ],
        "",
    );
    first.send_json(&json!(["AUTH", auth])).await;
    assert_eq!(first.ok_for(&auth.id).await, (true, String::new()));
    // The same signed event on another socket, of either gateway: its challenge is that socket's.
    for g in 0..2 {
        let mut other = WsClient::connect(cluster.gateways[g], &team.host).await.unwrap();
        other.send_json(&json!(["AUTH", auth])).await;
        let (ok, msg) = other.ok_for(&auth.id).await;
        assert!(!ok && msg.starts_with("invalid:"), "gateway {g}: {msg}");
        let refused = other.req("r", &[json!({"kinds": [9]})]).await;
        assert!(refused.closed.is_some_and(|m| m.starts_with("auth-required:")), "still unauthenticated");
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_is_stored_only_as_its_sha256() {
    let cluster = Cluster::start().await;
    let team = cluster.community("tokenhash.test").await;
    let alice = cluster.member(&team).await;
    let token = cluster.token(&team, &alice, &json!({"scopes": ["messages:read"]})).await;
    let secret = &token["buzz_".len()..];
    let (rows, leaked): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE token_hash = encode(sha256(convert_to($1, 'UTF8')), 'hex')), \
                count(*) FILTER (WHERE t::text LIKE '%' || $2 || '%') \
         FROM tokens t WHERE community_id = $3",
    )
    .bind(&token)
    .bind(secret)
    .bind(team.id)
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert_eq!((rows, leaked), (1, 0), "one row, found by the token's sha256, holding no part of it");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_tenant_nip98_request_is_refused_on_any_gateway() {
    let cluster = Cluster::start().await;
    let team = cluster.community("replay98.test").await;
    let body = json!({ "pubkey": buzz_core::Keys::generate().public_hex(), "role": "member" });
    let bytes = body.to_string().into_bytes();
    let url = format!("https://{}/api/members", team.host);
    let auth = buzz_core::nip98::authorization_header(&team.owner, "POST", &url, &bytes);
    for (g, expected) in [(0, 201), (0, 401), (1, 401)] {
        let res = reqwest::Client::new()
            .post(format!("http://{}/api/members", cluster.gateways[g]))
            .header("host", &team.host)
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .body(bytes.clone())
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let v: serde_json::Value = res.json().await.unwrap_or_default();
        assert_eq!(status, expected, "gateway {g}: {v}");
        if expected == 401 {
            assert_eq!(v["code"], "replay_detected", "gateway {g}: {v}");
        }
    }
    cluster.stop().await;
}
