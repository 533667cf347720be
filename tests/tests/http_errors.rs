//! Every HTTP error of the tenant API (gateway) and the operator API (policy-service) is the
//! contract's JSON `{"error","code"}` with `Content-Type: application/json`: unknown routes, wrong
//! methods, oversized and malformed bodies, and requests with two `Host` headers. No message names
//! an implementation type.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use buzz_core::Keys;
use buzz_tests::Cluster;
use reqwest::{Method, Response};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

/// Words that only an implementation would say: Rust type names and serde's phrasing of them.
const IMPLEMENTATION_WORDS: [&str; 10] = [
    "PutMember",
    "IssueBody",
    "MarkRead",
    "CreateCommunity",
    "GetCommunity",
    "struct",
    "u64",
    "u32",
    "i64",
    "Failed to",
];

/// Asserts the contract's error shape and returns the body.
async fn json_error(res: Response, status: u16, what: &str) -> Value {
    assert_eq!(res.status(), status, "{what}");
    let ct = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(ct.as_deref(), Some("application/json"), "{what}: content-type");
    let text = res.text().await.unwrap();
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: body is not JSON: {text:?}"));
    let error = v["error"].as_str().unwrap_or_else(|| panic!("{what}: no error text: {v}"));
    assert!(!error.is_empty(), "{what}: empty error");
    assert!(v["code"].as_str().is_some_and(|c| !c.is_empty()), "{what}: no code: {v}");
    for word in IMPLEMENTATION_WORDS {
        assert!(!error.contains(word), "{what}: {error:?} names {word:?}");
    }
    v
}

