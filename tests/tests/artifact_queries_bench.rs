//! Benchmark (ignored by default; run it with `scripts/bench-queries.sh`): first-page latency of a
//! NIP-AR current-state query on `#type` + `#project` over WebSocket REQ, through the in-process
//! cluster, on a store seeded by SQL with `BUZZ_BENCH_ARTIFACTS` artifacts (default 1 000 000) in
//! `BUZZ_BENCH_CHANNELS` channels (default 500), of which a quarter (open channels) are readable by
//! the reader (a quarter of the artifacts) and the rest private channels the reader is not in. Half the
//! artifacts are `buzz.task`, half `buzz.note`; each carries one of 100 projects. After 20
//! warm-up queries that match nothing (timed apart), each of
//! `BUZZ_BENCH_QUERIES` (default 300) queries asks for a random project's tasks, `limit` 100,
//! timed from sending `REQ` to `EOSE`. Prints one `BENCH {json}` line and the query plan.

#![allow(clippy::unwrap_used)]

/// The relay binaries' allocator, so the in-process cluster allocates as they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use buzz_tests::client::WsClient;
use buzz_tests::helpers::{bench_param, percentile};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench-queries.sh"]
async fn bench_current_query_first_page() {
    let artifacts: i64 = bench_param("BUZZ_BENCH_ARTIFACTS", 1_000_000);
    let channels: i64 = bench_param("BUZZ_BENCH_CHANNELS", 500);
    let queries: usize = bench_param("BUZZ_BENCH_QUERIES", 300);
    let opts =
        ClusterOptions { gateway_settings: Some(buzz_tests::helpers::unmetered_reads), ..Default::default() };
    let cluster = Cluster::start_with(opts).await;
    let team = cluster.community("bench.test").await;
    let reader = cluster.member(&team).await;
    let author = reader.public_hex();
    let started = Instant::now();
    let projects = buzz_tests::seed::artifact_corpus(&cluster, team.id, &author, artifacts, channels).await;
    let seeded = started.elapsed();
    let readable_artifacts: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM artifacts a JOIN channels c ON c.community_id = a.community_id \
         AND c.id = a.home_channel WHERE c.visibility = 'open'",
    )
    .fetch_one(&cluster.pool)
    .await
    .unwrap();

    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &reader).await;
    // The plan of the very statement the query-service runs (same builder, same binds).
    let filter: buzz_core::Filter = serde_json::from_value(
        json!({"artifact": "current", "#type": ["buzz.task"], "#project": [projects[7]], "limit": 100}),
    )
    .unwrap();
    let reader_key = reader.public_hex();
    let r = buzz_query::sql::Reader { community: team.id, pubkey: &reader_key, channel_ids: None };
    let querier = buzz_query::Querier {
        pool: cluster.pool.clone(),
        limits: buzz_core::Limits::default(),
        statement_timeout_ms: 2000,
        control: None,
    };
    let (mut tx, readable_ids) = querier.open(&r, 2000, true).await.unwrap();
    let mut qb = buzz_query::artifacts::explain_select(
        buzz_query::artifacts::Form::Current,
        &r,
        &readable_ids,
        &filter,
        100,
        0,
    );
    let plan: Vec<String> = qb.build_query_scalar().fetch_all(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    println!("PLAN\n{}", plan.join("\n"));
    // Warm-up, reported apart: REQs for a project no artifact has open the query-services'
    // database connections first (a fresh PostgreSQL backend loads its catalog caches on its first
    // statements, and sqlx prepares each statement once per connection: 10-14 ms for the very
    // first query, docs/benchmarks.md), so that the timed pass measures the query, not the
    // replicas' start. They read no row of the corpus: every page below still meets a cold cache.
    let mut warmup = Vec::with_capacity(20);
    for i in 0..20 {
        let filter = json!({
            "artifact": "current", "#type": ["buzz.task"], "#project": ["warm-up: no artifact has it"], "limit": 100
        });
        let t = Instant::now();
        let r = ws.req(&format!("w{i}"), &[filter]).await;
        warmup.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(r.closed.is_none(), "{:?}", r.closed);
        assert!(r.events.is_empty(), "the warm-up matched an artifact");
        ws.send_json(&json!(["CLOSE", format!("w{i}")])).await;
    }
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
        let (mut tx, readable_ids) = querier.open(&r, 2000, true).await.unwrap();
        let mut qb = buzz_query::artifacts::select(
            buzz_query::artifacts::Form::Current,
            &r,
            &readable_ids,
            &filter,
            100,
            0,
        );
        let page: Vec<(String, String)> = qb.build_query_as().fetch_all(&mut *tx).await.unwrap();
        tx.commit().await.unwrap();
        sql_times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(page.len(), 100);
    }
    // Other shapes, REQ to EOSE, so that no plan is pathological: an unselective tag alone, no tag
    // at all, three values of one tag (OR, de-duplicated), and a deep page.
    let shapes = [
        ("type_only", json!({"artifact": "current", "#type": ["buzz.task"], "limit": 100})),
        ("untagged", json!({"artifact": "current", "limit": 100})),
        (
            "three_projects",
            json!({"artifact": "current", "#project": [projects[1], projects[2], projects[3]], "limit": 100}),
        ),
        ("offset_1000", json!({"artifact": "current", "#type": ["buzz.task"], "limit": 100, "offset": 1000})),
    ];
    let mut other = serde_json::Map::new();
    for (name, filter) in shapes {
        let mut t_shape = Vec::with_capacity(50);
        for i in 0..50 {
            let t = Instant::now();
            let r = ws.req(&format!("{name}{i}"), std::slice::from_ref(&filter)).await;
            t_shape.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(r.closed.is_none(), "{name}: {:?}", r.closed);
            assert_eq!(r.events.len(), 100, "{name}");
            ws.send_json(&json!(["CLOSE", format!("{name}{i}")])).await;
        }
        t_shape.sort_by(f64::total_cmp);
        let p = |q| percentile(&t_shape, q);
        other.insert(name.to_owned(), json!({"p50_ms": p(50), "p99_ms": p(99)}));
    }
    // Throughput: `BUZZ_BENCH_CONCURRENCY` connections (default 8, alternating gateways) each
    // running 50 `#type` + `#project` first pages back to back.
    let concurrency: usize = bench_param("BUZZ_BENCH_CONCURRENCY", 8);
    let mut clients = Vec::with_capacity(concurrency);
    for i in 0..concurrency {
        clients
            .push(WsClient::authed(cluster.gateways[i % cluster.gateways.len()], &team.host, &reader).await);
    }
    let started = Instant::now();
    let runs = clients.into_iter().enumerate().map(|(c, mut ws)| {
        let projects = projects.clone();
        tokio::spawn(async move {
            let mut t_client = Vec::with_capacity(50);
            for i in 0..50 {
                let p = &projects[(c * 13 + i * 37) % projects.len()];
                let filter =
                    json!({"artifact": "current", "#type": ["buzz.task"], "#project": [p], "limit": 100});
                let t = Instant::now();
                let r = ws.req(&format!("c{i}"), &[filter]).await;
                t_client.push(t.elapsed().as_secs_f64() * 1000.0);
                assert!(r.closed.is_none(), "{:?}", r.closed);
                assert_eq!(r.events.len(), 100);
                ws.send_json(&json!(["CLOSE", format!("c{i}")])).await;
            }
            t_client
        })
    });
    let mut t_all: Vec<f64> = Vec::new();
    for run in runs.collect::<Vec<_>>() {
        t_all.extend(run.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    t_all.sort_by(f64::total_cmp);
    let cp = |q| percentile(&t_all, q);
    let concurrent = json!({
        "connections": concurrency, "queries": t_all.len(),
        "queries_per_second": t_all.len() as f64 / elapsed, "p50_ms": cp(50), "p99_ms": cp(99),
    });
    sql_times.sort_by(f64::total_cmp);
    let sql_pct = |q| percentile(&sql_times, q);
    times.sort_by(f64::total_cmp);
    let pct = |q| percentile(&times, q);
    println!(
        "BENCH {}",
        json!({
            "artifacts": artifacts, "channels": channels, "readable_artifacts": readable_artifacts,
            "queries": queries, "rows_per_page": rows as f64 / queries as f64,
            "seed_seconds": seeded.as_secs_f64(),
            "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99), "max_ms": pct(100),
            "warmup_first_ms": warmup[0], "warmup_max_ms": warmup.iter().copied().fold(0.0, f64::max),
            "sql_p50_ms": sql_pct(50), "sql_p99_ms": sql_pct(99), "sql_max_ms": sql_pct(100),
            "other_shapes": other,
            "concurrent": concurrent,
        })
    );
    cluster.stop().await;
}
