#!/usr/bin/env bash
# NIP-50 search benchmark: p50/p99 of REQ-to-EOSE searches through the in-process cluster's two
# gateways over <size> kind-9 messages (default 1,000,000) in 500 channels, a quarter readable by
# the reader, seeded by SQL (tests/tests/search_bench.rs says the corpus and the query shapes);
# prints the two-word statement's EXPLAIN (ANALYZE, BUFFERS) too. Release build.
#
# Usage: scripts/bench-search.sh [size]
# Environment (defaults): BUZZ_BENCH_MESSAGES=<size> BUZZ_BENCH_CHANNELS=500 BUZZ_BENCH_QUERIES=200
# Prints one `BENCH {json}` line; results are also written to target/bench/search.json.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

if [[ $# -gt 0 ]]; then
  [[ $1 =~ ^[0-9]+$ ]] || { echo "usage: $0 [size]" >&2; exit 2; }
  export BUZZ_BENCH_MESSAGES=$1
fi

bash scripts/deps-up.sh
# PostgreSQL on loopback without TLS, as scripts/load.sh runs the relay (docs/benchmarks.md).
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
mkdir -p target/bench
RUST_LOG=${RUST_LOG:-warn} cargo test -q --release -p buzz-tests --test search_bench -- \
  --ignored --nocapture bench_two_word_search 2>&1 | tee target/bench/search.log
grep '^BENCH ' target/bench/search.log | tail -1 | cut -d' ' -f2- >target/bench/search.json
echo "report: target/bench/search.json"
