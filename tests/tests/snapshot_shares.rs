//! Each community's share of the NIP-AR snapshot quotas (issue 37 item 5: "One community takes
//! every snapshot slot"). The spec's relay-wide limits still hold ("Shared state is limited to 32
//! active captures and 64 MiB of charged snapshot storage. Each reader has at most two captures
//! per community. Each process runs at most four snapshot operations at once."); within them one
//! community holds at most its share (by default half) of the captures, the charged bytes and
//! each process's operations, so that another community can always start a capture while the
//! relay is below its totals.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_tests::snapshot::*;
use buzz_tests::{Cluster, ClusterOptions, Community};
use serde_json::{json, Value};

fn all() -> Value {
    start(json!({"artifact": "current"}))
}

/// The community of every charge in the cluster's snapshot hash, in order.
fn charged_communities(cluster: &Cluster) -> Vec<String> {
    let key = format!("{}snapshot", cluster.redis_prefix);
    let out = std::process::Command::new("redis-cli").args(["HGET", &key, "idx"]).output().unwrap();
    let raw = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if raw.is_empty() {
        return Vec::new();
    }
    let idx: Value = serde_json::from_str(&raw).unwrap();
    idx.as_array().unwrap().iter().map(|c| c["c"].as_str().unwrap().to_owned()).collect()
}

