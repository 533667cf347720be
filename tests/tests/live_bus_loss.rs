//! A gateway that loses its NATS connection misses every live event published meanwhile (core
//! NATS keeps nothing for it). Found by `scripts/faults.sh` (`link-nats:gateway-1`: 1,572 events
//! missed by listeners whose subscriptions stayed open): its subscribers must be told, here by
//! their socket being closed, so that they reconnect and replay.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use uuid::Uuid;

/// The proxy between the first gateway and NATS.
static PROXY: OnceLock<SocketAddr> = OnceLock::new();
static GATEWAYS: AtomicUsize = AtomicUsize::new(0);

/// The first gateway reaches NATS through the proxy; the second directly.
fn first_gateway_through_the_proxy(s: &mut buzz_gateway::Settings) {
    if GATEWAYS.fetch_add(1, Ordering::SeqCst) == 0 {
        s.nats = buzz_bus::NatsConfig::new(format!("nats://{}", PROXY.get().unwrap()));
    }
}

async fn command(control: SocketAddr, line: &str) {
    let mut s = TcpStream::connect(control).await.unwrap();
    s.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).await.unwrap();
    assert!(reply.starts_with("ok"), "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_of_a_gateway_that_lost_the_bus_are_told() {
    let nats: SocketAddr = std::env::var("NATS_URL")
        .unwrap_or_else(|_| "nats://127.0.0.1:4222".into())
        .trim_start_matches("nats://")
        .parse()
        .unwrap();
    let listen = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let control_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let control = control_listener.local_addr().unwrap();
    PROXY.set(listen.local_addr().unwrap()).unwrap();
    tokio::spawn(buzz_load::distributed::proxy::run(listen, control_listener, nats));
    let cluster = Cluster::start_with(ClusterOptions {
        gateway_settings: Some(first_gateway_through_the_proxy),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[0], &team.host, &bob).await;
    let channel = Uuid::new_v4();
    let (accepted, msg) = a.publish(&create_channel(&alice, channel, "work", "open")).await;
    assert!(accepted, "{msg}");
    let live = b.req("live", &[json!({"kinds": [9], "#h": [channel.to_string()], "limit": 0})]).await;
    assert!(live.closed.is_none(), "{:?}", live.closed);

    command(control, "cut").await;
    let post = message(&alice, channel, "while the first gateway has no bus");
    let (accepted, msg) = a.publish(&post).await;
    assert!(accepted, "{msg}");
    // Bob gets the post, or learns within a few seconds that he may have missed something.
    let told = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match b.recv_within(Duration::from_secs(10)).await {
                None => return "socket closed".to_owned(),
                Some(v) if v[0] == "EVENT" && v[2]["id"] == post.id.to_string() => {
                    return "delivered".to_owned()
                }
                Some(v) if v[0] == "CLOSED" && v[1] == "live" => return format!("CLOSED {}", v[2]),
                Some(_) => {}
            }
        }
    })
    .await;
    command(control, "pass").await;
    assert!(told.is_ok(), "the subscriber on the gateway without a bus was neither served nor told");
}
