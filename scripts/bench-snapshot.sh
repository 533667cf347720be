#!/usr/bin/env bash
# NIP-AR snapshot benchmark: start of a 50,000-artifact capture, every page, 500 bodies and
# completion through the in-process cluster (two gateways, two snapshot replicas), time per phase,
# and the Redis memory of the capture (MEMORY USAGE of the one snapshot hash).
#
# Usage: scripts/bench-snapshot.sh
# Environment (defaults): BUZZ_BENCH_ARTIFACTS=50000.
# Prints one `BENCH {json}` line; results are also written to target/bench/snapshot.json.
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
RUST_LOG=${RUST_LOG:-warn} cargo test -q --release -p buzz-tests --test snapshot_bench -- \
  --ignored --nocapture bench_snapshot_capture 2>&1 | tee target/bench/snapshot.log
grep '^BENCH ' target/bench/snapshot.log | tail -1 | cut -d' ' -f2- >target/bench/snapshot.json
echo "report: target/bench/snapshot.json"
