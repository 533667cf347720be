#!/usr/bin/env bash
# NIP-AR snapshot noisy neighbour (issue 37 item 5): a quiet community's capture starts alone, then
# while a noisy community holds its whole share of the relay's captures (16 of 32) and keeps
# sending starts from several clients, through the in-process cluster (two gateways, two snapshot
# replicas); tests/tests/snapshot_shares_bench.rs says the phases.
#
# Usage: scripts/bench-snapshot-shares.sh
# Environment (defaults): BUZZ_BENCH_HAMMERS=8 BUZZ_BENCH_ARTIFACTS=1000, PROFILE=release (or debug).
# Prints one `BENCH {json}` line; results are also written to target/bench/snapshot-shares.json.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}
profile=()
[[ ${PROFILE:-release} == release ]] && profile=(--release)

bash scripts/deps-up.sh
# PostgreSQL on loopback without TLS, as scripts/load.sh runs the relay (docs/benchmarks.md).
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
mkdir -p target/bench
RUST_LOG=${RUST_LOG:-warn} cargo test -q "${profile[@]}" -p buzz-tests --test snapshot_shares_bench -- \
  --ignored --nocapture bench_snapshot_noisy_neighbour 2>&1 | tee target/bench/snapshot-shares.log
grep '^BENCH ' target/bench/snapshot-shares.log | tail -1 | cut -d' ' -f2- >target/bench/snapshot-shares.json
echo "report: target/bench/snapshot-shares.json"