/// The demonstration: an owner adds 16 keys that each start 2 empty captures. The
/// community gets its share (16) and no more; meanwhile it keeps sending starts from four
/// clients, and every start of a second community (3 readers, 2 each, through both gateways)
/// succeeds at the first try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_community_at_its_share_of_captures_never_stops_another_from_starting() {
    let cluster = Arc::new(Cluster::start().await);
    let (noisy, quiet) = (cluster.community("noisy.test").await, cluster.community("quiet.test").await);
    buzz_tests::seed::artifact_corpus(&cluster, quiet.id, &quiet.owner.public_hex(), 20, 1).await;
    let mut keys = Vec::new();
    for _ in 0..16 {
        keys.push(cluster.member(&noisy).await);
    }
    let mut registered = 0;
    for (i, key) in keys.iter().enumerate() {
        for g in 0..2 {
            let r = snap(&cluster, g, &noisy, key, all()).await;
            match r.0 {
                200 => registered += 1,
                _ => assert_snapshot_error(&r, 503, "snapshot_unavailable"),
            }
            assert!(i < 8 || r.0 == 503, "key {i}: a start past the community's share: {}", r.1);
        }
    }
    assert_eq!(registered, 16, "the noisy community holds exactly its share");
    // The noisy community keeps at it while the quiet one starts its captures.
    let stop = Arc::new(AtomicBool::new(false));
    let noise = hammer_starts(&cluster, &noisy, &keys, 4, &stop);
    let mut times = Vec::new();
    for i in 0..3 {
        let reader = cluster.member(&quiet).await;
        for g in 0..2 {
            let t = Instant::now();
            let r = snap(&cluster, (i + g) % 2, &quiet, &reader, all()).await;
            times.push(t.elapsed());
            assert_eq!(r.0, 200, "quiet reader {i} start {g}: {}", r.1);
            assert!(!entries(&r.1).is_empty());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (mut sent, mut other) = (0, 0);
    for task in noise {
        let (s, o) = task.await.unwrap();
        (sent, other) = (sent + s, other + o);
    }
    assert_eq!(other, 0, "every one of the noisy community's {sent} further starts was refused");
    assert!(sent > 0);
    let communities = charged_communities(&cluster);
    let count = |c: &Community| communities.iter().filter(|x| **x == c.id.to_string()).count();
    assert_eq!((count(&noisy), count(&quiet)), (16, 6));
    times.sort();
    println!("quiet starts beside a noisy community at its share: {times:?} ({sent} noisy starts refused)");
    Arc::try_unwrap(cluster).ok().expect("every task has ended").stop().await;
}

fn small_storage(s: &mut buzz_snapshot::Settings) {
    // A community's share is half of it: 30 kB, room for one capture of 100 entries (24 kB).
    s.max_charged_bytes = 60_000;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_community_at_its_share_of_charged_bytes_leaves_the_rest_to_another() {
    let cluster = Cluster::start_with(ClusterOptions {
        snapshot_settings: Some(small_storage),
        ..ClusterOptions::default()
    })
    .await;
    let mut teams = Vec::new();
    for host in ["noisy.test", "quiet.test", "third.test"] {
        let team = cluster.community(host).await;
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 100, 1).await;
        teams.push(team);
    }
    let [noisy, quiet, third] = &teams[..] else { unreachable!() };
    let (a, b) = (cluster.member(noisy).await, cluster.member(noisy).await);
    let r = snap(&cluster, 0, noisy, &a, all()).await;
    assert_eq!(r.0, 200, "{}", r.1);
    // A second capture of the same community is over its share (48 kB of 30 kB), though the
    // relay holds 24 kB of 60 kB; it leaves nothing behind.
    assert_snapshot_error(&snap(&cluster, 1, noisy, &b, all()).await, 503, "snapshot_unavailable");
    assert_eq!(charged_communities(&cluster).len(), 1);
    let r = snap(&cluster, 1, quiet, &cluster.member(quiet).await, all()).await;
    assert_eq!(r.0, 200, "another community's capture fits beside it: {}", r.1);
    // The relay's total still holds: a third community, within its share, is over it (72 kB).
    let r = snap(&cluster, 0, third, &cluster.member(third).await, all()).await;
    assert_snapshot_error(&r, 503, "snapshot_unavailable");
    assert_eq!(charged_communities(&cluster), [noisy.id.to_string(), quiet.id.to_string()]);
    cluster.stop().await;
}

/// The per-process operation limit is shared too: a community with a request in each of a
/// process's four slots would answer every other community's start `503` at once. Here a lock on
/// `artifact_revisions` (which a `complete` recheck reads and a `start` does not) keeps each of the
/// noisy community's `complete`s waiting for the two-second statement limit; it sends eight at
/// once (a refused one again after 20 ms, as a client backs off), more than both replicas' slots,
/// while the quiet community starts captures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_community_filling_the_operation_slots_never_stops_another_from_starting() {
    let cluster = Arc::new(Cluster::start().await);
    let (noisy, quiet) = (cluster.community("noisy.test").await, cluster.community("quiet.test").await);
    for team in [&noisy, &quiet] {
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 20, 1).await;
    }
    let reader = cluster.member(&noisy).await;
    let first = snap(&cluster, 0, &noisy, &reader, all()).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let token = first.1["token"].clone();
    let mut lock = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE artifact_revisions IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let completes: Vec<_> = (0..8)
        .map(|i| {
            let (cluster, noisy, reader, stop) =
                (cluster.clone(), noisy.clone(), reader.clone(), stop.clone());
            let token = token.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let _ = snap(&cluster, i % 2, &noisy, &reader, complete(&token)).await;
                    if t.elapsed() < Duration::from_millis(500) {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            })
        })
        .collect();
    // Until the noisy community holds every slot it may: its share (2) in each replica (before
    // shares: all four of each).
    let waiting = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.relation = 'artifact_revisions'::regclass AND NOT l.granted AND a.query LIKE '%unnest(%'",
        )
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while waiting().await < 4 {
        assert!(Instant::now() < deadline, "the noisy completes never got going");
        tokio::task::yield_now().await;
    }
    let mut times = Vec::new();
    for i in 0..4 {
        let quiet_reader = cluster.member(&quiet).await;
        let t = Instant::now();
        let r = snap(&cluster, i % 2, &quiet, &quiet_reader, all()).await;
        times.push(t.elapsed());
        assert_eq!(r.0, 200, "quiet start {i} beside the noisy completes: {}", r.1);
    }
    let held = waiting().await;
    assert!(held <= 4, "the noisy community held {held} operations in two replicas");
    stop.store(true, Ordering::Relaxed);
    lock.rollback().await.unwrap();
    for c in completes {
        c.await.unwrap();
    }
    println!("quiet starts beside a noisy community at its share of operations: {times:?}");
    Arc::try_unwrap(cluster).ok().expect("every task has ended").stop().await;
}
