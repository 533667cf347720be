#!/usr/bin/env bash
# Where a NIP-AR revision spends its time: runs the revision benchmark (scripts/bench-artifacts.sh's
# test binary) and, once its seed is loaded, samples every CPU of the machine with `perf record`
# (cpu-clock) while the revisions run. Prints the CPU share of each role (the benchmark process:
# clients, gateways, write and query replicas; PostgreSQL; NATS; Redis), the hottest functions of
# PostgreSQL and of the benchmark process, and PostgreSQL's WAL per revision.
#
# Usage: scripts/profile-artifacts.sh [size]   (default 200000; the environment of
#   scripts/bench-artifacts.sh applies: BUZZ_BENCH_CLIENTS, BUZZ_BENCH_SECS, ...)
# Needs perf (Debian: linux-perf); output under target/profile/.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
have perf || apt_install linux-perf
OUT=$ROOT/target/profile
mkdir -p "$OUT"
size=${1:-200000}
[[ $size =~ ^[0-9]+$ ]] || { echo "usage: $0 [size]" >&2; exit 2; }
export BUZZ_BENCH_SECS=${BUZZ_BENCH_SECS:-20}

log=$OUT/artifacts.log
bash scripts/bench-artifacts.sh "$size" >"$log" 2>&1 &
bench_pid=$!
trap 'kill $bench_pid 2>/dev/null || true' EXIT
until grep -q '^bench: seeded' "$log" 2>/dev/null; do
  kill -0 $bench_pid 2>/dev/null || { cat "$log" >&2; echo "profile-artifacts.sh: benchmark ended early" >&2; exit 1; }
  sleep 1
done
sleep 3
bench=$(pgrep -f 'artifacts_bench-.*bench_artifact_revisions' | head -1 || true)
[[ -n $bench ]] || { echo "profile-artifacts.sh: benchmark process not found" >&2; exit 1; }
psql_() { psql -X -q -At -h 127.0.0.1 -U postgres -d postgres -c "$1"; }
wal0=$(psql_ "SELECT wal_records || ' ' || wal_fpi || ' ' || wal_bytes FROM pg_stat_wal")
python3 scripts/profile/pg_activity.py 6 "$OUT/artifacts-activity.txt" &
sampler=$!
perf record -q -e cpu-clock -F 499 -a -g -o "$OUT/artifacts-all.data" -- sleep 6 2>/dev/null
wal1=$(psql_ "SELECT wal_records || ' ' || wal_fpi || ' ' || wal_bytes FROM pg_stat_wal")
wait $sampler || true
bench_tids=$(ls /proc/"$bench"/task | paste -sd,)
wait $bench_pid || true
trap - EXIT

perf report -i "$OUT/artifacts-all.data" --stdio --sort pid,comm --no-children -g none 2>/dev/null | grep -E '^ +[0-9]' \
  | python3 scripts/profile/roles.py 6 "benchmark process (clients, gateways, write, query)=$bench_tids"
echo
echo "=== PostgreSQL: hottest functions (self time)"
perf report -i "$OUT/artifacts-all.data" --stdio --no-children --comm postgres --sort symbol -g none 2>/dev/null \
  | grep -E '^ +[0-9]' | head -40 | tee "$OUT/artifacts-postgres-top.txt" || true
echo
echo "=== PostgreSQL: inclusive (children)"
perf report -i "$OUT/artifacts-all.data" --stdio --children --comm postgres --sort symbol -g none 2>/dev/null \
  | grep -E '^ +[0-9]' | head -60 | tee "$OUT/artifacts-postgres-children.txt" || true
echo
echo "=== benchmark process: hottest functions (self time)"
perf report -i "$OUT/artifacts-all.data" --stdio --no-children --tid "$bench_tids" --sort dso,symbol -g none 2>/dev/null \
  | grep -E '^ +[0-9]' | head -30 || true
echo
echo "=== PostgreSQL backends (pg_stat_activity, 6 s)"
cat "$OUT/artifacts-activity.txt"
echo
bench_line=$(grep '^BENCH ' "$log" | tail -1 || true)
python3 - "$wal0" "$wal1" "${bench_line#BENCH }" <<'EOF'
import json, sys
r0, f0, b0 = map(float, sys.argv[1].split())
r1, f1, b1 = map(float, sys.argv[2].split())
n = json.loads(sys.argv[3])["revisions_per_second"] * 6 if sys.argv[3] else 0
print(f"=== WAL while sampled (server-wide; ~{n:.0f} revisions at the run's mean rate)")
if n > 0:
    print(f"  {(r1 - r0) / n:.1f} records, {(f1 - f0) / n:.2f} full-page images, {(b1 - b0) / n / 1024:.1f} KiB per revision")
EOF
echo
echo "$bench_line"
