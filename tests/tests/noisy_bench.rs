//! Benchmark (ignored by default; run it with `scripts/bench-noisy.sh`): a quiet community's REQ
//! latency alone, then while a noisy community floods reads at the per-socket and per-key limits.
//!
//! The noisy community holds `BUZZ_BENCH_MESSAGES` kind-9 messages (default 30 000) in one open
//! channel. `BUZZ_BENCH_KEYS` of its member keys (default 4) each open `BUZZ_BENCH_SOCKETS`
//! sockets (default 4, over both gateways), and each socket keeps `BUZZ_BENCH_IN_FLIGHT` queries
//! in progress (default 32: the COUNT bound; REQs past the socket's 8 running queries wait at the
//! gateway): heavy COUNTs, a negated search that reads every message, and 500-event pages. The
//! quiet community's member sends `BUZZ_BENCH_QUERIES` REQs (default 200) one after another for
//! the 5 messages of its channel, first on the idle relay, then during the flood. One query
//! replica (8 connections) serves both, as one replica of a deployment under attack would.
//!
//! Goal (issue 37): the quiet p99 during the flood within 2x of the quiet p99 alone, no quiet REQ
//! refused. Prints one `BENCH {json}` line.

#![allow(clippy::unwrap_used)]

/// The relay binaries' allocator, so the in-process cluster allocates as they do.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use buzz_tests::client::WsClient;
use buzz_tests::helpers::{bench_param, percentile};
use buzz_tests::noisy;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 100.0
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark: scripts/bench-noisy.sh"]
async fn bench_quiet_reads_during_a_read_flood() {
    let messages: i64 = bench_param("BUZZ_BENCH_MESSAGES", 30_000);
    let keys: usize = bench_param("BUZZ_BENCH_KEYS", 4);
    let sockets: usize = bench_param("BUZZ_BENCH_SOCKETS", 4);
    let in_flight: usize = bench_param("BUZZ_BENCH_IN_FLIGHT", 32);
    let queries: usize = bench_param("BUZZ_BENCH_QUERIES", 200);

    let cluster = Cluster::start_with(ClusterOptions { queriers: 1, ..Default::default() }).await;
    let noisy_team = cluster.community("noisy.test").await;
    let quiet = cluster.community("quiet.test").await;
    let owner = noisy_team.owner.public_hex();
    buzz_tests::seed::open_channel_messages(&cluster, noisy_team.id, &owner, uuid::Uuid::new_v4(), messages)
        .await;
    let (mut reader, filter) = noisy::quiet_channel(&cluster, &quiet, 5).await;

    // Warm-up, then the quiet relay.
    let _ = noisy::timed_reqs(&mut reader, 20, &filter, 5).await;
    let (alone, alone_failed) = noisy::timed_reqs(&mut reader, queries, &filter, 5).await;

    let stop = tokio_util::sync::CancellationToken::new();
    let mut flooders = Vec::new();
    for k in 0..keys {
        let key = if k == 0 { noisy_team.owner.clone() } else { cluster.member(&noisy_team).await };
        for s in 0..sockets {
            let ws = WsClient::authed(cluster.gateways[s % 2], &noisy_team.host, &key).await;
            flooders.push(tokio::spawn(noisy::flood(ws, noisy::heavy_mix(), in_flight, stop.clone())));
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let started = std::time::Instant::now();
    let (flooded, flooded_failed) = noisy::timed_reqs(&mut reader, queries, &filter, 5).await;
    let flood_secs = started.elapsed().as_secs_f64();
    stop.cancel();
    let (mut answered, mut refused) = (0, 0);
    for f in flooders {
        let got = f.await.unwrap();
        answered += got.answered;
        refused += got.refused;
    }

    let p = |v: &[Duration], pct| ms(percentile(v, pct));
    let report = json!({
        "bench": "noisy_reads",
        "messages": messages, "keys": keys, "sockets_per_key": sockets, "in_flight_per_socket": in_flight,
        "queries": queries,
        "quiet_alone_ms": {"p50": p(&alone, 50), "p99": p(&alone, 99), "max": p(&alone, 100)},
        "quiet_during_flood_ms": {"p50": p(&flooded, 50), "p99": p(&flooded, 99), "max": p(&flooded, 100)},
        "quiet_failed": alone_failed + flooded_failed,
        "p99_ratio": (p(&flooded, 99) / p(&alone, 99) * 100.0).round() / 100.0,
        "noisy_answered_per_s": (answered as f64 / flood_secs).round(),
        "noisy_refused_per_s": (refused as f64 / flood_secs).round(),
    });
    println!("BENCH {report}");
    assert_eq!(alone_failed + flooded_failed, 0, "a quiet REQ failed: {report}");
    cluster.stop().await;
}
