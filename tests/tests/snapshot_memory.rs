//! NIP-AR snapshot charges against Redis' own accounting: "Shared state is limited to 32 active
//! captures and 64 MiB of charged snapshot storage." The charge of a capture must be what Redis
//! holds for it (`MEMORY USAGE` of the one hash, exact), not only its names and values: a large
//! capture is mostly small body records, whose per-field overhead is most of their memory.

#![allow(clippy::unwrap_used)]

use buzz_tests::snapshot::*;
use buzz_tests::Cluster;
use serde_json::{json, Value};

fn redis(args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// One capture of `n` seeded artifacts on a cluster of its own: (charged, held by Redis).
async fn charge_and_memory(n: i64) -> (i64, i64) {
    // A cluster per size: the corpus seeding reuses ids per community, and bulk loads into a
    // database that already holds another corpus are far slower.
    let cluster = Cluster::start().await;
    let key = format!("{}snapshot", cluster.redis_prefix);
    let team = cluster.community("team.test").await;
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), n, 1).await;
    let reader = cluster.member(&team).await;
    assert_eq!(redis(&["EXISTS", &key]), "0");
    let r = snap(&cluster, 0, &team, &reader, start(json!({"artifact": "current"}))).await;
    assert_eq!(r.0, 200, "{}", r.1);
    let held = redis(&["MEMORY", "USAGE", &key, "SAMPLES", "0"]).parse::<i64>().unwrap();
    let idx: Value = serde_json::from_str(&redis(&["HGET", &key, "idx"])).unwrap();
    let charged = idx[0]["b"].as_i64().unwrap();
    cluster.stop().await;
    (charged, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charge_of_a_capture_is_what_redis_holds_for_it_at_1k_10k_and_50k_artifacts() {
    for n in [1_000, 10_000, 50_000] {
        let (charged, held) = charge_and_memory(n).await;
        let ratio = charged as f64 / held as f64;
        eprintln!("{n} artifacts: charged {charged} B, Redis holds {held} B (ratio {ratio:.3})");
        assert!(charged >= held, "{n} artifacts: charged {charged} B but Redis holds {held} B");
        assert!(ratio <= 1.25, "{n} artifacts: charged {charged} B for {held} B held");
    }
}
