//! Bearer tokens end to end through the gateways: issuing rules, scopes, channel restriction on
//! REQ/COUNT/EVENT/live, expiry, unknown tokens, HTTP use and revocation by membership removal.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::cluster::eventually;
use buzz_tests::{Cluster, Community};
use reqwest::Method;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite;
use uuid::Uuid;

/// Creates an open channel as `keys` through gateway 0 and returns its id.
async fn open_channel(cluster: &Cluster, team: &Community, keys: &Keys, name: &str) -> Uuid {
    let id = Uuid::new_v4();
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, keys).await;
    let (ok, msg) = c.publish(&create_channel(keys, id, name, "open")).await;
    assert!(ok, "{msg}");
    id
}

/// The status and JSON body of a refused upgrade; panics if the upgrade succeeded.
async fn refused_upgrade(cluster: &Cluster, g: usize, team: &Community, token: &str) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let err =
        match WsClient::connect_with_headers(cluster.gateways[g], &team.host, &[("authorization", &auth)])
            .await
        {
            Ok(_) => panic!("the upgrade was accepted"),
            Err(e) => e,
        };
    match err.downcast_ref::<tungstenite::Error>() {
        Some(tungstenite::Error::Http(res)) => {
            let body = res.body().as_deref().map(serde_json::from_slice).transpose().unwrap();
            (res.status().as_u16(), body.unwrap_or(Value::Null))
        }
        other => panic!("expected an HTTP refusal, got {other:?} ({err})"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_read_token_reads_without_auth_but_cannot_write() {
    let cluster = Cluster::start().await;
    let team = cluster.community("read.test").await;
    let alice = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team, &team.owner, "general").await;
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let hello = message(&team.owner, channel, "hello");
    assert!(owner.publish(&hello).await.0);

    let res = cluster.issue_token(1, &team, &alice, &json!({"scopes": ["messages:read"]})).await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let issued: Value = res.json().await.unwrap();
    let token = issued["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("buzz_"), "{issued}");
    assert_eq!(issued["scopes"], json!(["messages:read"]));
    assert_eq!(issued["channel_ids"], Value::Null);
    // No expires_in: the longest lifetime, one year.
    let year = 365 * 24 * 3600;
    let expires_at = issued["expires_at"].as_i64().unwrap();
    assert!((expires_at - buzz_core::unix_now() - year).abs() < 60, "{issued}");
    // Only the hash is stored.
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT token_hash FROM tokens").fetch_all(&cluster.pool).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_ne!(stored[0], token);
    assert!(!stored[0].contains(&token[5..]));

    // The socket is authenticated from the start, as alice, with read only.
    let mut c = WsClient::with_token(cluster.gateways[1], &team.host, &token).await;
    let got = c.req("r", &[json!({"kinds": [9], "#h": [channel.to_string()]})]).await;
    assert_eq!(got.closed, None);
    assert_eq!(got.events.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), vec![hello.id.clone()]);
    let (ok, msg) = c.publish(&message(&alice, channel, "not allowed")).await;
    assert!(!ok);
    assert!(msg.starts_with("restricted:"), "{msg}");
    // Creating channels needs channels:write.
    let (ok, msg) = c.publish(&create_channel(&alice, Uuid::new_v4(), "nope", "open")).await;
    assert!(!ok);
    assert!(msg.starts_with("restricted:"), "{msg}");
    // Events of another pubkey are still refused.
    let (ok, msg) = c.publish(&message(&team.owner, channel, "forged")).await;
    assert!(!ok && msg.starts_with("restricted:"), "{msg}");

    // A write-only token cannot read.
    let token = cluster.token(&team, &alice, &json!({"scopes": ["messages:write"]})).await;
    let mut w = WsClient::with_token(cluster.gateways[0], &team.host, &token).await;
    let got = w.req("r", &[json!({"kinds": [9]})]).await;
    assert!(got.closed.as_deref().is_some_and(|m| m.starts_with("restricted:")), "{got:?}");
    let (ok, msg) = w.publish(&message(&alice, channel, "written with a token")).await;
    assert!(ok, "{msg}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_restricted_to_one_channel_can_neither_read_nor_write_another() {
    let cluster = Cluster::start().await;
    let team = cluster.community("restrict.test").await;
    let alice = cluster.member(&team).await;
    let x = open_channel(&cluster, &team, &team.owner, "x").await;
    let y = open_channel(&cluster, &team, &team.owner, "y").await;
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let in_x = message(&team.owner, x, "in x");
    let in_y = message(&team.owner, y, "in y");
    assert!(owner.publish(&in_x).await.0);
    assert!(owner.publish(&in_y).await.0);

    let token = cluster
        .token(&team, &alice, &json!({"scopes": ["messages:read", "messages:write"], "channel_ids": [x]}))
        .await;
    let mut c = WsClient::with_token(cluster.gateways[1], &team.host, &token).await;

    // REQ: everything readable is only X's.
    let all = c.req("all", &[json!({"kinds": [9]})]).await;
    assert_eq!(all.events.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), vec![in_x.id.clone()]);
    let only_y = c.req("y", &[json!({"#h": [y.to_string()]})]).await;
    assert!(only_y.events.is_empty());
    let by_id = c.req("id", &[json!({"ids": [in_y.id]})]).await;
    assert!(by_id.events.is_empty());
    // COUNT.
    assert_eq!(c.count("cy", &[json!({"#h": [y.to_string()]})]).await, Ok(0));
    assert_eq!(c.count("cx", &[json!({"kinds": [9], "#h": [x.to_string()]})]).await, Ok(1));
    // The owner, unrestricted, counts both channels' messages.
    assert_eq!(owner.count("all", &[json!({"kinds": [9]})]).await, Ok(2));

    // Live: a new event in Y is not delivered, the one in X after it is.
    let live = c.req("live", &[json!({"kinds": [9], "since": buzz_core::unix_now() - 5})]).await;
    assert_eq!(live.closed, None);
    let later_y = message(&team.owner, y, "later in y");
    let later_x = message(&team.owner, x, "later in x");
    assert!(owner.publish(&later_y).await.0);
    assert!(owner.publish(&later_x).await.0);
    let mut delivered = Vec::new();
    while let Some(e) = c.next_event("live", Duration::from_millis(1500)).await {
        delivered.push(e.id);
    }
    assert!(delivered.contains(&later_x.id), "{delivered:?}");
    assert!(!delivered.contains(&later_y.id), "{delivered:?}");
    assert!(!delivered.contains(&in_y.id), "{delivered:?}");

    // EVENT: refused into Y, accepted into X.
    let (ok, msg) = c.publish(&message(&alice, y, "into y")).await;
    assert!(!ok);
    assert!(msg.starts_with("restricted:"), "{msg}");
    let (ok, msg) = c.publish(&message(&alice, x, "into x")).await;
    assert!(ok, "{msg}");

    // HTTP: a malformed or uppercase channel id is refused; an unknown channel id is accepted
    // (a restriction only narrows and must not reveal which channels exist).
    let res = cluster
        .issue_token(
            0,
            &team,
            &alice,
            &json!({"scopes": ["messages:read"], "channel_ids": [x.to_string().to_uppercase()]}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let res = cluster
        .issue_token(0, &team, &alice, &json!({"scopes": ["messages:read"], "channel_ids": [Uuid::new_v4()]}))
        .await;
    assert_eq!(res.status(), 201);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refused() {
    let cluster = Cluster::start().await;
    let team = cluster.community("expiry.test").await;
    let alice = cluster.member(&team).await;
    let token = cluster.token(&team, &alice, &json!({"scopes": ["messages:read"], "expires_in": 1})).await;
    let hash: String =
        sqlx::query_scalar("SELECT token_hash FROM tokens").fetch_one(&cluster.pool).await.unwrap();
    // Wait until the database says it has expired (no fixed sleep), then it must be refused.
    eventually(Duration::from_secs(5), || {
        let pool = cluster.pool.clone();
        let hash = hash.clone();
        async move {
            sqlx::query_scalar::<_, bool>("SELECT expires_at <= now() FROM tokens WHERE token_hash = $1")
                .bind(hash)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    })
    .await;
    let (status, body) = refused_upgrade(&cluster, 0, &team, &token).await;
    assert_eq!(status, 401);
    assert_eq!(body, json!({"error": "invalid or expired token", "code": "invalid_token"}));
    let res = cluster.bearer_request(1, &team, Method::DELETE, "/api/members/00", None, &token).await;
    assert_eq!(res.status(), 401);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_token_gets_401_and_no_upgrade() {
    let cluster = Cluster::start().await;
    let team = cluster.community("unknown.test").await;
    let alice = cluster.member(&team).await;
    let real = cluster.token(&team, &alice, &json!({"scopes": ["messages:read"]})).await;
    let other = cluster.community("other.test").await;
    let forged = format!("buzz_{}", "A".repeat(43));
    for token in [forged.as_str(), "not-even-a-token", &real[..real.len() - 1]] {
        for g in 0..2 {
            let (status, body) = refused_upgrade(&cluster, g, &team, token).await;
            assert_eq!(status, 401, "{token}");
            assert_eq!(body["code"], "invalid_token");
        }
        let res = cluster
            .bearer_request(
                0,
                &team,
                Method::POST,
                "/api/members",
                Some(&json!({"pubkey": alice.public_hex()})),
                token,
            )
            .await;
        assert_eq!(res.status(), 401);
        assert_eq!(res.json::<Value>().await.unwrap()["code"], "invalid_token");
    }
    // A token is bound to its community: another host does not know it.
    let (status, _) = refused_upgrade(&cluster, 0, &other, &real).await;
    assert_eq!(status, 401);
    // Unknown host still wins over the token.
    let auth = format!("Bearer {real}");
    let err =
        WsClient::connect_with_headers(cluster.gateways[0], "nowhere.test", &[("authorization", &auth)])
            .await
            .err()
            .unwrap();
    assert!(
        matches!(err.downcast_ref::<tungstenite::Error>(), Some(tungstenite::Error::Http(r)) if r.status() == 404)
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_members_write_token_adds_members_and_a_read_token_cannot() {
    let cluster = Cluster::start().await;
    let team = cluster.community("members.test").await;
    let admin_token = cluster.token(&team, &team.owner, &json!({"scopes": ["members:write"]})).await;
    let read_token = cluster.token(&team, &team.owner, &json!({"scopes": ["messages:read"]})).await;
    let bob = Keys::generate();
    let body = json!({"pubkey": bob.public_hex()});

    let res = cluster.bearer_request(1, &team, Method::POST, "/api/members", Some(&body), &read_token).await;
    assert_eq!(res.status(), 403);
    assert_eq!(res.json::<Value>().await.unwrap()["code"], "restricted");
    let res = cluster.bearer_request(1, &team, Method::POST, "/api/members", Some(&body), &admin_token).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    // Bob is a member now: he authenticates.
    let mut c = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    assert!(c.auth(&bob).await.0);
    let path = format!("/api/members/{}", bob.public_hex());
    let res = cluster.bearer_request(0, &team, Method::DELETE, &path, None, &read_token).await;
    assert_eq!(res.status(), 403);
    let res = cluster.bearer_request(0, &team, Method::DELETE, &path, None, &admin_token).await;
    assert_eq!(res.status(), 200);
    // The same bearer works for as many requests as it lives (no replay guard for tokens).
    let res = cluster.bearer_request(0, &team, Method::POST, "/api/members", Some(&body), &admin_token).await;
    assert_eq!(res.status(), 201);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issuing_follows_the_rules() {
    let cluster = Cluster::start().await;
    let team = cluster.community("rules.test").await;
    let alice = cluster.member(&team).await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;

    // A member may not mint members:write; an admin may.
    let res = cluster.issue_token(0, &team, &alice, &json!({"scopes": ["members:write"]})).await;
    assert_eq!(res.status(), 403);
    assert_eq!(res.json::<Value>().await.unwrap()["code"], "restricted");
    let res = cluster.issue_token(1, &team, &admin, &json!({"scopes": ["members:write"]})).await;
    assert_eq!(res.status(), 201);
    // A non-member may not mint anything.
    let res = cluster.issue_token(0, &team, &Keys::generate(), &json!({"scopes": ["messages:read"]})).await;
    assert_eq!(res.status(), 403);
    // Bad requests.
    for body in [
        json!({"scopes": []}),
        json!({"scopes": ["messages:read", "messages:read"]}),
        json!({"scopes": ["admin"]}),
        json!({"scopes": ["messages:read"], "expires_in": 0}),
        json!({"scopes": ["messages:read"], "expires_in": 365 * 24 * 3600 + 1}),
        json!({"scopes": ["messages:read"], "expires_in": -5}),
        json!({"scopes": ["messages:read"], "channel_ids": []}),
        json!({"scopes": ["messages:read"], "channel_ids": ["nope"]}),
        json!({"scopes": ["messages:read"], "extra": true}),
        json!({}),
    ] {
        let res = cluster.issue_token(0, &team, &alice, &body).await;
        assert_eq!(res.status(), 400, "{body}");
        assert!(res.json::<Value>().await.unwrap()["error"].is_string());
    }
    // A bearer token cannot mint tokens, whatever its scopes.
    let token = cluster
        .token(
            &team,
            &team.owner,
            &json!({"scopes": ["messages:read", "messages:write", "channels:write", "members:write"]}),
        )
        .await;
    let res = cluster
        .bearer_request(
            0,
            &team,
            Method::POST,
            "/api/tokens",
            Some(&json!({"scopes": ["messages:read"]})),
            &token,
        )
        .await;
    assert_eq!(res.status(), 403);
    // No signature at all.
    let res = reqwest::Client::new()
        .post(format!("http://{}/api/tokens", cluster.gateways[0]))
        .header("host", &team.host)
        .json(&json!({"scopes": ["messages:read"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_membership_makes_the_token_invalid() {
    let cluster = Cluster::start().await;
    let team = cluster.community("revoke.test").await;
    let alice = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team, &team.owner, "general").await;
    let token = cluster.token(&team, &alice, &json!({"scopes": ["messages:read", "messages:write"]})).await;
    let mut c = WsClient::with_token(cluster.gateways[1], &team.host, &token).await;
    assert!(c.publish(&message(&alice, channel, "before")).await.0);
    let live = c.req("live", &[json!({"kinds": [9], "limit": 0})]).await;
    assert_eq!(live.closed, None);

    let path = format!("/api/members/{}", alice.public_hex());
    let res = cluster.tenant_request(0, &team, Method::DELETE, &path, None, &team.owner).await;
    assert_eq!(res.status(), 200);
    // The open socket loses its identity at once (on the other gateway)...
    let closed = c.wait_for(|v| v[0] == "CLOSED" && v[1] == "live").await.unwrap();
    assert!(closed[2].as_str().unwrap().starts_with("restricted:"), "{closed}");
    let (ok, msg) = c.publish(&message(&alice, channel, "after")).await;
    assert!(!ok && msg.starts_with("auth-required:"), "{msg}");
    // ...and the token no longer opens a socket or an HTTP call.
    let (status, _) = refused_upgrade(&cluster, 0, &team, &token).await;
    assert_eq!(status, 401);
    // Being added again does not revive a token minted before the removal.
    cluster.add_member(&team, &alice, "member").await;
    let (status, _) = refused_upgrade(&cluster, 1, &team, &token).await;
    assert_eq!(status, 401);
    let fresh = cluster.token(&team, &alice, &json!({"scopes": ["messages:read"]})).await;
    let _ok = WsClient::with_token(cluster.gateways[1], &team.host, &fresh).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_socket_loses_its_token_authentication_when_the_token_expires() {
    let cluster = Cluster::start().await;
    let team = cluster.community("open-expiry.test").await;
    let alice = cluster.member(&team).await;
    let token = cluster.token(&team, &alice, &json!({"scopes": ["messages:read"], "expires_in": 2})).await;
    let mut c = WsClient::with_token(cluster.gateways[1], &team.host, &token).await;
    assert!(c.req("before", &[json!({"kinds": [9]})]).await.closed.is_none());
    let expires_at: i64 =
        sqlx::query_scalar("SELECT ceil(extract(epoch FROM expires_at))::bigint FROM tokens")
            .fetch_one(&cluster.pool)
            .await
            .unwrap();
    eventually(Duration::from_secs(5), || async { buzz_core::unix_now() >= expires_at }).await;
    let r = c.req("after", &[json!({"kinds": [9]})]).await;
    assert_eq!(r.closed.as_deref(), Some("auth-required: authenticate to read"));
    cluster.stop().await;
}
