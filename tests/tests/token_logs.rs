//! A bearer token never appears in logs: every log line of a whole cluster at TRACE level
//! (gateway, services, and the libraries under them) is captured while tokens are issued and used
//! over HTTP and WebSocket, valid and invalid, and searched for the token strings.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::Cluster;
use reqwest::Method;
use serde_json::json;
use uuid::Uuid;

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_never_appear_in_logs_even_at_trace() {
    let logs = Buffer::default();
    // This test binary is its own process: the subscriber sees every service of the cluster.
    // The one exclusion is the test's own WebSocket client, whose handshake TRACE prints the
    // request it sends (the relay accepts upgrades through axum/hyper, not that module).
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("trace,tungstenite::handshake::client=off"))
        .with_writer(logs.clone())
        .with_ansi(false)
        .try_init()
        .unwrap();

    let cluster = Cluster::start().await;
    let team = cluster.community("logs.test").await;
    let alice = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    assert!(owner.publish(&create_channel(&team.owner, channel, "general", "open")).await.0);

    let read_write = cluster
        .token(
            &team,
            &alice,
            &json!({"scopes": ["messages:read", "messages:write"], "channel_ids": [channel]}),
        )
        .await;
    let members = cluster.token(&team, &team.owner, &json!({"scopes": ["members:write"]})).await;

    // Used on both gateways, over WebSocket (read, write, refused write) and HTTP.
    for g in 0..2 {
        let mut c = WsClient::with_token(cluster.gateways[g], &team.host, &read_write).await;
        assert!(c.publish(&message(&alice, channel, "hello")).await.0);
        assert!(!c.publish(&message(&alice, Uuid::new_v4(), "elsewhere")).await.0);
        assert_eq!(c.req("r", &[json!({"kinds": [9]})]).await.closed, None);
    }
    let bob = buzz_core::Keys::generate();
    let res = cluster
        .bearer_request(
            1,
            &team,
            Method::POST,
            "/api/members",
            Some(&json!({"pubkey": bob.public_hex()})),
            &members,
        )
        .await;
    assert_eq!(res.status(), 201);
    let res = cluster
        .bearer_request(
            0,
            &team,
            Method::POST,
            "/api/members",
            Some(&json!({"pubkey": bob.public_hex()})),
            &read_write,
        )
        .await;
    assert_eq!(res.status(), 403);

    // Refused tokens are not logged either.
    let forged = format!("buzz_{}", "Zq".repeat(21));
    let auth = format!("Bearer {forged}");
    assert!(WsClient::connect_with_headers(cluster.gateways[0], &team.host, &[("authorization", &auth)])
        .await
        .is_err());
    let res = cluster.bearer_request(1, &team, Method::DELETE, "/api/members/00", None, &forged).await;
    assert_eq!(res.status(), 401);
    // A token may not mint tokens; the attempt is refused and not logged.
    let res = cluster
        .bearer_request(
            0,
            &team,
            Method::POST,
            "/api/tokens",
            Some(&json!({"scopes": ["messages:read"]})),
            &members,
        )
        .await;
    assert_eq!(res.status(), 403);
    cluster.stop().await;

    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    // The capture works: TRACE lines of our services are there.
    assert!(text.contains("gateway listening"), "no gateway logs captured");
    assert!(text.contains("TRACE"), "no TRACE lines captured");
    for token in [&read_write, &members, &forged] {
        let secret = &token["buzz_".len()..];
        assert!(!text.contains(secret), "a token appears in the logs");
    }
}
