//! Benchmark (ignored by default; run it with `scripts/bench-artifacts.sh`): sustained NIP-AR
//! revision throughput and OK latency for create+update chains on a store that already holds
//! `BUZZ_BENCH_SEED` artifacts (default 1 000 000, seeded by SQL), through the in-process cluster
//! (2 gateways, 2 write and 2 query replicas) with write rate limits raised out of the way.
//!
//! Each of `BUZZ_BENCH_CLIENTS` connections (default 128, alternating gateways, one member key each;
//! enough revisions in flight that throughput decides, not one client's latency: at 8 the machine sat
//! a quarter idle)
//! runs a closed loop for `BUZZ_BENCH_SECS` (default 15): create an artifact, then
//! `BUZZ_BENCH_CHAIN` (default 9) updates each naming the previous revision, then the next
//! artifact. Latency is from sending `EVENT` to receiving its `OK`; signing happens before the
//! clock starts. Prints one JSON line.

#![allow(clippy::unwrap_used)]

/// The relay binaries' allocator, so the in-process cluster allocates as they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use buzz_core::{CommunityId, Event, Keys};
use std::time::{Duration, Instant};

use buzz_tests::client::{create_channel, WsClient};
use buzz_tests::helpers::{bench_param, percentile};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use uuid::Uuid;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn revision(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&str>, n: usize) -> Event {
    let mut tags = vec![
        vec!["ar".to_owned(), "1".to_owned()],
        vec!["d".to_owned(), d.to_string()],
        vec!["h".to_owned(), h.to_string()],
        vec!["type".to_owned(), "buzz.task".to_owned()],
        vec!["title".to_owned(), format!("Task {d}")],
        vec!["op".to_owned(), op.to_owned()],
        vec!["status".to_owned(), if n.is_multiple_of(2) { "open" } else { "doing" }.to_owned()],
    ];
    if let Some(prev) = prev {
        tags.push(vec!["prev".to_owned(), prev.to_owned()]);
    }
    keys.sign_new(45010, tags, &json!({"version": 1, "n": n}).to_string())
}

