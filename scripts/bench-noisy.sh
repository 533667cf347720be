#!/usr/bin/env bash
# Noisy-neighbour benchmark (issue 37): a quiet community's REQ latency alone and while a noisy
# community floods REQ, COUNT and search at the per-socket and per-key limits from many sockets
# (tests/tests/noisy_bench.rs says the shape). Release build, in-process cluster, two gateways,
# one query replica.
#
# Usage: scripts/bench-noisy.sh
# Environment (defaults): BUZZ_BENCH_MESSAGES=30000 BUZZ_BENCH_KEYS=4 BUZZ_BENCH_SOCKETS=4
#   BUZZ_BENCH_IN_FLIGHT=32 BUZZ_BENCH_QUERIES=200
# Prints one `BENCH {json}` line; results are also written to target/bench/noisy.json.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

bash scripts/deps-up.sh
# PostgreSQL on loopback without TLS, as scripts/load.sh runs the relay (docs/benchmarks.md).
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
mkdir -p target/bench
RUST_LOG=${RUST_LOG:-error} cargo test -q --release -p buzz-tests --test noisy_bench -- \
  --ignored --nocapture bench_quiet_reads_during_a_read_flood 2>&1 | tee target/bench/noisy.log
grep '^BENCH ' target/bench/noisy.log | tail -1 | cut -d' ' -f2- >target/bench/noisy.json
echo "report: target/bench/noisy.json"
