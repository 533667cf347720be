//! Benchmark (ignored by default; run it with `scripts/bench-snapshot-shares.sh`): NIP-AR snapshot
//! starts of a quiet community while a noisy one holds its whole share of the relay's captures
//! (issue 37 item 5), through the in-process cluster (two gateways, two snapshot replicas).
//!
//! 1. A first quiet community, alone: 4 readers start 2 captures each (`BUZZ_BENCH_ARTIFACTS`
//!    artifacts, default 1 000), one after the other through alternating gateways: the baseline.
//! 2. The attack: the noisy community's owner adds 16 keys that each start 2 empty
//!    captures (it gets its share, 16; the other 16 are refused).
//! 3. While `BUZZ_BENCH_HAMMERS` clients (default 8) of the noisy community keep sending starts
//!    as fast as they are answered, a second quiet community starts its 8 captures like the first.
//!
//! Prints one `BENCH {json}` line: each quiet phase's start latencies and failures, and the
//! noisy community's captures and refused starts. The three communities end at the relay's 32.

#![allow(clippy::unwrap_used)]

/// The relay binaries' allocator, so the in-process cluster allocates as they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use buzz_tests::helpers::{bench_param, percentile};
use buzz_tests::snapshot::*;
use buzz_tests::{Cluster, Community};
use serde_json::{json, Value};

/// 4 readers of `team` start 2 captures each; their latencies (ms, sorted) and the failures.
async fn quiet_starts(cluster: &Cluster, team: &Community) -> (Vec<f64>, Vec<Value>) {
    let (mut times, mut failures) = (Vec::new(), Vec::new());
    for i in 0..4 {
        let reader = cluster.member(team).await;
        for g in 0..2 {
            let t = Instant::now();
            let r = snap(cluster, (i + g) % 2, team, &reader, start(json!({"artifact": "current"}))).await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if r.0 != 200 {
                failures.push(json!([r.0, r.1]));
            }
        }
    }
    times.sort_by(f64::total_cmp);
    (times, failures)
}

fn figures((times, failures): &(Vec<f64>, Vec<Value>)) -> Value {
    json!({
        "starts": times.len(), "failures": failures,
        "p50_ms": percentile(times, 50), "max_ms": percentile(times, 100),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench-snapshot-shares.sh"]
async fn bench_snapshot_noisy_neighbour() {
    let hammers: usize = bench_param("BUZZ_BENCH_HAMMERS", 8);
    let artifacts: i64 = bench_param("BUZZ_BENCH_ARTIFACTS", 1000);
    let cluster = Arc::new(Cluster::start().await);
    let noisy = cluster.community("noisy.test").await;
    let (alone, beside) = (cluster.community("alone.test").await, cluster.community("beside.test").await);
    for team in [&alone, &beside] {
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), artifacts, 1).await;
    }
    let baseline = quiet_starts(&cluster, &alone).await;

    let mut keys = Vec::new();
    for _ in 0..16 {
        keys.push(cluster.member(&noisy).await);
    }
    let (mut registered, mut refused) = (0, 0);
    for key in &keys {
        for g in 0..2 {
            match snap(&cluster, g, &noisy, key, start(json!({"artifact": "current"}))).await.0 {
                200 => registered += 1,
                _ => refused += 1,
            }
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let noise = hammer_starts(&cluster, &noisy, &keys, hammers, &stop);
    let during = quiet_starts(&cluster, &beside).await;
    stop.store(true, Ordering::Relaxed);
    let noise_seconds = started.elapsed().as_secs_f64();
    let (mut sent, mut not_refused) = (0, 0);
    for task in noise {
        let (s, o) = task.await.unwrap();
        (sent, not_refused) = (sent + s, not_refused + o);
    }
    println!(
        "BENCH {}",
        json!({
            "artifacts_per_quiet_community": artifacts, "hammers": hammers,
            "quiet_alone": figures(&baseline),
            "noisy": {"captures": registered, "refused_of_32": refused},
            "quiet_beside_noisy": figures(&during),
            "noise": {"starts": sent, "not_refused": not_refused, "starts_per_s": sent as f64 / noise_seconds},
        })
    );
    Arc::try_unwrap(cluster).ok().expect("every task has ended").stop().await;
}
