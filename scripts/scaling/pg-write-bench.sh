#!/usr/bin/env bash
# Write throughput of one PostgreSQL primary for kind-9 writes, as the write-service issues them:
# kind9.sql (one event per transaction, 4 statements + BEGIN/COMMIT) and kind9-batch32.sql (32
# events per transaction, multi-row statements: group commit) at 1, 4 and 16 clients, plus the
# floor: an INSERT of one row and COMMIT (one fsync). Needs the scratch database of pg-setup.sh.
#
#   scripts/scaling/pg-write-bench.sh            # SECS=15 per run, COMMUNITIES=1000
#   SECS=10 CLIENTS="1 16" scripts/scaling/pg-write-bench.sh
# The last two runs put every write into one community (16 clients), the single-busy-community case.
#
# Per run it prints: clients, pgbench tps (transactions/s), events/s, average latency, the CPU
# the benchmark's own PostgreSQL backends spent per event (utime + stime from /proc, sampled from
# 1 s after the start to 1 s before the end; excludes the WAL writer, checkpointer and other
# databases) and the 1-minute load average before the run (the machine is shared). Each run is
# wrapped in `flock /tmp/buzz-bench.lock` and lasts SECS seconds.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")"
URL=${PGURL:-postgres://postgres@127.0.0.1:5432}/${DB:-buzz_scaling_scratch}
SECS=${SECS:-15}
COMMUNITIES=${COMMUNITIES:-1000}
CLIENTS=${CLIENTS:-1 4 16}
TCK=$(getconf CLK_TCK)

pg_ticks() { # CPU ticks (utime + stime) of the given PostgreSQL backend pids
  local total=0 pid f
  for pid in "$@"; do
    f=($(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null)) || continue
    total=$(( total + f[11] + f[12] )) # after the comm field: [11] utime, [12] stime
  done
  echo "$total"
}

# One measured run; called as `flock /tmp/buzz-bench.lock "$SELF" --one ...` so nothing else benchmarks
# between the counters read before and after pgbench.
if [[ "${1:-}" == "--one" ]]; then
  shift; script=$1 c=$2
  pgbench -n -M prepared -D communities="$COMMUNITIES" -f "$script" -c "$c" -j "$c" -T "$SECS" "$URL" 2>&1 &
  bench=$!
  sleep 1 # pgbench's backends are connected; sample their CPU from here to one second before the end
  mapfile -t pids < <(psql "$URL" -tAc "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pgbench'")
  s0=$(date +%s.%N); echo "T0 $(pg_ticks "${pids[@]}")"
  sleep $((SECS - 2))
  echo "T1 $(pg_ticks "${pids[@]}")"; echo "S $(echo "$(date +%s.%N) - $s0" | bc)"
  wait "$bench"
  exit 0
fi

psql "$URL" -qc "SET client_min_messages = warning; CREATE TABLE IF NOT EXISTS fsync_floor (id bigserial PRIMARY KEY, v int)"
printf 'BEGIN;\nINSERT INTO fsync_floor (v) VALUES (1);\nCOMMIT;\n' > /tmp/buzz-scaling-floor.sql

run() { # name script events-per-transaction clients
  local name=$1 script=$2 per=$3 c=$4 la out
  la=$(cut -d' ' -f1 /proc/loadavg)
  out=$(flock /tmp/buzz-bench.lock "$SELF" --one "$script" "$c")
  awk -v name="$name" -v c="$c" -v per="$per" -v tck="$TCK" -v la="$la" '
    /^tps/ {tps = $3} /latency average/ {lat = $4} /actually processed/ {n = $NF}
    /^T0/ {t0 = $2} /^T1/ {t1 = $2} /^S / {secs = $2}
    END { ev = n * per; if (ev == 0) { print name ": no transactions"; exit 1 }
      printf "%-14s clients %2d  tps %8.1f  events/s %8.1f  latency %7.2f ms  backend CPU %5.3f ms/event  load %s\n",
        name, c, tps, tps * per, lat, (t1 - t0) * 1000 / tck / (tps * per * secs), la }' <<<"$out"
}

echo "# $(date -u +%FT%TZ) $(nproc) cores, $(psql "$URL" -tAc 'SHOW server_version'), synchronous_commit=$(psql "$URL" -tAc 'SHOW synchronous_commit'), ${SECS}s per run"
for c in $CLIENTS; do run floor /tmp/buzz-scaling-floor.sql 1 "$c"; done
for c in $CLIENTS; do run kind9 kind9.sql 1 "$c"; done
for c in $CLIENTS; do run kind9-batch32 kind9-batch32.sql 32 "$c"; done
# One busy community: every write lands in community 0's 4 channels (share locks on the same
# channel rows, one index neighbourhood), the case partitioning by community cannot spread.
(export COMMUNITIES=1; run kind9-1-community kind9.sql 1 16; run batch32-1-community kind9-batch32.sql 32 16)
