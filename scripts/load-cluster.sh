#!/usr/bin/env bash
# A multi-process buzz-relay on loopback, loaded by the distributed buzz-load: brings up the
# dependencies, migrates a fresh database, starts G gateways, W write-services and one query,
# snapshot and policy service each as separate OS processes (release build), runs
# `buzz-load coordinator` with N spawned workers against every gateway (a fresh community
# provisioned through the operator API), samples each gateway's RSS from /proc once a second,
# and tears everything down. Bounded: the coordinator's run stops by itself.
#
# Usage: scripts/load-cluster.sh [--gateways G] [--writers W] [--workers N] [-- coordinator flags...]
#   e.g. scripts/load-cluster.sh --gateways 2 -- --scenario fanout --subscribers 1000 --duration 20
# Defaults: G=2, W=2, N=2. Ports: $BUZZ_LC_PORT (default 18000) and up. Benchmarks: run under
# `flock /tmp/buzz-bench.lock`. Logs stay in $BUZZ_LC_LOGS when set (else a temp dir, removed).
# BUZZ_LC_NO_BUILD=1 skips the cargo build. Gateway limits for many sockets:
# BUZZ_MAX_CONNECTIONS (default 20000) and BUZZ_MAX_CONNECTIONS_PER_IP (default 20000).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh

G=2 W=2 N=2
while (($#)); do
  case $1 in
    --gateways) G=${2:?}; shift 2 ;;
    --writers) W=${2:?}; shift 2 ;;
    --workers) N=${2:?}; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "load-cluster.sh: unknown flag $1 (coordinator flags go after --)" >&2; exit 2 ;;
  esac
done
for v in "$G" "$W" "$N"; do
  [[ $v =~ ^[1-9][0-9]?$ ]] || { echo "load-cluster.sh: --gateways/--writers/--workers must be 1..99, got '$v'" >&2; exit 2; }
done

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
BASE=${BUZZ_LC_PORT:-18000}
DB=buzz_load_cluster
# Loopback: no TLS to PostgreSQL (as scripts/load.sh).
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB?sslmode=disable"
BIN=$CARGO_TARGET_DIR/release

# Many sockets: every process started here inherits the raised limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

bash scripts/deps-up.sh
if [[ -z ${BUZZ_LC_NO_BUILD:-} ]]; then
  need_cargo
  # `--bins` for every package (a `--bin` would select that one binary for all of them).
  cargo build --release -p buzz-cli -p buzz-gateway -p buzz-write -p buzz-query \
    -p buzz-snapshot -p buzz-policy -p buzz-load --bins
fi

work=${BUZZ_LC_LOGS:-$(mktemp -d)}
mkdir -p "$work"
pids=()
names=()
sampler=
cleanup() {
  [[ -n $sampler ]] && kill "$sampler" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -z ${BUZZ_LC_LOGS:-} ]] && rm -rf "$work"
}
trap cleanup EXIT

psql -q "postgres://postgres@127.0.0.1:5432/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
psql -q "postgres://postgres@127.0.0.1:5432/postgres" -c "CREATE DATABASE $DB" >/dev/null
"$BIN/buzz" migrate --database-url "$DATABASE_URL" >/dev/null

relay_json=$("$BIN/buzz" keygen)
op_json=$("$BIN/buzz" keygen)
field() { sed -n "s/.*\"$2\":\"\([0-9a-f]*\)\".*/\1/p" <<<"$1"; }
export BUZZ_RELAY_SECRET_KEY=$(field "$relay_json" secret_key)
OP_SECRET=$(field "$op_json" secret_key)
OP_PUBKEY=$(field "$op_json" pubkey)
tag=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
export BUZZ_NATS_PREFIX="lc$tag" BUZZ_REDIS_PREFIX="lc:$tag:"
export RUST_LOG=${RUST_LOG:-warn} BUZZ_LOG_FORMAT=${BUZZ_LOG_FORMAT:-text}
# A load test: the write rate limits are raised far above what a run reaches, and one loopback
# address may hold many sockets.
export BUZZ_RATE_CONN_PER_SEC=${BUZZ_RATE_CONN_PER_SEC:-1000000}
export BUZZ_RATE_CONN_BURST=${BUZZ_RATE_CONN_BURST:-1000000}
export BUZZ_RATE_PUBKEY_PER_MIN=${BUZZ_RATE_PUBKEY_PER_MIN:-100000000}
export BUZZ_MAX_CONNECTIONS=${BUZZ_MAX_CONNECTIONS:-20000}
export BUZZ_MAX_CONNECTIONS_PER_IP=${BUZZ_MAX_CONNECTIONS_PER_IP:-20000}

