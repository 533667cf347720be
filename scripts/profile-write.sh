#!/usr/bin/env bash
# Where a kind-9 write spends its time: runs `scripts/load.sh` (buzz dev, all five services in one
# process) under load and samples every CPU of the machine with `perf record` (cpu-clock, so it
# works where hardware counters do not) while the load runs. Prints the CPU share of each process
# (relay, PostgreSQL backends, NATS, Redis, the load tool) and the hottest functions of the relay
# process with their call chains (DWARF unwinding of the release build's debug info).
#
# Usage: scripts/profile-write.sh [buzz-load flags...]
# Default load: 8 publishers x 8 in flight, 4 subscribers, 20 s (sampled: 8 s from the 6th second).
# Needs perf (Debian: linux-perf); output under target/profile/.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
have perf || apt_install linux-perf
OUT=$ROOT/target/profile
mkdir -p "$OUT"
if (($# == 0)); then
  set -- --publishers 8 --in-flight 8 --subscribers 4 --duration 20
fi

BUZZ_LOAD_JSON="$OUT/load.json" bash scripts/load.sh "$@" >"$OUT/load.log" 2>&1 &
load_pid=$!
trap 'kill $load_pid 2>/dev/null || true' EXIT
sleep 6
relay=$(pgrep -f 'release/buzz dev' | head -1 || true)
[[ -n $relay ]] || { cat "$OUT/load.log" >&2; echo "profile-write.sh: relay not running" >&2; exit 1; }

loader=$(pgrep -f 'release/buzz-load' | head -1 || true)
# Every process, no call chains: the share of each.
perf record -q -e cpu-clock -F 499 -a -o "$OUT/all.data" -- sleep 4 2>/dev/null
# perf attributes samples to threads: list the threads of the relay and of the load tool.
relay_tids=$(ls /proc/"$relay"/task | paste -sd,)
loader_tids=$(ls /proc/"${loader:-0}"/task 2>/dev/null | paste -sd, || true)
# The relay process with call chains.
perf record -q -e cpu-clock -F 299 --call-graph dwarf,16384 -p "$relay" -o "$OUT/relay.data" -- sleep 4 2>/dev/null
wait $load_pid || true
trap - EXIT

# Shares of the whole machine (2 CPUs = 100 %), by role. "PostgreSQL" is every postgres process
# (backends and background writers): the group-commit lane's connections are replaced every 5 s,
# so a list of backend pids taken after the sample would miss most of them. Other work on the machine (builds, other
# databases) is listed as "other".
perf report -i "$OUT/all.data" --stdio --sort pid,comm --no-children 2>/dev/null | grep -E '^ +[0-9]' \
  | python3 scripts/profile/roles.py 4 "relay (buzz dev)=$relay_tids" "load tool (buzz-load)=${loader_tids:-none}"
echo
echo "=== PostgreSQL: hottest functions (self time)"
perf report -i "$OUT/all.data" --stdio --no-children --comm postgres --sort dso,symbol 2>/dev/null \
  | grep -E '^ +[0-9]' | head -30 | tee "$OUT/postgres-top.txt" || true  # head closes the pipe early
echo
echo "=== relay process: hottest functions (self time)"
perf report -i "$OUT/relay.data" --stdio --no-children --sort dso,symbol -g none 2>/dev/null \
  | grep -E '^ +[0-9]' | head -40 | tee "$OUT/relay-top.txt" || true
echo
echo "=== relay process: by crate area (inclusive, top-level call chains)"
perf report -i "$OUT/relay.data" --stdio --children --sort symbol -g none 2>/dev/null \
  | grep -E '^ +[0-9]' | head -60 >"$OUT/relay-children.txt" || true
head -60 "$OUT/relay-children.txt"
echo
tail -12 "$OUT/load.log"
