//! Benchmark (ignored by default; run it with `scripts/bench-search.sh`): NIP-50 search latency
//! over WebSocket REQ to EOSE through the in-process cluster (two gateways), on a store seeded by
//! SQL with `BUZZ_BENCH_MESSAGES` kind-9 messages (default 1 000 000) in `BUZZ_BENCH_CHANNELS`
//! channels (default 500), a quarter of them open (readable by the reader), the rest private
//! channels the reader is not in.
//!
//! Each message has 8 words drawn from a vocabulary of 2 000 (`w0` .. `w1999`), word k with a
//! frequency falling as in a skewed natural text (k = floor(2000 * u^2), u uniform): `w5` is in
//! about 4 % of messages, `w500` in about 0.4 %. Timed shapes, each `BUZZ_BENCH_QUERIES` (default
//! 200) REQs with random word pairs from its band, default page (50):
//! - `two_words` (the figure): two mid-frequency words (ranks 200-999);
//! - `two_frequent_words`: two of the 20 most frequent words (thousands of readable matches);
//! - `one_frequent_word`: one of the 20 most frequent (tens of thousands of matches to rank).
//!
//! - `other_tenants_phrase` (issue 37 item 7): a phrase in `BUZZ_BENCH_OTHER` (default 150 000)
//!   messages of another community's private channel and in none of the reader's, against
//!   `absent_word`; then the same phrase on 0003's `events_search` alone (0006's index dropped),
//!   as before 0006. Its plans are printed with either index.
//!
//! Prints one `BENCH {json}` line and the two-word statement's plan.

#![allow(clippy::unwrap_used)]

/// The relay binaries' allocator, so the in-process cluster allocates as they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Instant;

use buzz_tests::client::WsClient;
use buzz_tests::helpers::{bench_param, percentile};
use buzz_tests::seed::{defer_indexes, quarter_open_channels, restore_indexes};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::{json, Value};

/// Another community: its owner, and how many of its messages hold [`PHRASE`].
struct Other<'a> {
    community: buzz_core::CommunityId,
    owner: &'a str,
    messages: i64,
}

/// The phrase only the other community's private channel holds.
const PHRASE: &str = "merger acquisition";

/// The other community's private channel and its messages, each with [`PHRASE`].
async fn seed_other_tenant(tx: &mut sqlx::PgConnection, other: &Other<'_>) {
    let channel = uuid::Uuid::new_v4();
    sqlx::query(
        "INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by) \
         VALUES ($1, $2, 'deals', 'private', 'stream', $3)",
    )
    .bind(other.community)
    .bind(channel)
    .bind(other.owner)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         SELECT $1, id, $2, 9, 1700000000 + g, $3, \
                json_build_object('id', id, 'pubkey', $2, 'created_at', 1700000000 + g, 'kind', 9, \
                  'tags', json_build_array(json_build_array('h', $3::text)), \
                  'content', 'the merger acquisition plan, part ' || g, 'sig', repeat('0', 128))::text \
         FROM generate_series(1, $4) g, LATERAL (SELECT encode(sha256(('deal' || g)::bytea), 'hex') AS id) i",
    )
    .bind(other.community)
    .bind(other.owner)
    .bind(channel)
    .bind(other.messages)
    .execute(&mut *tx)
    .await
    .unwrap();
}