/// `seed` artifacts of one revision each, with their events (no tag rows: a revision's `d` and
/// `h` have none, and multi-character names none at all, `buzz_store::tag_rows`),
/// `artifact_revisions` rows and current-tag index rows (its `h` and `status` tags, with its type), one
/// statement per table in one transaction, each table filled in its primary key's order; from
/// `seed::BULK` on, the tables' secondary indexes are built after the load.
async fn seed(cluster: &Cluster, community: CommunityId, channel: Uuid, author: &str, seed: i64) {
    let mut conn = cluster.pool.acquire().await.unwrap();
    sqlx::query(
        "CREATE TEMP TABLE seed AS SELECT g, gen_random_uuid() AS d, \
             encode(sha256(('seed' || g)::bytea), 'hex') AS id FROM generate_series(1, $1::bigint) g",
    )
    .bind(seed)
    .execute(&mut *conn)
    .await
    .unwrap();
    let tables = ["events", "artifacts", "artifact_revisions", "artifact_current_tags"];
    let deferred = if seed >= buzz_tests::seed::BULK {
        buzz_tests::seed::defer_indexes(&mut conn, &tables).await
    } else {
        Vec::new()
    };
    let sql = [
        "SET LOCAL work_mem = '256MB'",
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
             SELECT $1, id, $3, 45010, 1700000000 + g, $2, '{}' FROM seed ORDER BY id",
        "INSERT INTO artifacts (community_id, d, type, current_revision, home_channel) \
             SELECT $1, d, 'buzz.task', id, $2 FROM seed WHERE $3 <> '' ORDER BY d",
        "INSERT INTO artifact_revisions (community_id, revision_id, d, op, channel_id, accepted_seq) \
             SELECT $1, s.id, s.d, 'create', $2, e.seq FROM seed s \
             JOIN events e ON e.community_id = $1 AND e.id = s.id WHERE $3 <> '' ORDER BY s.id",
        "INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, revision, type) \
             SELECT $1, s.d, t.name, sha256(convert_to(t.value, 'UTF8')), $2, now(), s.id, 'buzz.task' FROM seed s, \
             LATERAL (VALUES ('h', $2::text), ('status', 'open')) \
             AS t(name, value) WHERE $3 <> '' ORDER BY 2, 3, 4",
    ];
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    for (i, statement) in sql.into_iter().enumerate() {
        let q = sqlx::query(statement);
        let q = if i == 0 { q } else { q.bind(community).bind(channel).bind(author) };
        q.execute(&mut *tx).await.unwrap();
    }
    tx.commit().await.unwrap();
    buzz_tests::seed::restore_indexes(&mut conn, &deferred).await;
    for table in tables {
        sqlx::query(&format!("VACUUM ANALYZE {table}")).execute(&mut *conn).await.unwrap();
    }
    sqlx::query("CHECKPOINT").execute(&mut *conn).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark: scripts/bench-artifacts.sh"]
async fn bench_artifact_revisions() {
    let seed_count: i64 = bench_param("BUZZ_BENCH_SEED", 1_000_000);
    let clients: usize = bench_param("BUZZ_BENCH_CLIENTS", 128);
    let secs: u64 = bench_param("BUZZ_BENCH_SECS", 15);
    let chain: usize = bench_param("BUZZ_BENCH_CHAIN", 9);
    let cluster = Cluster::start_with(ClusterOptions {
        gateway_settings: Some(|s| {
            s.rate_conn_per_sec = 1_000_000.0;
            s.rate_conn_burst = 1_000_000;
            s.rate_pubkey_per_min = 100_000_000;
        }),
        // `BUZZ_WRITE_BATCH_LANES` as the services read it (default 1).
        write_settings: Some(|s| s.batch.lanes = bench_param("BUZZ_WRITE_BATCH_LANES", s.batch.lanes)),
        ..Default::default()
    })
    .await;
    let team = cluster.community("bench.test").await;
    let channel = Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let (ok, msg) = owner.publish(&create_channel(&team.owner, channel, "bench", "open")).await;
    assert!(ok, "{msg}");
    let seeded = Instant::now();
    seed(&cluster, team.id, channel, &team.owner.public_hex(), seed_count).await;
    let seed_secs = seeded.elapsed().as_secs_f64();

    let mut sockets = Vec::new();
    for i in 0..clients {
        let keys = cluster.member(&team).await;
        sockets.push((WsClient::authed(cluster.gateways[i % 2], &team.host, &keys).await, keys));
    }
    // scripts/profile-artifacts.sh starts sampling on this line.
    eprintln!("bench: seeded {seed_count} in {seed_secs:.1} s; {clients} connections for {secs} s");
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let tasks: Vec<_> = sockets
        .into_iter()
        .map(|(mut ws, keys)| {
            tokio::spawn(async move {
                let (mut latencies, mut duplicates) = (Vec::new(), 0_u64);
                'run: loop {
                    let d = Uuid::new_v4();
                    let mut prev: Option<String> = None;
                    for n in 0..=chain {
                        if Instant::now() >= deadline {
                            break 'run;
                        }
                        let op = if prev.is_none() { "create" } else { "update" };
                        let event = revision(&keys, op, d, channel, prev.as_deref(), n);
                        let sent = Instant::now();
                        let (ok, msg) = ws.publish(&event).await;
                        latencies.push(sent.elapsed());
                        // `OK true` with `duplicate:`: stored, and answered by a second attempt of
                        // the same request (a gateway hedges a write no replica acknowledged
                        // within 250 ms, docs/design.md "Stalls"); counted, not a failure.
                        assert!(
                            ok && (msg.is_empty() || msg.starts_with("duplicate:")),
                            "revision refused: {msg}"
                        );
                        duplicates += u64::from(!msg.is_empty());
                        prev = Some(event.id.to_string());
                    }
                }
                (latencies, duplicates)
            })
        })
        .collect();
    let (mut latencies, mut duplicates) = (Vec::new(), 0_u64);
    for t in tasks {
        let (l, d) = t.await.unwrap();
        latencies.extend(l);
        duplicates += d;
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let artifacts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM artifacts").fetch_one(&cluster.pool).await.unwrap();
    let report = json!({
        "seeded_artifacts": seed_count,
        "seed_seconds": (seed_secs * 10.0).round() / 10.0,
        "artifacts_after": artifacts,
        "clients": clients,
        "chain": chain + 1,
        "seconds": (elapsed * 100.0).round() / 100.0,
        "revisions": latencies.len(),
        "answered_duplicate": duplicates,
        "revisions_per_second": (latencies.len() as f64 / elapsed * 10.0).round() / 10.0,
        "ok_latency_ms": {
            "p50": (ms(percentile(&latencies, 50)) * 100.0).round() / 100.0,
            "p99": (ms(percentile(&latencies, 99)) * 100.0).round() / 100.0,
            "max": (ms(percentile(&latencies, 100)) * 100.0).round() / 100.0,
        },
    });
    println!("BENCH {report}");
    cluster.stop().await;
}
