//! NIP-AR snapshot state on Redis under faults: "Redis expiry, eviction, or loss requires a
//! reset. A Redis outage returns a service failure. The relay uses no memory fallback." Each test
//! runs the snapshot-service against a private redis-server it starts on a free port (the shared
//! Redis on 6379 is never touched), and the spec's time limits.

#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use buzz_tests::client::WsClient;
use buzz_tests::snapshot::*;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;

/// A throwaway redis-server without persistence.
struct PrivateRedis {
    port: u16,
    child: Child,
}

impl PrivateRedis {
    fn start_on(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "private redis did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { port, child }
    }
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self::start_on(port)
    }
    fn url(&self) -> &'static str {
        Box::leak(format!("redis://127.0.0.1:{}", self.port).into_boxed_str())
    }
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    fn cli(&self, args: &[&str]) {
        let ok = Command::new("redis-cli").arg("-p").arg(self.port.to_string()).args(args).status().unwrap();
        assert!(ok.success());
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

fn fast_redis_timeout(s: &mut buzz_snapshot::Settings) {
    s.redis_timeout_ms = 500;
}

async fn with_capture(
    redis: &PrivateRedis,
) -> (Cluster, buzz_tests::Community, buzz_core::Keys, serde_json::Value, String) {
    let cluster = Cluster::start_with(ClusterOptions {
        snapshot_redis_url: Some(redis.url()),
        snapshot_settings: Some(fast_redis_timeout),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let open = channel(&mut a, &alice, "open", &[]).await;
    let (_, ev) = create(&mut a, &alice, open, TASK, &[]).await;
    let r = snap(&cluster, 0, &team, &alice, start(json!({"artifact": "current"}))).await;
    assert_eq!(r.0, 200, "{}", r.1);
    (cluster, team, alice, r.1["token"].clone(), ev.id.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_is_a_reset_for_every_action() {
    let redis = PrivateRedis::start();
    let (cluster, team, alice, token, id) = with_capture(&redis).await;
    redis.cli(&["FLUSHALL"]);
    assert_snapshot_error(&snap(&cluster, 0, &team, &alice, complete(&token)).await, 409, "snapshot_reset");
    assert_snapshot_error(
        &snap(&cluster, 1, &team, &alice, bodies(&token, &[&id])).await,
        409,
        "snapshot_reset",
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_503_and_nothing_is_served_from_memory() {
    let mut redis = PrivateRedis::start();
    let (cluster, team, alice, token, id) = with_capture(&redis).await;
    // The capture was just served; with Redis gone no replica answers it from memory.
    redis.stop();
    for body in [complete(&token), bodies(&token, &[&id]), start(json!({"artifact": "current"}))] {
        assert_snapshot_error(&snap(&cluster, 0, &team, &alice, body).await, 503, "snapshot_unavailable");
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restarted_mid_capture_answers_reset_never_the_lost_capture() {
    let mut redis = PrivateRedis::start();
    let (cluster, team, alice, token, _) = with_capture(&redis).await;
    let port = redis.port;
    redis.stop();
    let _restarted = PrivateRedis::start_on(port);
    // Until the clients reconnect the answer may be 503; then it is 409, and never 200.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = snap(&cluster, 1, &team, &alice, complete(&token)).await;
        if r.0 == 409 {
            assert_snapshot_error(&r, 409, "snapshot_reset");
            break;
        }
        assert_snapshot_error(&r, 503, "snapshot_unavailable");
        assert!(tokio::time::Instant::now() < deadline, "no reset after the restart");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.stop().await;
}
