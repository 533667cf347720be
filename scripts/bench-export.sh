#!/usr/bin/env bash
# Community export and import benchmark: BUZZ_BENCH_EVENTS signed kind-9 messages (default
# 1,000,000) in 100 channels, seeded by SQL, exported with `buzz operator export` and imported into
# a second in-process deployment (own database and relay key) with `buzz operator import`:
# events/s of each, the CLI's peak RSS (/usr/bin/time -v) and the peak RSS of the process that runs
# the cluster (policy-service included), reset before each phase (cli/tests/export_import_bench.rs).
#
# Usage: scripts/bench-export.sh
# Prints one `BENCH {json}` line; results are also written to target/bench/export.json.
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
RUST_LOG=${RUST_LOG:-warn} cargo test -q --release -p buzz-cli --test export_import_bench -- \
  --ignored --nocapture bench_export_import 2>&1 | tee target/bench/export.log
grep '^BENCH ' target/bench/export.log | tail -1 | cut -d' ' -f2- >target/bench/export.json
echo "report: target/bench/export.json"
