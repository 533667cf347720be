//! NIP-AR snapshot starts that do not answer in time: "Each operation has an eight-second elapsed
//! limit." and "Each reader has at most two captures per community." A start cut off after its
//! manifest reached Redis (the operation limit, or the Redis client's own timeout, while Redis'
//! answer is late) must answer or leave no charge; otherwise the orphaned capture keeps one of its
//! reader's two slots and one of the 32 relay slots for 300 s.
//!
//! The snapshot-service reaches the shared Redis through a proxy that can hold Redis' answers
//! (commands still go through): the publication runs in Redis, its answer arrives too late.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use buzz_tests::snapshot::*;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP proxy to the shared Redis whose server-to-client direction can be held.
struct HoldingProxy {
    url: &'static str,
    hold: Arc<AtomicBool>,
}

impl HoldingProxy {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = Box::leak(format!("redis://{}", listener.local_addr().unwrap()).into_boxed_str());
        let hold = Arc::new(AtomicBool::new(false));
        let held = hold.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect("127.0.0.1:6379").await else { continue };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
                });
                let held = held.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match from_server.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        while held.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        if to_client.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Self { url, hold }
    }
}

fn redis(args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn charges(cluster: &Cluster) -> Vec<Value> {
    let raw = redis(&["HGET", &format!("{}snapshot", cluster.redis_prefix), "idx"]);
    serde_json::from_str::<Value>(&raw).ok().and_then(|v| v.as_array().cloned()).unwrap_or_default()
}

/// Starts a capture whose publication Redis runs but whose answer the proxy holds; returns the
/// start's answer and the charges left 3 s later (the proxy still holding).
async fn start_with_a_late_redis_answer(
    settings: fn(&mut buzz_snapshot::Settings),
) -> (Cluster, HoldingProxy, buzz_tests::Community, buzz_core::Keys, (u16, Value), Vec<Value>) {
    let proxy = HoldingProxy::start().await;
    let cluster = Cluster::start_with(ClusterOptions {
        snapshot_redis_url: Some(proxy.url),
        snapshot_settings: Some(settings),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 20, 1).await;
    // The capture's first statement waits on this lock until the reservation is seen and the
    // proxy holds Redis' answers; then the capture runs and its publication reaches Redis.
    let mut locker = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE artifact_current_tags IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locker)
        .await
        .unwrap();
    let hold = proxy.hold.clone();
    let release_when_reserved = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !charges(&cluster).iter().any(|c| c["s"] == "r") {
            assert!(tokio::time::Instant::now() < deadline, "no reservation");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        hold.store(true, Ordering::SeqCst);
        locker.rollback().await.unwrap();
    };
    let (answer, ()) = tokio::join!(
        snap(&cluster, 0, &team, &reader, start(json!({"artifact": "current"}))),
        release_when_reserved
    );
    // The publication did run in Redis (or was refused for a released reservation); give any
    // release time to land, then look at what is charged.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut left = charges(&cluster);
    while !left.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = charges(&cluster);
    }
    (cluster, proxy, team, reader, answer, left)
}

/// The reader's two slots are free: two starts succeed.
async fn both_slots_free(cluster: &Cluster, team: &buzz_tests::Community, reader: &buzz_core::Keys) {
    for g in 0..2 {
        let r = snap(cluster, g, team, reader, start(json!({"artifact": "current"}))).await;
        assert_eq!(r.0, 200, "slot {g}: {}", r.1);
    }
}

fn operation_limit_first(s: &mut buzz_snapshot::Settings) {
    s.operation_timeout_ms = 1000;
    s.redis_timeout_ms = 5000;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_cut_off_by_the_operation_limit_after_publishing_leaves_no_charge() {
    let (cluster, proxy, team, reader, answer, left) =
        start_with_a_late_redis_answer(operation_limit_first).await;
    assert_snapshot_error(&answer, 503, "snapshot_unavailable");
    assert!(left.is_empty(), "the unanswered start is still charged: {left:?}");
    proxy.hold.store(false, Ordering::SeqCst);
    both_slots_free(&cluster, &team, &reader).await;
    cluster.stop().await;
}

fn redis_timeout_first(s: &mut buzz_snapshot::Settings) {
    s.redis_timeout_ms = 300;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_redis_answer_times_out_after_publishing_leaves_no_charge() {
    let (cluster, proxy, team, reader, answer, left) =
        start_with_a_late_redis_answer(redis_timeout_first).await;
    assert_snapshot_error(&answer, 503, "snapshot_unavailable");
    assert!(left.is_empty(), "the unanswered start is still charged: {left:?}");
    proxy.hold.store(false, Ordering::SeqCst);
    both_slots_free(&cluster, &team, &reader).await;
    cluster.stop().await;
}
