//! Benchmark of community export and import (scripts/bench-export.sh; docs/benchmarks.md):
//! `BUZZ_BENCH_EVENTS` signed kind-9 messages (default 1,000,000) in 100 channels, seeded by SQL
//! as the write path stores them (event and its `h` tag row), exported with `buzz operator
//! export` and imported into a second deployment (its own database and relay key) with `buzz
//! operator import`. Reports events/s of each and two peak RSS figures: the `buzz` CLI's
//! (`/usr/bin/time -v`) and this test process's, which runs the whole in-process cluster
//! (policy-service included), its high-water mark reset before each phase.
//!
//! Ignored by default: `cargo test --release -p buzz-cli --test export_import_bench -- --ignored`.

#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::Instant;

use buzz_core::Keys;
use buzz_tests::helpers::bench_param;
use buzz_tests::{Cluster, ClusterOptions, Community};
use serde_json::json;
use uuid::Uuid;

const CHANNELS: usize = 100;
const BATCH: usize = 10_000;

fn options() -> ClusterOptions {
    ClusterOptions { gateways: 1, writers: 1, queriers: 1, snapshots: 1, ..ClusterOptions::default() }
}

/// This process's peak RSS in KiB since the last [`reset_peak`].
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn reset_peak() {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
}

/// Seeds `n` messages in `CHANNELS` open channels of `team`, by `authors` members.
async fn seed(cluster: &Cluster, team: &Community, n: usize) {
    let authors: Vec<Keys> = (0..10).map(|_| Keys::generate()).collect();
    let pool = &cluster.pool;
    let keys: Vec<String> = authors.iter().map(Keys::public_hex).collect();
    sqlx::query("INSERT INTO community_members (community_id, pubkey, role) SELECT $1, k, 'member' FROM unnest($2::text[]) k")
        .bind(team.id)
        .bind(&keys)
        .execute(pool)
        .await
        .unwrap();
    let channels: Vec<Uuid> = (0..CHANNELS).map(|_| Uuid::new_v4()).collect();
    sqlx::query(
        "INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by) \
         SELECT $1, c, 'bench', 'open', 'stream', $2 FROM unnest($3::uuid[]) c",
    )
    .bind(team.id)
    .bind(team.owner.public_hex())
    .bind(&channels)
    .execute(pool)
    .await
    .unwrap();
    let now = buzz_core::unix_now();
    let mut done = 0;
    while done < n {
        let size = BATCH.min(n - done);
        let (mut ids, mut pubkeys, mut raws, mut chans, mut times) = (vec![], vec![], vec![], vec![], vec![]);
        for i in done..done + size {
            let ch = channels[i % CHANNELS];
            let at = now - i64::try_from(n - i).unwrap();
            let e = authors[i % authors.len()].sign(buzz_core::UnsignedEvent {
                pubkey: String::new(),
                created_at: at,
                kind: 9,
                tags: vec![vec!["h".into(), ch.to_string()]],
                content: format!("message {i} about the payment timeout"),
            });
            ids.push(e.id.to_string());
            pubkeys.push(e.pubkey.to_string());
            raws.push(e.to_json());
            chans.push(ch);
            times.push(at);
        }
        sqlx::query(
            "WITH e AS (INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
                 SELECT $1, i, p, 9, t, c, r FROM unnest($2::text[], $3::text[], $4::bigint[], $5::uuid[], $6::text[]) \
                 AS u(i, p, t, c, r) RETURNING id, channel_id, created_at) \
             INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
             SELECT $1, id, 'h', sha256(convert_to(channel_id::text, 'UTF8')), created_at FROM e",
        )
        .bind(team.id)
        .bind(&ids)
        .bind(&pubkeys)
        .bind(&times)
        .bind(&chans)
        .bind(&raws)
        .execute(pool)
        .await
        .unwrap();
        done += size;
    }
    sqlx::query("ANALYZE").execute(pool).await.unwrap();
}

/// Runs `buzz operator <args>` under `/usr/bin/time -v`: seconds and the CLI's peak RSS (KiB).
fn timed_buzz(cluster: &Cluster, args: &[String]) -> (f64, u64) {
    let started = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(env!("CARGO_BIN_EXE_buzz"))
        .arg("operator")
        .args(args)
        .args([
            "--url",
            &format!("http://{}", cluster.policy),
            "--secret-key",
            &cluster.operator.secret_hex(),
        ])
        .output()
        .unwrap();
    let secs = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let rss = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes): "))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (secs, rss)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: scripts/bench-export.sh"]
async fn bench_export_import() {
    let n: usize = bench_param("BUZZ_BENCH_EVENTS", 1_000_000);
    let source = Cluster::start_with(options()).await;
    let team = source.community("bench.test").await;
    let seeding = Instant::now();
    seed(&source, &team, n).await;
    eprintln!("seeded {n} events in {:.1}s", seeding.elapsed().as_secs_f64());
    let file = std::env::temp_dir().join(format!("buzz-bench-{}.ndjson", Uuid::new_v4()));
    let path = file.display().to_string();

    reset_peak();
    let args =
        ["export", "--quiet", "--community-id", &team.id.to_string(), "--out", &path].map(str::to_owned);
    let (export_secs, export_cli_rss) = tokio::task::block_in_place(|| timed_buzz(&source, &args));
    let export_relay_rss = peak_kib();
    let bytes = std::fs::metadata(&file).unwrap().len();

    let target = Cluster::start_with(options()).await;
    reset_peak();
    let args = ["import".to_owned(), path.clone()];
    let (import_secs, import_cli_rss) = tokio::task::block_in_place(|| timed_buzz(&target, &args));
    let import_relay_rss = peak_kib();
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events").fetch_one(&target.pool).await.unwrap();
    assert_eq!(stored, i64::try_from(n).unwrap(), "every message imported");
    std::fs::remove_file(&file).ok();
    let per_sec = |secs: f64| (n as f64 / secs).round();
    let report = json!({
        "events": n, "file_bytes": bytes,
        "export": {"seconds": export_secs, "events_per_s": per_sec(export_secs),
                   "cli_peak_rss_kib": export_cli_rss, "relay_process_peak_rss_kib": export_relay_rss},
        "import": {"seconds": import_secs, "events_per_s": per_sec(import_secs),
                   "cli_peak_rss_kib": import_cli_rss, "relay_process_peak_rss_kib": import_relay_rss},
    });
    println!("BENCH {report}");
    target.stop().await;
    source.stop().await;
}
