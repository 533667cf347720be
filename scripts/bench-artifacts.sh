#!/usr/bin/env bash
# NIP-AR revision benchmark: sustained revisions/s and p50/p99 OK latency for create+update
# chains with <size> existing artifacts (default 1,000,000, seeded by SQL), through the in-process
# cluster (2 gateways, 2 write and 2 query replicas) on the local PostgreSQL, Redis and NATS,
# release build.
#
# Usage: scripts/bench-artifacts.sh [size]   (e.g. 100000 for the earlier figures)
# Environment (defaults): BUZZ_BENCH_SEED=<size> BUZZ_BENCH_CLIENTS=128 BUZZ_BENCH_SECS=15
#   BUZZ_BENCH_CHAIN=9 (updates per create). Prints one `BENCH {json}` line; results are also
#   written to target/bench/artifacts.json under the repo.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

if [[ $# -gt 0 ]]; then
  [[ $1 =~ ^[0-9]+$ ]] || { echo "usage: $0 [size]" >&2; exit 2; }
  export BUZZ_BENCH_SEED=$1
fi

bash scripts/deps-up.sh
# PostgreSQL on loopback without TLS, as scripts/load.sh runs the relay (docs/benchmarks.md).
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
mkdir -p target/bench
RUST_LOG=${RUST_LOG:-warn} cargo test -q --release -p buzz-tests --test artifacts_bench -- \
  --ignored --nocapture bench_artifact_revisions 2>&1 | tee target/bench/artifacts.log
grep '^BENCH ' target/bench/artifacts.log | tail -1 | cut -d' ' -f2- >target/bench/artifacts.json
echo "report: target/bench/artifacts.json"
