//! Benchmark (ignored by default; run it with `scripts/bench-queries.sh`): first-page latency of a
//! NIP-AR current-state query on `#type` + `#project` over WebSocket REQ, through the in-process
//! cluster, on a store seeded by SQL with `BUZZ_BENCH_ARTIFACTS` artifacts (default 200 000) in
//! `BUZZ_BENCH_CHANNELS` channels (default 500), of which a quarter (open channels) are readable by
//! the reader (50 000 artifacts) and the rest private channels the reader is not in. Half the
//! artifacts are `buzz.task`, half `buzz.note`; each carries one of 100 projects. Each of
//! `BUZZ_BENCH_QUERIES` (default 300) queries asks for a random project's tasks, `limit` 100,
//! timed from sending `REQ` to `EOSE`. Prints one `BENCH {json}` line and the query plan.

#![allow(clippy::unwrap_used)]

use std::time::Instant;

use buzz_tests::client::WsClient;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use uuid::Uuid;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

const PROJECTS: i64 = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench-queries.sh"]
async fn bench_current_query_first_page() {
    let artifacts: i64 = env("BUZZ_BENCH_ARTIFACTS", 200_000);
    let channels: i64 = env("BUZZ_BENCH_CHANNELS", 500);
    let queries: usize = env("BUZZ_BENCH_QUERIES", 300);
    let cluster = Cluster::start_with(ClusterOptions::default()).await;
    let team = cluster.community("bench.test").await;
    let reader = cluster.member(&team).await;
    let author = reader.public_hex();
    let started = Instant::now();
    // Channel i is open (readable) when i % 4 = 0, else private without the reader.
    sqlx::query(
        "INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by) \
         SELECT $1, md5('ch' || i)::uuid, 'c' || i, CASE WHEN i % 4 = 0 THEN 'open' ELSE 'private' END, \
                'stream', $2 FROM generate_series(0, $3 - 1) i",
    )
    .bind(team.id)
    .bind(&author)
    .bind(channels)
    .execute(&cluster.pool)
    .await
    .unwrap();
    // Artifact g: channel g % channels, type by (g / 3) parity, project (g / 7) % 100: independent.
    let seed = [
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         SELECT $1, encode(sha256(('a' || g)::bytea), 'hex'), $2, 45010, 1700000000 + g, \
                md5('ch' || (g % $4))::uuid, \
                json_build_object('id', encode(sha256(('a' || g)::bytea), 'hex'), 'pubkey', $2, \
                  'created_at', 1700000000 + g, 'kind', 45010, 'tags', '[]'::json, 'content', '', \
                  'sig', repeat('0', 128))::text \
         FROM generate_series(1, $3) g",
        "INSERT INTO artifacts (community_id, d, type, current_revision, home_channel, updated_at) \
         SELECT $1, md5('d' || g)::uuid, CASE WHEN (g / 3) % 2 = 0 AND $4 > 0 THEN 'buzz.task' ELSE 'buzz.note' END, \
                encode(sha256(('a' || g)::bytea), 'hex'), md5('ch' || (g % $4))::uuid, \
                now() - make_interval(secs => g) \
         FROM generate_series(1, $3) g WHERE $2 <> ''",
        "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT $1, encode(sha256(('a' || g)::bytea), 'hex'), 'type', \
                sha256((CASE WHEN (g / 3) % 2 = 0 AND $4 > 0 THEN 'buzz.task' ELSE 'buzz.note' END)::bytea), \
                1700000000 + g \
         FROM generate_series(1, $3) g WHERE $2 <> ''",
        "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT $1, encode(sha256(('a' || g)::bytea), 'hex'), 'project', \
                sha256(md5('p' || ((g / 7) % 100))::uuid::text::bytea), 1700000000 + g \
         FROM generate_series(1, $3) g WHERE $2 <> '' AND $4 > 0",
    ];
    for sql in seed {
        sqlx::query(sql)
            .bind(team.id)
            .bind(&author)
            .bind(artifacts)
            .bind(channels)
            .execute(&cluster.pool)
            .await
            .unwrap();
    }
    cluster.index_seeded_artifacts(team.id).await;
    // A settled table, as autovacuum leaves it: the visibility map lets index-only scans skip the heap.
    sqlx::query("VACUUM ANALYZE").execute(&cluster.pool).await.unwrap();
    let seeded = started.elapsed();
    let readable: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM artifacts a JOIN channels c ON c.community_id = a.community_id \
         AND c.id = a.home_channel WHERE c.visibility = 'open'",
    )
    .fetch_one(&cluster.pool)
    .await
    .unwrap();

    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &reader).await;
    let projects: Vec<String> =
        sqlx::query_scalar("SELECT md5('p' || i)::uuid::text FROM generate_series(0, $1 - 1) i ORDER BY i")
            .bind(PROJECTS)
            .fetch_all(&cluster.pool)
            .await
            .unwrap();
    // The plan of the very statement the query-service runs (same builder, same binds).
    let filter: buzz_core::Filter = serde_json::from_value(
        json!({"artifact": "current", "#type": ["buzz.task"], "#project": [projects[7]], "limit": 100}),
    )
    .unwrap();
    let reader_key = reader.public_hex();
    let r = buzz_query::sql::Reader { community: team.id, pubkey: &reader_key, channel_ids: None };
    let qb = buzz_query::artifacts::select(buzz_query::artifacts::Form::Current, &r, &filter, 100, 0);
    let hash = buzz_store::tag_value_hash;
    let mut tx = cluster.pool.begin().await.unwrap();
    sqlx::query("SELECT set_config('random_page_cost', '1.1', true)").execute(&mut *tx).await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, BUFFERS) {}", qb.sql()))
        .bind(team.id)
        .bind(&reader_key)
        .bind(None::<Vec<Uuid>>)
        .bind("project")
        .bind(vec![hash(&projects[7])])
        .bind("type")
        .bind(vec![hash("buzz.task")])
        .bind(100i64)
        .bind(0i64)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    println!("PLAN\n{}", plan.join("\n"));
    let mut times = Vec::with_capacity(queries);
    let mut rows = 0usize;
    for i in 0..queries {
        let filter = json!({
            "artifact": "current", "#type": ["buzz.task"], "#project": [projects[(i * 37) % projects.len()]], "limit": 100
        });
        let t = Instant::now();
        let r = ws.req(&format!("q{i}"), &[filter]).await;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        if i < 5 {
            eprintln!("query {i}: {:.1} ms, {} rows", times[i], r.events.len());
        }
        assert!(r.closed.is_none(), "{:?}", r.closed);
        rows += r.events.len();
        ws.send_json(&json!(["CLOSE", format!("q{i}")])).await;
    }
    // The same statements alone, as the query-service runs them (its transaction settings, its
    // SQL builder), without the bus and the WebSocket.
    let mut sql_times = Vec::with_capacity(queries);
    for i in 0..queries {
        let filter: buzz_core::Filter = serde_json::from_value(json!({
            "artifact": "current", "#type": ["buzz.task"], "#project": [projects[(i * 37) % projects.len()]]
        }))
        .unwrap();
        let t = Instant::now();
        let mut tx = cluster.pool.begin().await.unwrap();
        sqlx::query(
            "SELECT set_config('statement_timeout', '2000ms', true), \
                    set_config('transaction_read_only', 'on', true), \
                    set_config('plan_cache_mode', 'force_custom_plan', true), \
                    set_config('random_page_cost', '1.1', true)",
        )
        .execute(&mut *tx)
        .await
        .unwrap();
        let mut qb = buzz_query::artifacts::select(buzz_query::artifacts::Form::Current, &r, &filter, 100, 0);
        let page: Vec<(String, String)> = qb.build_query_as().fetch_all(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        sql_times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(page.len(), 100);
    }
    sql_times.sort_by(f64::total_cmp);
    let sql_pct = |p: usize| sql_times[(sql_times.len() * p).div_ceil(100).saturating_sub(1)];
    times.sort_by(f64::total_cmp);
    // Nearest-rank percentile: the ceil(n * p / 100)-th smallest.
    let pct = |p: usize| times[(times.len() * p).div_ceil(100).saturating_sub(1)];
    println!(
        "BENCH {}",
        json!({
            "artifacts": artifacts, "channels": channels, "readable_artifacts": readable,
            "queries": queries, "rows_per_page": rows as f64 / queries as f64,
            "seed_seconds": seeded.as_secs_f64(),
            "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99), "max_ms": pct(100),
            "sql_p50_ms": sql_pct(50), "sql_p99_ms": sql_pct(99), "sql_max_ms": sql_pct(100),
        })
    );
    cluster.stop().await;
}