start() { # start NAME CMD...: a service in the background, its log in $work/NAME.log
  local name=$1
  shift
  "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}
POLICY=$((BASE + 90))
start policy env BUZZ_POLICY_ADDR="127.0.0.1:$POLICY" BUZZ_POLICY_ADMIN_ADDR="127.0.0.1:$((BASE + 91))" \
  RELAY_OPERATOR_PUBKEYS="$OP_PUBKEY" RELAY_OPERATOR_API_ORIGIN="http://127.0.0.1:$POLICY" "$BIN/buzz-policy"
for ((i = 0; i < W; i++)); do
  start "write$i" env BUZZ_WRITE_ADMIN_ADDR="127.0.0.1:$((BASE + 200 + i))" "$BIN/buzz-write"
done
start query env BUZZ_QUERY_ADMIN_ADDR="127.0.0.1:$((BASE + 92))" "$BIN/buzz-query"
start snapshot env BUZZ_SNAPSHOT_ADMIN_ADDR="127.0.0.1:$((BASE + 93))" "$BIN/buzz-snapshot"
urls=()
gw_pids=()
for ((i = 0; i < G; i++)); do
  start "gateway$i" env BUZZ_GATEWAY_ADDR="127.0.0.1:$((BASE + i))" \
    BUZZ_GATEWAY_ADMIN_ADDR="127.0.0.1:$((BASE + 100 + i))" "$BIN/buzz-gateway"
  gw_pids+=("${pids[-1]}")
  urls+=(--url "ws://127.0.0.1:$((BASE + i))")
done

ready() { curl -fsS -o /dev/null "http://127.0.0.1:$1/readyz" 2>/dev/null; }
for port in "$((BASE + 91))" $(for ((i = 0; i < G; i++)); do echo $((BASE + 100 + i)); done); do
  if ! wait_until 30 ready "$port"; then
    tail -n 20 "$work"/*.log >&2
    die "a service on admin port $port did not get ready (logs above)"
  fi
done
log "load-cluster: $G gateway(s), $W write-service(s), query, snapshot, policy up (logs: $work)"

# Gateway RSS once a second (VmRSS, kB) while the run lasts.
(
  while :; do
    for ((i = 0; i < G; i++)); do
      rss=$(awk '/^VmRSS:/ {print $2}' "/proc/${gw_pids[$i]}/status" 2>/dev/null || echo 0)
      echo "$i ${rss:-0}"
    done >>"$work/rss.log"
    sleep 1
  done
) &
sampler=$!

# CPU seconds (user + system) of a process so far, and of the whole machine (busy, all cores).
cpu_of() { awk -v t="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }
machine_busy() { awk -v t="$(getconf CLK_TCK)" '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8) / t}' /proc/stat; }
declare -A cpu0
for k in "${!pids[@]}"; do cpu0[$k]=$(cpu_of "${pids[$k]}"); done
busy0=$(machine_busy)

rc=0
"$BIN/buzz-load" coordinator --spawn-workers "$N" "${urls[@]}" --host-header load.localhost \
  --operator-url "http://127.0.0.1:$POLICY" --operator-secret "$OP_SECRET" "$@" || rc=$?
busy1=$(machine_busy)
echo "  CPU seconds during the run (user + system):"
for k in "${!pids[@]}"; do
  awk -v n="${names[$k]}" -v a="${cpu0[$k]}" -v b="$(cpu_of "${pids[$k]}")" 'BEGIN {printf "    %-10s %7.2f\n", n, b - a}'
done
awk -v a="$busy0" -v b="$busy1" 'BEGIN {printf "    %-10s %7.2f (every process on the machine: PostgreSQL, NATS, Redis, the load workers, ...)\n", "machine", b - a}'
for ((i = 0; i < G; i++)); do
  awk -v g="$i" '$1 == g && $2 > max {max = $2} END {printf "  gateway %s peak RSS %.1f MB\n", g, max / 1024}' "$work/rss.log"
done
exit "$rc"
