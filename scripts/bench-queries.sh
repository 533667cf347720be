#!/usr/bin/env bash
# NIP-AR query benchmark: p50/p99 first-page latency of a current-state `#type` + `#project` query
# (REQ to EOSE, through the in-process cluster) with <size> artifacts (default 1,000,000) in 500
# channels, a quarter of them readable by the reader, seeded by SQL; prints the statement's
# EXPLAIN (ANALYZE, BUFFERS) too.
#
# Usage: scripts/bench-queries.sh [size]     (e.g. 200000 for the earlier figures)
# Environment (defaults): BUZZ_BENCH_ARTIFACTS=<size> BUZZ_BENCH_CHANNELS=500 BUZZ_BENCH_QUERIES=300
#   BUZZ_BENCH_CONCURRENCY=8 (connections of the throughput run).
# Prints one `BENCH {json}` line; results are also written to target/bench/queries.json.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

if [[ $# -gt 0 ]]; then
  [[ $1 =~ ^[0-9]+$ ]] || { echo "usage: $0 [size]" >&2; exit 2; }
  export BUZZ_BENCH_ARTIFACTS=$1
fi

bash scripts/deps-up.sh
# PostgreSQL on loopback without TLS, as scripts/load.sh runs the relay (docs/benchmarks.md).
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
mkdir -p target/bench
RUST_LOG=${RUST_LOG:-warn} cargo test -q --release -p buzz-tests --test artifact_queries_bench -- \
  --ignored --nocapture bench_current_query_first_page 2>&1 | tee target/bench/queries.log
grep '^BENCH ' target/bench/queries.log | tail -1 | cut -d' ' -f2- >target/bench/queries.json
echo "report: target/bench/queries.json"