/// A raw HTTP/1.1 request (reqwest cannot send a header twice as `Host`); the status and body
/// (read up to its `Content-Length`, so a kept-alive connection does not need to close).
async fn raw(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
                return (status, body.to_owned());
            }
        }
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await.expect("no answer").unwrap();
        assert!(n > 0, "connection closed before a full answer: {text:?}");
        out.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_http_errors_are_the_contracts_json() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let gw = cluster.gateways[0];
    let http = reqwest::Client::new();

    let res = http.get(format!("http://{gw}/no/such/route")).header("host", &team.host).send().await.unwrap();
    assert_eq!(json_error(res, 404, "unknown route").await["code"], "not_found");
    let res = http.get(format!("http://{gw}/api/members")).header("host", &team.host).send().await.unwrap();
    assert_eq!(json_error(res, 405, "wrong method").await["code"], "method_not_allowed");
    let res = http.put(format!("http://{gw}/query")).header("host", &team.host).send().await.unwrap();
    json_error(res, 405, "wrong method on /query").await;
    // Bodies are bounded by BUZZ_MAX_MESSAGE_BYTES (128 KiB by default).
    let big = vec![b'x'; 150 * 1024];
    let res = http
        .post(format!("http://{gw}/api/members"))
        .header("host", &team.host)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(json_error(res, 413, "oversized body").await["code"], "too_large");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_bodies_are_refused_naming_the_field_never_a_type() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    // Bodies are read before the channel is looked up: any well-formed id will do.
    let channel = Uuid::new_v4();
    let read = format!("/api/channels/{channel}/read");
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/api/members", json!([]), "object"),
        ("/api/members", json!("x"), "object"),
        ("/api/members", json!({"pubkey": 7}), "pubkey"),
        ("/api/members", json!({"role": "member"}), "pubkey"),
        ("/api/members", json!({"pubkey": alice.public_hex(), "role": 1}), "role"),
        ("/api/members", json!({"pubkey": alice.public_hex(), "boss": true}), "boss"),
        ("/api/tokens", json!([1]), "object"),
        ("/api/tokens", json!({"scopes": "messages:read"}), "scopes"),
        ("/api/tokens", json!({"scopes": ["messages:read"], "expires_in": -1}), "expires_in"),
        ("/api/tokens", json!({"scopes": ["messages:read"], "expires_in": "soon"}), "expires_in"),
        ("/api/tokens", json!({"scopes": ["messages:read"], "channel_ids": [1]}), "channel_ids"),
        (&read, json!({}), "up_to"),
        (&read, json!({"up_to": 5}), "up_to"),
        (&read, json!(null), "object"),
    ];
    for (path, body, field) in cases {
        let res = cluster.tenant_request(0, &team, Method::POST, path, Some(&body), &team.owner).await;
        let v = json_error(res, 400, &format!("{path} {body}")).await;
        assert!(v["error"].as_str().unwrap().contains(field), "{path} {body}: {v} does not name {field}");
    }
    // Not JSON at all.
    let res = reqwest::Client::new()
        .post(format!("http://{}/api/members", cluster.gateways[0]))
        .header("host", &team.host)
        .header(
            "authorization",
            buzz_core::nip98::authorization_header(
                &team.owner,
                "POST",
                &format!("https://{}/api/members", team.host),
                b"{",
            ),
        )
        .body("{")
        .send()
        .await
        .unwrap();
    assert!(json_error(res, 400, "not JSON").await["error"].as_str().unwrap().contains("JSON"));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_http_errors_are_the_contracts_json() {
    let cluster = Cluster::start().await;
    let op = cluster.policy;
    let http = reqwest::Client::new();
    let res = http.get(format!("http://{op}/operator/nothing")).send().await.unwrap();
    assert_eq!(json_error(res, 404, "unknown route").await["code"], "not_found");
    let res = http.delete(format!("http://{op}/operator/communities")).send().await.unwrap();
    assert_eq!(json_error(res, 405, "wrong method").await["code"], "method_not_allowed");
    let res = http
        .post(format!("http://{op}/operator/communities"))
        .header("content-type", "application/json")
        .body(vec![b' '; 100 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(json_error(res, 413, "oversized body").await["code"], "too_large");

    let owner = Keys::generate().public_hex();
    let cases: Vec<(Value, &str)> = vec![
        (json!([]), "object"),
        (json!({"community_id": 5, "host": "a.test", "owner_pubkey": owner}), "community_id"),
        (json!({"community_id": "x", "host": "a.test", "owner_pubkey": owner}), "community_id"),
        (json!({"community_id": Uuid::new_v4(), "owner_pubkey": owner}), "host"),
        (json!({"community_id": Uuid::new_v4(), "host": ["a.test"], "owner_pubkey": owner}), "host"),
        (json!({"community_id": Uuid::new_v4(), "host": "a.test", "owner_pubkey": owner, "x": 1}), "x"),
    ];
    for (body, field) in cases {
        let res = cluster
            .operator_request(Method::POST, "/operator/communities", Some(&body), &cluster.operator)
            .await;
        let v = json_error(res, 400, &body.to_string()).await;
        assert!(v["error"].as_str().unwrap().contains(field), "{body}: {v} does not name {field}");
    }
    for query in ["", "?community_id=x", "?other=1", &format!("?community_id={}&x=1", Uuid::new_v4())] {
        let path = format!("/operator/communities{query}");
        let res = cluster.operator_request(Method::GET, &path, None, &cluster.operator).await;
        json_error(res, 400, &path).await;
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_host_headers_are_a_400_on_both_http_surfaces() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let nip11 = "GET / HTTP/1.1\r\nHost: team.test\r\nHost: other.test\r\nAccept: application/nostr+json\r\nConnection: close\r\n\r\n";
    let (status, body) = raw(cluster.gateways[0], nip11).await;
    assert_eq!(status, 400, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["error"].as_str().unwrap().contains("Host"), "{v}");
    // The same request with one Host header is served.
    let one =
        "GET / HTTP/1.1\r\nHost: team.test\r\nAccept: application/nostr+json\r\nConnection: close\r\n\r\n";
    assert_eq!(raw(cluster.gateways[0], one).await.0, 200);
    let upgrade = "GET / HTTP/1.1\r\nHost: team.test\r\nHost: team.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                   Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    assert_eq!(raw(cluster.gateways[1], upgrade).await.0, 400);
    let operator = format!(
        "GET /operator/communities?community_id={} HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
        team.id
    );
    let (status, body) = raw(cluster.policy, &operator).await;
    assert_eq!(status, 400, "{body}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["error"].is_string());
    cluster.stop().await;
}
