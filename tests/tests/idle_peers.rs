//! Issue 14, idle peers: a half-sent HTTP request is closed after the header read timeout, a
//! socket that never authenticates is closed even while it answers pings, and connections are
//! capped per client address and in total.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use buzz_tests::client::WsClient;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite;

fn short_timeouts(s: &mut buzz_gateway::Settings) {
    s.header_read_timeout = Duration::from_secs(1);
    s.auth_timeout = Duration::from_secs(2);
    s.ping_interval = Duration::from_millis(500);
}

/// Waits until the relay ends the connection (EOF or reset); panics if it is still open.
async fn ended_within(tcp: &mut TcpStream, within: Duration) {
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(_)) => {}
            Err(_) => panic!("connection still open after {within:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_request_and_a_silent_connection_are_closed_after_the_header_read_timeout() {
    let opts = ClusterOptions { gateways: 1, gateway_settings: Some(short_timeouts), ..Default::default() };
    let cluster = Cluster::start_with(opts).await;
    let gw = cluster.gateways[0];
    let started = Instant::now();
    let mut half = TcpStream::connect(gw).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: idle.test\r\n").await.unwrap();
    let mut silent = TcpStream::connect(gw).await.unwrap();
    ended_within(&mut half, Duration::from_secs(10)).await;
    ended_within(&mut silent, Duration::from_secs(10)).await;
    assert!(started.elapsed() >= Duration::from_millis(900), "closed before the timeout");
    // A complete request is still answered.
    let res = reqwest::get(format!("http://{gw}/healthz")).await.unwrap();
    assert_eq!(res.status(), 200);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_does_not_authenticate_is_closed_even_while_it_answers_pings() {
    let opts = ClusterOptions { gateways: 1, gateway_settings: Some(short_timeouts), ..Default::default() };
    let cluster = Cluster::start_with(opts).await;
    let team = cluster.community("lurk.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let gw = cluster.gateways[0];
    let mut lurker = WsClient::connect(gw, &team.host).await.unwrap();
    let mut member = WsClient::authed(gw, &team.host, &alice).await;
    let mut removed = WsClient::authed(gw, &team.host, &bob).await;

    // Reading answers the relay's pings (every 500 ms here), so only the auth deadline ends it.
    let (got, code) =
        lurker.drain_until_closed(Duration::from_secs(15)).await.expect("unauthenticated socket still open");
    assert_eq!(code, Some(1008));
    let notice = got.iter().find(|v| v[0] == "NOTICE").expect("a NOTICE before the close");
    assert!(notice[1].as_str().unwrap().starts_with("auth-required:"), "{notice}");
    // An authenticated socket outlives the deadline and still works.
    let answer = member.req("after", &[json!({ "kinds": [9], "limit": 1 })]).await;
    assert!(answer.closed.is_none(), "{:?}", answer.closed);

    // A socket that loses its authentication gets the same deadline from then on.
    let path = format!("/api/members/{}", bob.public_hex());
    let res = cluster.tenant_request(0, &team, reqwest::Method::DELETE, &path, None, &team.owner).await;
    assert_eq!(res.status(), 200);
    let (_, code) =
        removed.drain_until_closed(Duration::from_secs(15)).await.expect("deauthenticated socket still open");
    assert_eq!(code, Some(1008));
    cluster.stop().await;
}

fn caps(s: &mut buzz_gateway::Settings) {
    s.max_connections_per_ip = 2;
    s.max_connections = 3;
}

async fn connect_from(local: [u8; 4], gw: SocketAddr, host: &str) -> anyhow::Result<WsClient> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((local, 0)))?;
    WsClient::connect_over(socket, gw, host).await
}

/// Connects from `local`, retrying while connections of the cluster's own start-up checks are
/// still closing.
async fn admitted(local: [u8; 4], gw: SocketAddr, host: &str) -> WsClient {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match connect_from(local, gw, host).await {
            Ok(c) => return c,
            Err(e) => assert!(Instant::now() < deadline, "not admitted: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The status and JSON body of a refused upgrade.
async fn refused(local: [u8; 4], gw: SocketAddr, host: &str) -> (u16, serde_json::Value) {
    let err = connect_from(local, gw, host).await.err().expect("connection over the cap was admitted");
    match err.downcast::<tungstenite::Error>() {
        Ok(tungstenite::Error::Http(res)) => {
            let body = serde_json::from_slice(res.body().as_deref().unwrap_or_default()).unwrap();
            (res.status().as_u16(), body)
        }
        other => panic!("expected an HTTP refusal, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_per_address_and_total_caps_are_refused_with_a_json_error() {
    let opts = ClusterOptions { gateways: 1, gateway_settings: Some(caps), ..Default::default() };
    let cluster = Cluster::start_with(opts).await;
    let team = cluster.community("caps.test").await;
    let (gw, host) = (cluster.gateways[0], team.host.as_str());
    let one = admitted([127, 0, 0, 1], gw, host).await;
    let _two = admitted([127, 0, 0, 1], gw, host).await;
    let (status, body) = refused([127, 0, 0, 1], gw, host).await;
    assert_eq!(status, 429);
    assert_eq!(
        body,
        json!({ "error": "too many connections from this address", "code": "too_many_connections" })
    );
    // Probes are served over the cap.
    let res = reqwest::get(format!("http://{gw}/healthz")).await.unwrap();
    assert_eq!(res.status(), 200);

    let _three = admitted([127, 0, 0, 2], gw, host).await;
    let (status, body) = refused([127, 0, 0, 2], gw, host).await;
    assert_eq!(status, 503);
    assert_eq!(body["code"], "over_capacity");
    assert!(body["error"].as_str().unwrap().contains("connection limit"));

    // A closed socket frees its slot.
    drop(one);
    let _again = admitted([127, 0, 0, 1], gw, host).await;
    cluster.stop().await;
}
