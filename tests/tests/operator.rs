//! The operator API and the tenant members API: NIP-98 binding, replay, allowlist, conflicts.

#![allow(clippy::unwrap_used)]

use buzz_core::Keys;
use buzz_tests::client::WsClient;
use buzz_tests::Cluster;
use reqwest::Method;
use serde_json::json;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_requests_need_an_allowlisted_fresh_signature_bound_to_method_url_and_body() {
    let cluster = Cluster::start().await;
    let body = json!({"community_id": Uuid::new_v4(), "host": "ops.test", "owner_pubkey": Keys::generate().public_hex()});

    // Not an operator key.
    let res =
        cluster.operator_request(Method::POST, "/operator/communities", Some(&body), &Keys::generate()).await;
    assert_eq!(res.status(), 403);
    assert_eq!(res.headers()["cache-control"], "no-store");

    // No signature at all.
    let url = format!("http://{}/operator/communities", cluster.policy);
    let res = reqwest::Client::new().post(&url).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 401);

    // Signed for another body.
    let auth = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, b"{}");
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", &auth)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // Signed for another URL.
    let other = format!("http://{}/operator/communities?x=1", cluster.policy);
    let bytes = body.to_string();
    let auth = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &other, bytes.as_bytes());
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", &auth)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // A good one, then the very same header again: replay.
    let auth = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, bytes.as_bytes());
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", &auth)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", &auth)
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["error"], "replay detected");

    // GET binds the query string too.
    let id = body["community_id"].as_str().unwrap();
    let res = cluster
        .operator_request(
            Method::GET,
            &format!("/operator/communities?community_id={id}"),
            None,
            &cluster.operator,
        )
        .await;
    assert_eq!(res.status(), 200);
    let got: serde_json::Value = res.json().await.unwrap();
    assert_eq!(got["host"], "ops.test");
    assert_eq!(got["requires_nip_fi"], false);
    assert_eq!(got["policy_generation"], 0);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_is_idempotent_and_refuses_conflicts_and_bad_input() {
    let cluster = Cluster::start().await;
    let owner = Keys::generate().public_hex();
    let id = Uuid::new_v4();
    let body = json!({"community_id": id, "host": "Team.Test.", "owner_pubkey": owner});
    let post = |b: serde_json::Value| {
        let c = &cluster;
        async move { c.operator_request(Method::POST, "/operator/communities", Some(&b), &c.operator).await }
    };
    let res = post(body.clone()).await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["host"], "team.test");
    assert_eq!(post(body.clone()).await.status(), 200);
    let res = post(json!({"community_id": Uuid::new_v4(), "host": "team.test", "owner_pubkey": owner})).await;
    assert_eq!(res.status(), 409);
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["code"], "host_conflict");
    let res = post(json!({"community_id": id, "host": "else.test", "owner_pubkey": owner})).await;
    assert_eq!(res.json::<serde_json::Value>().await.unwrap()["code"], "community_conflict");
    for bad in [
        json!({"community_id": Uuid::nil(), "host": "a.test", "owner_pubkey": owner}),
        json!({"community_id": Uuid::new_v4(), "host": "a b", "owner_pubkey": owner}),
        json!({"community_id": Uuid::new_v4(), "host": "a.test", "owner_pubkey": "ABC"}),
        json!({"community_id": Uuid::new_v4(), "host": "a.test", "owner_pubkey": owner, "extra": 1}),
    ] {
        let res = post(bad.clone()).await;
        assert_eq!(res.status(), 400, "{bad}");
        assert!(res.json::<serde_json::Value>().await.unwrap()["error"].is_string());
    }
    let res = cluster
        .operator_request(
            Method::GET,
            &format!("/operator/communities?community_id={}", Uuid::new_v4()),
            None,
            &cluster.operator,
        )
        .await;
    assert_eq!(res.status(), 404);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_owners_and_admins_add_members_and_roles_are_bounded() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let member = cluster.member(&team).await;
    let newcomer = Keys::generate();
    let add = |signer: &Keys, who: &Keys, role: &str| {
        let body = json!({"pubkey": who.public_hex(), "role": role});
        let (c, t, s) = (&cluster, &team, signer.clone());
        async move { c.tenant_request(1, t, Method::POST, "/api/members", Some(&body), &s).await }
    };
    let res = add(&member, &newcomer, "member").await;
    assert_eq!(res.status(), 403);
    assert!(res.json::<serde_json::Value>().await.unwrap()["error"]
        .as_str()
        .unwrap()
        .contains("owners and admins"));
    // A stranger's signature is refused as well; the owner can add an admin who can add members only.
    assert_eq!(add(&Keys::generate(), &newcomer, "member").await.status(), 403);
    let admin = Keys::generate();
    assert_eq!(add(&team.owner, &admin, "admin").await.status(), 201);
    assert_eq!(add(&admin, &newcomer, "admin").await.status(), 403);
    assert_eq!(add(&admin, &newcomer, "member").await.status(), 201);
    assert_eq!(add(&admin, &newcomer, "owner").await.status(), 403);
    assert_eq!(add(&team.owner, &newcomer, "boss").await.status(), 400);
    // The newcomer can now authenticate.
    WsClient::authed(cluster.gateways[0], &team.host, &newcomer).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_member_loses_authentication_and_open_subscriptions_on_every_gateway() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let bob = cluster.member(&team).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    assert!(b.req("live", &[json!({"kinds": [9]})]).await.closed.is_none());
    let res = cluster
        .tenant_request(
            0,
            &team,
            Method::DELETE,
            &format!("/api/members/{}", bob.public_hex()),
            None,
            &team.owner,
        )
        .await;
    assert_eq!(res.status(), 200);
    let closed = b.wait_for(|v| v[0] == "CLOSED" && v[1] == "live").await.expect("subscription closed");
    assert!(closed[2].as_str().unwrap().starts_with("restricted:"));
    let r = b.req("again", &[json!({"kinds": [9]})]).await;
    assert!(r.closed.unwrap().starts_with("auth-required:"));
    let mut fresh = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    assert!(!fresh.auth(&bob).await.0);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_hosts_are_validated_for_syntax_and_length() {
    let cluster = Cluster::start().await;
    let owner = Keys::generate().public_hex();
    let post = |host: String| {
        let c = &cluster;
        let body = json!({"community_id": Uuid::new_v4(), "host": host, "owner_pubkey": owner});
        async move { c.operator_request(Method::POST, "/operator/communities", Some(&body), &c.operator).await }
    };
    // 253 characters is the longest name DNS allows; labels up to 63.
    let longest = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61));
    assert_eq!(longest.len(), 253);
    for good in [
        longest.clone(),
        format!("{longest}:8443"),
        "ok-1.test".into(),
        "127.0.0.1:7777".into(),
        "[::1]:7777".into(),
    ] {
        let res = post(good.clone()).await;
        assert_eq!(res.status(), 201, "{good}: {}", res.text().await.unwrap_or_default());
    }
    let cases = [
        (format!("{}.test", "a".repeat(5000)), "253"),
        (format!("x{longest}"), "253"),
        (format!("{}.test", "a".repeat(64)), "63"),
        ("a..test".into(), "label"),
        ("-lead.test".into(), "hyphen"),
        ("trail-.test".into(), "hyphen"),
        ("under_score.test".into(), "letters, digits"),
        ("a b.test".into(), "host"),
        ("a.test:99999".into(), "host"),
    ];
    for (bad, says) in cases {
        let res = post(bad.clone()).await;
        assert_eq!(res.status(), 400, "{}-character host {}...", bad.len(), &bad[..bad.len().min(20)]);
        let v: serde_json::Value = res.json().await.unwrap();
        let error = v["error"].as_str().unwrap();
        assert!(error.contains("host") && error.contains(says), "{error:?} does not say {says:?}");
        assert!(error.len() < 200, "the error echoes the input: {error:?}");
    }
    cluster.stop().await;
}
