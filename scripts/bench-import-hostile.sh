#!/usr/bin/env bash
# Hostile community import benchmark (issue 37 item 4): the policy-service, in a process of its
# own, imports files built to cost it memory, BUZZ_BENCH_HOSTILE_LINES lines (default 100) of
# BUZZ_IMPORT_MAX_LINE_BYTES (4 MiB) each per shape: member rows padded with an unknown key (the
# issue's file), channel rows with the longest names, audit params of `[[],[],...]`, messages with
# a line of one-element tags, messages with as many tags as the import admits, and 100 channels a
# line each with a relay event (the id map). Reports per shape the file size, the outcome,
# seconds and the policy-service's peak RSS (VmHWM), and the bound the import keeps to
# (cli/tests/import_memory.rs).
#
# Usage: scripts/bench-import-hostile.sh   (BUZZ_BENCH_PROFILE=debug skips the release build)
# Prints one `BENCH {json}` line; results are also written to target/bench/import-hostile.json.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

bash scripts/deps-up.sh
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
profile=()
[[ ${BUZZ_BENCH_PROFILE:-release} == release ]] && profile=(--release)
mkdir -p target/bench
RUST_LOG=${RUST_LOG:-warn} cargo test -q "${profile[@]}" -p buzz-cli --test import_memory -- \
  --ignored --nocapture bench_import_hostile 2>&1 | tee target/bench/import-hostile.log
grep '^BENCH ' target/bench/import-hostile.log | tail -1 | cut -d' ' -f2- >target/bench/import-hostile.json
echo "report: target/bench/import-hostile.json"
