#!/usr/bin/env bash
# Runs buzz-relay's cargo-fuzz targets (fuzz/, docs/fuzzing.md) one after another and fails on
# any crash, timeout or out-of-memory, printing the input libFuzzer saved for it.
#
# Usage:
#   scripts/fuzz.sh [SECONDS] [TARGET...]   every target (or those named) for SECONDS each (600)
#   scripts/fuzz.sh --smoke                 20 s per target; exits 0 with a note when the
#                                           nightly toolchain is missing (the CI mode)
#   scripts/fuzz.sh --seeds                 writes the seed corpora fuzz/corpus/<target>/
#   scripts/fuzz.sh --merge [TARGET...]     adds to fuzz/corpus/<target>/ only the inputs of the
#                                           local corpus that reach new coverage (libFuzzer -merge=1)
# Needs the nightly toolchain (`rustup toolchain install nightly`); installs cargo-fuzz with
# `cargo install cargo-fuzz --locked` when `cargo fuzz` is missing.
# Inputs libFuzzer finds go to the local corpus $FUZZ_TARGET_DIR/corpus/<target>/ (not
# committed); fuzz/corpus/<target>/ (committed) is read only. Crashes: fuzz/artifacts/<target>/.
# Environment: FUZZ_TARGET_DIR (default fuzz/target), FUZZ_TIMEOUT (seconds one input may take,
# default 10), FUZZ_RSS_MB (default 2048).
# Output: per target a line `target seconds execs corpus result`; logs in $FUZZ_TARGET_DIR/logs/.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo

mode=run
seconds=600
case ${1:-} in
  --smoke) mode=smoke seconds=20; shift ;;
  --seeds) mode=seeds; shift ;;
  --merge) mode=merge; shift ;;
  -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
  '' | *[!0-9]*) ;;
  *) seconds=$1; shift ;;
esac

if ! cargo +nightly --version >/dev/null 2>&1; then
  if [[ $mode == smoke ]]; then
    log "fuzz smoke skipped: no nightly toolchain (rustup toolchain install nightly)"
    exit 0
  fi
  die "cargo-fuzz needs the nightly toolchain: rustup toolchain install nightly"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  log "installing cargo-fuzz"
  cargo install cargo-fuzz --locked >&2 || die "cargo install cargo-fuzz failed"
fi

export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$ROOT/fuzz/target}
# No sanitizer: the relay forbids unsafe code, and builds and runs are faster without ASan; debug
# assertions and overflow checks stay on (cargo-fuzz's default).
build=(-s none)
cd fuzz

started=$SECONDS
log "building the fuzz targets (nightly, into $CARGO_TARGET_DIR)"
nice -n 10 cargo +nightly fuzz build "${build[@]}" >&2 || die "building the fuzz targets failed"
log "built in $((SECONDS - started)) s"

if [[ $mode == seeds ]]; then
  BUZZ_FUZZ_SEEDS=$ROOT/fuzz/corpus exec "$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/seeds"
fi

targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cargo +nightly fuzz list | grep -vx seeds)
fi

mkdir -p "$CARGO_TARGET_DIR/logs"
failed=()
printf '%-16s %8s %12s %8s  %s\n' target seconds execs corpus result
for t in "${targets[@]}"; do
  committed=$ROOT/fuzz/corpus/$t
  work=$CARGO_TARGET_DIR/corpus/$t
  logfile=$CARGO_TARGET_DIR/logs/$t.log
  mkdir -p "$committed" "$work"
  if [[ $mode == merge ]]; then
    cargo +nightly fuzz run "${build[@]}" "$t" "$committed" "$work" -- -merge=1 >"$logfile" 2>&1 ||
      die "merging $t failed (log: $logfile)"
    log "$t: $(find "$committed" -type f | wc -l) committed inputs"
    continue
  fi
  t0=$SECONDS
  result=ok
  # The local corpus comes first: libFuzzer writes what it finds into the first directory only.
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "$work" "$committed" -- \
    -max_total_time="$seconds" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_MB:-2048}" \
    -print_final_stats=1 >"$logfile" 2>&1; then
    artifact=$(grep -o 'Test unit written to .*' "$logfile" | tail -1 | sed 's/^Test unit written to //')
    result="FAILED: ${artifact:-see $logfile}"
    failed+=("$t")
  fi
  execs=$(grep -o '^stat::number_of_executed_units: *[0-9]*' "$logfile" | grep -o '[0-9]*$' || true)
  corpus=$(find "$work" -type f | wc -l)
  printf '%-16s %8s %12s %8s  %s\n' "$t" "$((SECONDS - t0))" "${execs:-?}" "$corpus" "$result"
done

log "fuzzing took $((SECONDS - started)) s in all (build included)"
if ((${#failed[@]})); then
  log "crashes in: ${failed[*]} (reproduce: cd fuzz && cargo +nightly fuzz run -s none <target> <artifact>)"
  exit 1
fi