/// Seeds the corpus (see the module comment) and the other community's phrase in one
/// transaction, indexes built after the load.
async fn seed(
    cluster: &Cluster,
    community: buzz_core::CommunityId,
    author: &str,
    (messages, channels): (i64, i64),
    other: &Other<'_>,
) {
    quarter_open_channels(cluster, community, author, channels).await;
    let mut conn = cluster.pool.acquire().await.unwrap();
    let deferred = defer_indexes(&mut conn, &["events"]).await;
    let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
    sqlx::query("SET LOCAL work_mem = '256MB'").execute(&mut *tx).await.unwrap();
    // The words of message g depend on g (the lateral subquery is re-run per row).
    sqlx::query(
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         SELECT $1, id, $2, 9, 1700000000 + g, md5('ch' || (g % $4))::uuid, \
                json_build_object('id', id, 'pubkey', $2, 'created_at', 1700000000 + g, 'kind', 9, \
                  'tags', json_build_array(json_build_array('h', md5('ch' || (g % $4))::uuid)), \
                  'content', words, 'sig', repeat('0', 128))::text \
         FROM generate_series(1, $3) g, \
              LATERAL (SELECT encode(sha256(('m' || g)::bytea), 'hex') AS id) i, \
              LATERAL (SELECT string_agg('w' || floor(2000 * random() ^ 2)::int, ' ') AS words \
                       FROM generate_series(1, 8) w WHERE g > 0) c \
         ORDER BY 2",
    )
    .bind(community)
    .bind(author)
    .bind(messages)
    .bind(channels)
    .execute(&mut *tx)
    .await
    .unwrap();
    seed_other_tenant(&mut tx, other).await;
    tx.commit().await.unwrap();
    restore_indexes(&mut conn, &deferred).await;
    sqlx::query("VACUUM ANALYZE events").execute(&mut *conn).await.unwrap();
    sqlx::query("VACUUM ANALYZE channels").execute(&mut *conn).await.unwrap();
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of the page statement of `filter`, with a search's settings.
async fn explain(
    cluster: &Cluster,
    reader: &buzz_query::sql::Reader<'_>,
    filter: &buzz_core::Filter,
) -> String {
    let mut tx = cluster.pool.begin().await.unwrap();
    buzz_query::plan::prepare_search(&mut tx).await.unwrap();
    let mut qb = buzz_query::sql::explain_select_events(reader, filter, 50);
    let plan: Vec<String> = qb.build_query_scalar().fetch_all(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    plan.join("\n")
}

/// `n` REQs of `make(i)` through alternating gateways; (sorted latencies in ms, mean rows per
/// page, answers refused for the execution budget). Only `budget_ok` shapes may be refused, and
/// only so.
async fn timed(
    clients: &mut [WsClient],
    n: usize,
    budget_ok: bool,
    make: impl Fn(usize) -> Value,
) -> (Vec<f64>, f64, usize) {
    let mut times = Vec::with_capacity(n);
    let mut rows = 0usize;
    let mut over_budget = 0usize;
    for i in 0..n {
        let ws = &mut clients[i % 2];
        let t = Instant::now();
        let r = ws.req(&format!("q{i}"), &[make(i)]).await;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        match r.closed.as_deref() {
            None => {
                rows += r.events.len();
                // A REQ of searches ends at EOSE with its CLOSED.
                ws.wait_for(|v| v[0] == "CLOSED" && v[1] == format!("q{i}")).await.unwrap();
            }
            Some("error: query exceeded its execution budget") if budget_ok => over_budget += 1,
            Some(other) => panic!("{}: {other}", make(i)),
        }
    }
    times.sort_by(f64::total_cmp);
    (times, rows as f64 / n as f64, over_budget)
}

fn figures((times, rows, over_budget): &(Vec<f64>, f64, usize)) -> Value {
    json!({
        "over_budget": over_budget,
        "p50_ms": percentile(times, 50), "p90_ms": percentile(times, 90), "p99_ms": percentile(times, 99),
        "max_ms": percentile(times, 100), "rows_per_page": rows,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run scripts/bench-search.sh"]
async fn bench_two_word_search() {
    let messages: i64 = bench_param("BUZZ_BENCH_MESSAGES", 1_000_000);
    let channels: i64 = bench_param("BUZZ_BENCH_CHANNELS", 500);
    let queries: usize = bench_param("BUZZ_BENCH_QUERIES", 200);
    let opts =
        ClusterOptions { gateway_settings: Some(buzz_tests::helpers::unmetered_reads), ..Default::default() };
    let cluster = Cluster::start_with(opts).await;
    let team = cluster.community("bench.test").await;
    let other_messages: i64 = bench_param("BUZZ_BENCH_OTHER", 150_000);
    let reader = cluster.member(&team).await;
    let tenant = cluster.community("other.test").await;
    let other = Other { community: tenant.id, owner: &tenant.owner.public_hex(), messages: other_messages };
    let started = Instant::now();
    seed(&cluster, team.id, &reader.public_hex(), (messages, channels), &other).await;
    let seeded = started.elapsed().as_secs_f64();
    let size = |index: &'static str| {
        let pool = cluster.pool.clone();
        async move {
            let bytes: i64 = sqlx::query_scalar("SELECT pg_relation_size($1::regclass)")
                .bind(index)
                .fetch_one(&pool)
                .await
                .unwrap();
            bytes as f64 / 1048576.0
        }
    };
    let index_mib = (size("events_search").await, size(buzz_store::fragments::SEARCH_INDEX).await);

    // The plan of the statement the query-service runs for a two-word search.
    let filter: buzz_core::Filter = serde_json::from_value(json!({"search": "w300 w301"})).unwrap();
    let reader_key = reader.public_hex();
    let r = buzz_query::sql::Reader { community: team.id, pubkey: &reader_key, channel_ids: None };
    let mut qb = buzz_query::sql::explain_select_events(&r, &filter, 50);
    let plan: Vec<String> = qb.build_query_scalar().fetch_all(&cluster.pool).await.unwrap();
    println!("PLAN\n{}", plan.join("\n"));
    // And of the most frequent pair (thousands of matches), with the search's work_mem.
    let filter: buzz_core::Filter = serde_json::from_value(json!({"search": "w0 w10"})).unwrap();
    let mut tx = cluster.pool.begin().await.unwrap();
    buzz_query::plan::prepare_search(&mut tx).await.unwrap();
    let mut qb = buzz_query::sql::explain_select_events(&r, &filter, 50);
    let plan: Vec<String> = qb.build_query_scalar().fetch_all(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    println!("PLAN w0 w10\n{}", plan.join("\n"));

    let mut clients = Vec::new();
    for g in 0..2 {
        clients
            .push(WsClient::authed(cluster.gateways[g % cluster.gateways.len()], &team.host, &reader).await);
    }
    // Warm-up apart: the query-services' first statements on fresh connections.
    let (warmup, _, _) = timed(&mut clients, 20, false, |_| json!({"search": "nosuchword anotherone"})).await;
    // Word pairs by a fixed stride (repeatable runs), never the same word twice.
    let mid =
        |i: usize| json!({"search": format!("w{} w{}", 200 + (i * 37) % 800, 200 + (i * 91 + 400) % 800)});
    let two = timed(&mut clients, queries, false, mid).await;
    let frequent = |i: usize| json!({"search": format!("w{} w{}", i % 10, 10 + (i * 7) % 10)});
    let freq = timed(&mut clients, queries, false, frequent).await;
    let one = |i: usize| json!({"search": format!("w{}", (i * 7) % 20)});
    // One word of the 20 most frequent (w0 is in about 17 % of messages): may exceed the budget.
    let single = timed(&mut clients, queries.min(100), true, one).await;
    // Another community's phrase, against a word nobody wrote; then on the old index alone.
    let n = queries.min(50);
    let theirs = timed(&mut clients, n, false, |_| json!({"search": PHRASE})).await;
    let absent = timed(&mut clients, n, false, |_| json!({"search": "zzqnothing"})).await;
    let phrase: buzz_core::Filter = serde_json::from_value(json!({"search": PHRASE})).unwrap();
    println!(
        "PLAN {PHRASE} ({})\n{}",
        buzz_store::fragments::SEARCH_INDEX,
        explain(&cluster, &r, &phrase).await
    );
    sqlx::query(&format!("DROP INDEX {}", buzz_store::fragments::SEARCH_INDEX))
        .execute(&cluster.pool)
        .await
        .unwrap();
    println!("PLAN {PHRASE} (events_search alone)\n{}", explain(&cluster, &r, &phrase).await);
    let theirs_old = timed(&mut clients, n, false, |_| json!({"search": PHRASE})).await;
    println!(
        "BENCH {}",
        json!({
            "messages": messages, "channels": channels, "readable_channels": (channels + 3) / 4,
            "queries": queries, "seed_seconds": seeded,
            "index_mib": {"events_search": index_mib.0, "events_search_community": index_mib.1},
            "other_tenant_messages": other_messages,
            "warmup_p50_ms": percentile(&warmup, 50),
            "two_words": figures(&two),
            "two_frequent_words": figures(&freq),
            "one_frequent_word": figures(&single),
            "other_tenants_phrase": figures(&theirs),
            "absent_word": figures(&absent),
            "other_tenants_phrase_on_events_search_alone": figures(&theirs_old),
        })
    );
    cluster.stop().await;
}
