//! Benchmark (ignored by default; run it with `scripts/bench-snapshot.sh`): a NIP-AR snapshot of
//! `BUZZ_BENCH_ARTIFACTS` (default 50 000) readable artifacts seeded by SQL: start, every page,
//! 500 bodies in batches of 100, completion, timed through the gateway; and the Redis memory the
//! capture takes. Prints one `BENCH {json}` line.

#![allow(clippy::unwrap_used)]

/// The relay binaries' allocator, so the in-process cluster allocates as they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use buzz_tests::snapshot::*;
use buzz_tests::Cluster;
use serde_json::{json, Value};

async fn used_memory() -> i64 {
    let out = std::process::Command::new("redis-cli").args(["INFO", "memory"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines().find_map(|l| l.strip_prefix("used_memory:")).unwrap().trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench-snapshot.sh"]
async fn bench_snapshot_capture() {
    let n: i64 = std::env::var("BUZZ_BENCH_ARTIFACTS").ok().and_then(|v| v.parse().ok()).unwrap_or(50_000);
    let cluster = Cluster::start().await;
    let team = cluster.community("bench.test").await;
    let reader = cluster.member(&team).await;
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), n, 1).await;
    let key = format!("{}snapshot", cluster.redis_prefix);
    let before = used_memory().await;
    let t = Instant::now();
    let first = snap(&cluster, 0, &team, &reader, start(json!({"artifact": "current"}))).await;
    let start_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(first.0, 200, "{}", first.1);
    let token = first.1["token"].clone();
    let mut ids: Vec<String> = entries(&first.1).into_iter().map(|e| e.1).collect();
    let mut cursor = first.1["nextToken"].clone();
    let (mut pages, t) = (1u32, Instant::now());
    while cursor != Value::Null {
        let r = snap(&cluster, (pages % 2) as usize, &team, &reader, page(&token, &cursor)).await;
        assert_eq!(r.0, 200, "{}", r.1);
        ids.extend(entries(&r.1).into_iter().map(|e| e.1));
        cursor = r.1["nextToken"].clone();
        pages += 1;
    }
    let pages_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(ids.len() as i64, n);
    let t = Instant::now();
    for batch in ids.chunks(100).take(5) {
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        let r = snap(&cluster, 0, &team, &reader, bodies(&token, &refs)).await;
        assert_eq!(r.0, 200, "{}", r.1);
    }
    let bodies_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t = Instant::now();
    let done = snap(&cluster, 1, &team, &reader, complete(&token)).await;
    let complete_ms = t.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(done.0, 200, "{}", done.1);
    let out = std::process::Command::new("redis-cli").args(["MEMORY", "USAGE", &key]).output().unwrap();
    let hash_bytes: i64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(-1);
    let report = json!({
        "artifacts": n, "pages": pages, "start_ms": start_ms, "pages_ms": pages_ms,
        "page_ms_avg": pages_ms / f64::from(pages - 1).max(1.0), "bodies_500_ms": bodies_ms,
        "complete_ms": complete_ms, "redis_hash_bytes": hash_bytes, "redis_used_memory_delta": used_memory().await - before,
    });
    println!("BENCH {report}");
    cluster.stop().await;
}
