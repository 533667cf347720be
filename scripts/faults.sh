#!/usr/bin/env bash
# The fault suite (issue 28, part 1): the relay as separate processes on loopback, with its own
# PostgreSQL cluster, redis-server and nats-server, under the distributed load tester's mixed
# workload, and one fault at a time, each followed by a recovery phase; every fault is judged by
# `buzz-load check` from what the clients saw and what PostgreSQL stored.
#
# Usage: scripts/faults.sh [--short] [FAULT...]
#   --short: one fault per kind (9 faults, about 9.5 minutes + builds); default: every fault
#   (22, about 22 minutes).
#   FAULT...: only these (names as in the table, e.g. kill:write stop:query all:policy nats pg
#   redis link-nats:write-1 link-pg:query-1 readers).
#
# 1. Builds (debug by default, FAULTS_PROFILE=release for optimised binaries) buzz, the five
#    services and buzz-load into $CARGO_TARGET_DIR (default /var/tmp/buzz-target), `nice -n 10`.
# 2. Starts, all private to the run and on loopback only (ports FAULTS_PORT.. FAULTS_PORT+79,
#    default 19800; data under the run directory): a PostgreSQL cluster (initdb, pg_ctl), a
#    redis-server without persistence, the relay's nats-server and a second nats-server for the
#    load tester's coordinator and workers (so that killing the relay's bus does not cut the
#    tester's own); four `buzz-load proxy` links: write-1 → NATS, write-1 → PostgreSQL,
#    gateway-1 → NATS, query-1 → PostgreSQL. The machine's shared PostgreSQL, Redis and NATS are
#    never touched.
# 3. `buzz migrate`, then 2 gateways, 2 write, 2 query, 2 snapshot and 2 policy replicas, each
#    its own process. A prober keeps the endpoints file (what clients connect to) to the gateways
#    whose /readyz answers within 1 s, as a Service's ready endpoints.
# 4. Per fault: a fresh community (its own host), `buzz-load coordinator --scenario workday`
#    (chat writers, live listeners on both gateways, NIP-AR revisions with stale-prev CAS races,
#    current-state queries, snapshot captures, connect storms, and NIP-FI: a second community whose
#    requirement the coordinator flips every 3 s while clients open FI and plain sockets to it)
#    with a client timeout of the bus timeout + 1 s; FAULTS_WARMUP s of load, the fault, its end (restart, SIGCONT, link healed),
#    then every service's /readyz polled until all answer (time to recover, bound 20 s), and the
#    load goes on FAULTS_AFTER s more. `buzz-load check --fail-on-timeouts` judges it (lost
#    acknowledged writes, ids stored twice, error: writes not stored after their resend, NIP-AR
#    chain forks and wrong tips, leaks (private channel included), silent live gaps, answers by
#    prefix, snapshot outcomes, NIP-AR history answers, snapshot manifests against the
#    acceptance order, requests unanswered past the bound, early "did not answer in time"
#    answers (hedging), fi leaks: plain sockets admitted while FI was enabled).
#
# Output: $FAULTS_RUNS/<time>/ (default /var/tmp/buzz-faults/runs): table.md (the results),
# <n>-<fault>/ (audit/, check.txt, check.json, load.err, events.log), logs/ (every process).
# Exit 0 only when every fault passed. Knobs (defaults): FAULTS_PROFILE (debug), FAULTS_PORT
# (19800), FAULTS_WARMUP (8), FAULTS_AFTER (20: load after the fault ends, recovery included), FAULTS_CLIENTS (28: 24 + 4 fi), FAULTS_SUBSCRIBERS (12),
# FAULTS_WEIGHTS, FAULTS_THINK_SCALE (0.2), FAULTS_NO_BUILD=1, FAULTS_KEEP=1 (keep the data
# directories), RUST_LOG (info).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh

SHORT=
case ${1:-} in
  -h | --help)
    sed -n '2,41p' "$0"
    exit 0
    ;;
  --short)
    SHORT=1
    shift
    ;;
esac
ONLY=("$@")

# ---- binaries ----------------------------------------------------------------------------------
PGBIN=${FAULTS_PGBIN:-$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)}
[[ -x $PGBIN/initdb && -x $PGBIN/pg_ctl ]] || die "faults: no PostgreSQL server binaries (initdb, pg_ctl) in '$PGBIN'; apt-get install postgresql or set FAULTS_PGBIN"
for tool in redis-server nats-server psql curl jq; do
  have "$tool" || die "faults: $tool is required (apt-get install redis-server nats-server postgresql-client curl jq)"
done
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}
PROFILE=${FAULTS_PROFILE:-debug}
case $PROFILE in
  release) PROFILE_FLAG=(--release) ;;
  debug) PROFILE_FLAG=() ;;
  *) die "FAULTS_PROFILE must be release or debug, not '$PROFILE'" ;;
esac
BINS=(buzz buzz-gateway buzz-write buzz-query buzz-snapshot buzz-policy buzz-load)
if [[ -z ${FAULTS_NO_BUILD:-} ]]; then
  need_cargo
  log "faults: building ($PROFILE, target $CARGO_TARGET_DIR)"
  nice -n 10 cargo build "${PROFILE_FLAG[@]}" --quiet -p buzz-cli -p buzz-gateway -p buzz-write -p buzz-query \
    -p buzz-snapshot -p buzz-policy -p buzz-load --bins || die "faults: build failed"
fi
RUN=${FAULTS_RUNS:-/var/tmp/buzz-faults/runs}/$(date -u +%Y%m%dT%H%M%SZ)
BIN=$RUN/bin
mkdir -p "$RUN/logs" "$BIN"
for b in "${BINS[@]}"; do
  cp -l "$CARGO_TARGET_DIR/$PROFILE/$b" "$BIN/" 2>/dev/null || cp "$CARGO_TARGET_DIR/$PROFILE/$b" "$BIN/" ||
    die "faults: no $PROFILE binary $b in $CARGO_TARGET_DIR (build first)"
done
mkdir -p /var/tmp/buzz-faults
BASE=${FAULTS_PORT:-19800}
exec 8>>"/var/tmp/buzz-faults/lock-$BASE"
flock -w 5 8 || die "faults: another scripts/faults.sh is running (lock /var/tmp/buzz-faults/lock-$BASE)"

# ---- ports (all loopback) ----------------------------------------------------------------------
PG_PORT=$BASE REDIS_PORT=$((BASE + 1)) NATS_PORT=$((BASE + 2)) LOAD_NATS_PORT=$((BASE + 3))
declare -A PROXY_PORT=([write-1:nats]=$((BASE + 10)) [write-1:pg]=$((BASE + 12)) [gateway-1:nats]=$((BASE + 14)) [query-1:pg]=$((BASE + 16)))
SERVICES=(policy-1 policy-2 write-1 write-2 query-1 query-2 snapshot-1 snapshot-2 gateway-1 gateway-2)
declare -A PUB ADM
i=0
for s in "${SERVICES[@]}"; do
  PUB[$s]=$((BASE + 40 + i)) ADM[$s]=$((BASE + 60 + i))
  i=$((i + 1))
done
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in $PG_PORT $REDIS_PORT $NATS_PORT $LOAD_NATS_PORT "${PROXY_PORT[@]}" "${PUB[@]}" "${ADM[@]}"; do
  port_free "$p" || die "faults: port $p is in use (pick another FAULTS_PORT)"
done

# ---- processes ---------------------------------------------------------------------------------
declare -A PID  # every process this run started, by name
PROBER=
cleanup() {
  local p
  [[ -n $PROBER ]] && kill "$PROBER" 2>/dev/null
  # The coordinator leads its own process group (setsid): its spawned workers go with it.
  [[ -n ${PID[coordinator]:-} ]] && kill -TERM -- "-${PID[coordinator]}" 2>/dev/null
  for p in "${PID[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -TERM "$p" 2>/dev/null || true; done
  [[ -f $RUN/pg/postmaster.pid ]] && as_pg "$PGBIN/pg_ctl" -D "$RUN/pg" -m immediate stop >/dev/null 2>&1
  sleep 0.5
  for p in "${PID[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  [[ -n ${PID[coordinator]:-} ]] && kill -KILL -- "-${PID[coordinator]}" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "${RUN:?}/bin"
  [[ -n ${FAULTS_KEEP:-} ]] || rm -rf "${RUN:?}/pg" "${RUN:?}/redis"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
EVENTS=$RUN/events.log
event() { printf '%s %s\n' "$(date +%s.%N)" "$*" >>"$EVENTS"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }

# PostgreSQL refuses to run as root: as root, its cluster belongs to the postgres user.
as_pg() {
  if [[ $EUID -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_start() {
  as_pg "$PGBIN/pg_ctl" -D "$RUN/pg" -l "$RUN/logs/postgres.log" -w -t 60 \
    -o "-p $PG_PORT -k $RUN/pgsock -c listen_addresses=127.0.0.1 -c max_connections=300 -c autovacuum=on -c track_commit_timestamp=on" \
    start >/dev/null || { tail -n 20 "$RUN/logs/postgres.log" >&2; die "faults: PostgreSQL did not start"; }
}
pg_crash() { as_pg "$PGBIN/pg_ctl" -D "$RUN/pg" -m immediate stop >/dev/null; }
redis_start() {
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$RUN/redis" \
    >>"$RUN/logs/redis.log" 2>&1 &
  PID[redis]=$!
  wait_until 10 redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 || die "faults: redis-server did not start"
}
nats_start() { # NAME PORT
  nats-server -a 127.0.0.1 -p "$2" >>"$RUN/logs/$1.log" 2>&1 &
  PID[$1]=$!
  wait_until 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$2" 2>/dev/null || die "faults: $1 did not start"
}
proxy_start() { # LINK (service:dep)
  local up
  case ${1#*:} in nats) up=$NATS_PORT ;; pg) up=$PG_PORT ;; esac
  "$BIN/buzz-load" proxy --listen "127.0.0.1:${PROXY_PORT[$1]}" --upstream "127.0.0.1:$up" \
    --control "127.0.0.1:$((PROXY_PORT[$1] + 1))" >>"$RUN/logs/proxy-${1/:/-}.log" 2>&1 &
  PID[proxy:$1]=$!
}
# proxy LINK COMMAND: pass | delay MS | hold | cut (answers "ok <mode>").
proxy() {
  local reply
  exec 7<>"/dev/tcp/127.0.0.1/$((PROXY_PORT[$1] + 1))" || die "faults: proxy $1 control unreachable"
  printf '%s\n' "$2" >&7
  read -r -t 5 reply <&7 || true
  exec 7>&-
  [[ $reply == ok* ]] || die "faults: proxy $1 '$2' answered '$reply'"
  event "proxy $1: $2"
}

DB=buzz_faults
PG_URL="postgres://postgres@127.0.0.1:$PG_PORT"
DATABASE_URL="$PG_URL/$DB?sslmode=disable"
tag=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
export BUZZ_NATS_PREFIX="ft$tag" BUZZ_REDIS_PREFIX="ft:$tag:"
export REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
export RUST_LOG=${RUST_LOG:-info} BUZZ_LOG_FORMAT=${BUZZ_LOG_FORMAT:-text}
export BUZZ_RATE_CONN_PER_SEC=1000000 BUZZ_RATE_CONN_BURST=1000000 BUZZ_RATE_PUBKEY_PER_MIN=100000000
export BUZZ_WRITE_DB_CONNECTIONS=6 BUZZ_QUERY_DB_CONNECTIONS=8 BUZZ_SNAPSHOT_DB_CONNECTIONS=3
# NIP-FI for the load's fi part: a test issuer seeded per run (`buzz-load fi-issuers`), trusted
# and selected as the provision binding, policy mutations on, revalidation every second. The
# main community never requires FI; the fi part flips a second one.
FI_ISSUER=https://issuer.faults.test FI_SEED=$tag
BUZZ_NIP_FI_ISSUERS=$("$BIN/buzz-load" fi-issuers --issuer "$FI_ISSUER" --seed "$FI_SEED") ||
  die "faults: buzz-load fi-issuers failed"
export BUZZ_NIP_FI_ISSUERS BUZZ_NIP_FI_PROVISION_BINDING=$FI_ISSUER BUZZ_NIP_FI_UPGRADES_ENABLED=true
export BUZZ_NIP_FI_REVALIDATE_INTERVAL_SECS=1
BUS_TIMEOUT=${BUZZ_BUS_TIMEOUT_SECS:-5}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# svc_start NAME: the replica NAME (kind-N) in the background, its links through the proxies.
svc_start() {
  local name=$1 kind=${1%-*} nats="nats://127.0.0.1:$NATS_PORT" db=$DATABASE_URL
  [[ -n ${PROXY_PORT[$name:nats]:-} ]] && nats="nats://127.0.0.1:${PROXY_PORT[$name:nats]}"
  [[ -n ${PROXY_PORT[$name:pg]:-} ]] && db="postgres://postgres@127.0.0.1:${PROXY_PORT[$name:pg]}/$DB?sslmode=disable"
  local -a env=(NATS_URL="$nats" DATABASE_URL="$db" "BUZZ_${kind^^}_ADMIN_ADDR=127.0.0.1:${ADM[$name]}")
  case $kind in
    gateway) env+=(BUZZ_GATEWAY_ADDR="127.0.0.1:${PUB[$name]}") ;;
    policy) env+=(BUZZ_POLICY_ADDR="127.0.0.1:${PUB[$name]}" RELAY_OPERATOR_PUBKEYS="$OP_PUBKEY"
      RELAY_OPERATOR_API_ORIGIN="http://127.0.0.1:${PUB[policy-1]}") ;;
  esac
  env "${env[@]}" "$BIN/buzz-$kind" >>"$RUN/logs/$name.log" 2>&1 &
  PID[$name]=$!
  event "start $name pid ${PID[$name]}"
}
all_ready() {
  local s
  for s in "${SERVICES[@]}"; do ready "${ADM[$s]}" || return 1; done
}
replicas() {
  local s
  for s in "${SERVICES[@]}"; do [[ $s == "$1"-* ]] && echo "$s"; done
  return 0
}

# ---- the cluster -------------------------------------------------------------------------------
mkdir -p "$RUN/pg" "$RUN/pgsock" "$RUN/redis"
[[ $EUID -eq 0 ]] && chown postgres "$RUN/pg" "$RUN/pgsock" "$RUN/logs" && chmod 700 "$RUN/pg"
as_pg "$PGBIN/initdb" -D "$RUN/pg" -U postgres --auth=trust --no-sync >"$RUN/logs/initdb.log" 2>&1 ||
  { cat "$RUN/logs/initdb.log" >&2; die "faults: initdb failed"; }
pg_start
psql -q "$PG_URL/postgres" -c "CREATE DATABASE $DB" >/dev/null
redis_start
nats_start nats "$NATS_PORT"
nats_start load-nats "$LOAD_NATS_PORT"
for link in "${!PROXY_PORT[@]}"; do proxy_start "$link"; done
"$BIN/buzz" migrate --database-url "$DATABASE_URL" >"$RUN/logs/migrate.log" 2>&1 ||
  { cat "$RUN/logs/migrate.log" >&2; die "faults: buzz migrate failed"; }
relay_json=$("$BIN/buzz" keygen)
op_json=$("$BIN/buzz" keygen)
BUZZ_RELAY_SECRET_KEY=$(hex_field "$relay_json" secret_key)
export BUZZ_RELAY_SECRET_KEY
OP_SECRET=$(hex_field "$op_json" secret_key)
OP_PUBKEY=$(hex_field "$op_json" pubkey)
for s in "${SERVICES[@]}"; do svc_start "$s"; done
wait_until 90 all_ready || {
  for s in "${SERVICES[@]}"; do ready "${ADM[$s]}" || { log "--- $s not ready:"; tail -n 15 "$RUN/logs/$s.log" >&2; }; done
  die "faults: the cluster did not get ready within 90 s"
}
log "faults: cluster ready (PostgreSQL :$PG_PORT, Redis :$REDIS_PORT, NATS :$NATS_PORT, services :$((BASE + 40))-:$((BASE + 69))); run dir $RUN"

# The Service's ready endpoints, kept by a prober (each gateway's /readyz within 1 s, every 0.5 s).
ENDPOINTS=$RUN/endpoints
probe_endpoints() {
  local g
  while :; do
    for g in gateway-1 gateway-2; do ready "${ADM[$g]}" && echo "ws://127.0.0.1:${PUB[$g]}"; done >"$ENDPOINTS.tmp"
    [[ -s $ENDPOINTS.tmp ]] && mv "$ENDPOINTS.tmp" "$ENDPOINTS"
    sleep 0.5
  done
}
probe_endpoints &
PROBER=$!
wait_until 10 test -s "$ENDPOINTS" || die "faults: no ready gateway in the endpoints file"

# ---- faults ------------------------------------------------------------------------------------
# inject FAULT: does it, returns when it has ended (the moment recovery is timed from).
KILL_DOWN=2 ALL_DOWN=10 STOP_FOR=10 DEP_DOWN=5 SLOW_FOR=10 HOLD_FOR=10 CUT_FOR=5 STALL_FOR=20
inject() {
  local f=$1 what=${1#*:} s
  case $f in
    kill:*)
      s=$what-1
      kill -KILL "${PID[$s]}"; event "SIGKILL $s"; wait "${PID[$s]}" 2>/dev/null || true
      sleep "$KILL_DOWN"; svc_start "$s" ;;
    stop:*)
      s=$what-1
      kill -STOP "${PID[$s]}"; event "SIGSTOP $s"; sleep "$STOP_FOR"
      kill -CONT "${PID[$s]}"; event "SIGCONT $s" ;;
    all:*)
      for s in $(replicas "$what"); do kill -KILL "${PID[$s]}"; event "SIGKILL $s"; done
      for s in $(replicas "$what"); do wait "${PID[$s]}" 2>/dev/null || true; done
      sleep "$ALL_DOWN"
      for s in $(replicas "$what"); do svc_start "$s"; done ;;
    nats)
      kill -KILL "${PID[nats]}"; event "SIGKILL nats-server"; wait "${PID[nats]}" 2>/dev/null || true
      sleep "$DEP_DOWN"; nats_start nats "$NATS_PORT"; event "nats-server restarted" ;;
    pg)
      pg_crash; event "PostgreSQL stopped -m immediate"
      sleep "$DEP_DOWN"; pg_start; event "PostgreSQL restarted (crash recovery done)" ;;
    redis)
      kill -KILL "${PID[redis]}"; event "SIGKILL redis-server"; wait "${PID[redis]}" 2>/dev/null || true
      sleep "$DEP_DOWN"; redis_start; event "redis-server restarted empty" ;;
    readers)
      # The load was started with --stall-listeners WARMUP:STALL_FOR: every other listener
      # stops reading now, for STALL_FOR s.
      event "every other listener stops reading for $STALL_FOR s"; sleep "$STALL_FOR" ;;
    link-nats:* | link-pg:*)
      local link="$what:${f%%:*}"
      link=${link/link-/}
      proxy "$link" "delay 200"; sleep "$SLOW_FOR"
      proxy "$link" hold; sleep "$HOLD_FOR"
      proxy "$link" cut; sleep "$CUT_FOR"
      proxy "$link" pass ;;
    *) die "faults: unknown fault '$f'" ;;
  esac
}
# How long a fault lasts (for the load's duration).
fault_seconds() {
  case $1 in
    kill:*) echo $((KILL_DOWN + 1)) ;;
    stop:*) echo "$STOP_FOR" ;;
    all:*) echo $((ALL_DOWN + 1)) ;;
    nats | redis) echo $((DEP_DOWN + 1)) ;;
    pg) echo $((DEP_DOWN + 5)) ;;
    link-*) echo $((SLOW_FOR + HOLD_FOR + CUT_FOR)) ;;
    readers) echo "$STALL_FOR" ;;
  esac
}

if ((${#ONLY[@]})); then
  FAULTS=("${ONLY[@]}")
elif [[ -n $SHORT ]]; then
  FAULTS=(kill:write stop:query all:write nats pg redis link-nats:write-1 link-pg:query-1 readers)
else
  FAULTS=(kill:gateway kill:write kill:query kill:snapshot kill:policy
    stop:gateway stop:write stop:query stop:snapshot stop:policy
    all:policy all:snapshot all:query all:write nats pg redis
    link-nats:write-1 link-nats:gateway-1 link-pg:write-1 link-pg:query-1 readers)
fi

WARMUP=${FAULTS_WARMUP:-8}
AFTER=${FAULTS_AFTER:-20}
CLIENTS=${FAULTS_CLIENTS:-28}
SUBSCRIBERS=${FAULTS_SUBSCRIBERS:-12}
WEIGHTS=${FAULTS_WEIGHTS:-chat=45,artifacts=30,queries=15,snapshot=5,storm=5,fi=20}
THINK=${FAULTS_THINK_SCALE:-0.2}
TABLE=$RUN/table.md
{
  echo "| # | fault | load held | writes acked | lost | forks | leaks | fi leaks | silent live gaps | answers by prefix | time to recover | verdict |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$TABLE"
FAILED=0
T_ALL=$(now)

# acks_per_s AUDIT FROM TO: acknowledged writes per second between two instants (epoch s).
acks_per_s() {
  { grep -h '"t":"ack"' "$1"/*.ndjson || true; } | sed -n 's/.*"us":\([0-9]*\).*/\1/p' |
    awk -v a="$2" -v b="$3" '{t = $1 / 1e6; if (t >= a && t < b) n++} END {printf "%.1f", (b > a) ? n / (b - a) : 0}'
}

n=0
for f in "${FAULTS[@]}"; do
  n=$((n + 1))
  D=$RUN/$(printf '%02d' "$n")-${f//[:\/]/-}
  mkdir -p "$D"
  len=$(fault_seconds "$f")
  duration=$((WARMUP + len + AFTER))
  timeouts=(--fail-on-timeouts)
  # A paused gateway cannot answer its own clients; their waits are reported, not failed.
  [[ $f == stop:gateway ]] && timeouts=()
  stall=()
  [[ $f == readers ]] && stall=(--stall-listeners "$WARMUP:$STALL_FOR")
  urls=()
  for g in gateway-1 gateway-2; do urls+=(--url "ws://127.0.0.1:${PUB[$g]}"); done
  : >"$D/load.err"
  setsid "$BIN/buzz-load" coordinator --nats-url "nats://127.0.0.1:$LOAD_NATS_PORT" --spawn-workers 2 "${urls[@]}" \
    --host-header "f$n-$tag.faults.localhost" --endpoints-file "$ENDPOINTS" --reconnect --audit "$D/audit" \
    --operator-url "http://127.0.0.1:${PUB[policy-1]}" --operator-secret "$OP_SECRET" \
    --fi-issuer "$FI_ISSUER" --fi-seed "$FI_SEED" \
    --scenario workday --clients "$CLIENTS" --subscribers "$SUBSCRIBERS" --weights "$WEIGHTS" \
    --think-scale "$THINK" --snapshot-readers 4 --connect-timeout $((BUS_TIMEOUT + 1)) \
    --duration "$duration" --drain-timeout 15 --json "$D/load.json" "${stall[@]}" \
    >"$D/load.out" 2>"$D/load.err" &
  coord=$!
  PID[coordinator]=$coord
  if ! wait_until 120 grep -q 'ready with .* connection(s); starting' "$D/load.err"; then
    tail -n 20 "$D/load.err" >&2
    die "faults: the load of '$f' did not start (log above)"
  fi
  sleep "$WARMUP"
  EVENTS=$D/events.log
  F0=$(now)
  event "fault $f begins"
  log "faults: [$n/${#FAULTS[@]}] $f"
  inject "$f"
  F1=$(now)
  event "fault $f ended"
  if wait_until 60 all_ready; then
    TTR=$(since "$F1")
  else
    TTR=">60"
  fi
  event "all ready ($TTR s after the fault ended)"
  rc=0
  wait "$coord" || rc=$?
  unset "PID[coordinator]"
  EVENTS=$RUN/events.log
  crc=0
  "$BIN/buzz-load" check --audit "$D/audit" --database-url "$DATABASE_URL" "${timeouts[@]}" \
    --json "$D/check.json" --markdown "$D/check.md" --note "fault=$f" --note "time_to_recover_s=$TTR" \
    --note "coordinator_exit=$rc" >"$D/check.txt" 2>&1 || crc=$?
  pass=1
  ((crc == 0)) || pass=0
  ((rc == 0)) || pass=0
  [[ $TTR != ">60" ]] && awk -v t="$TTR" 'BEGIN {exit !(t <= 20)}' || pass=0
  base=$(acks_per_s "$D/audit" "$(awk -v a="$F0" -v w="$WARMUP" 'BEGIN {printf "%.3f", a - w + 1}')" "$F0")
  during=$(acks_per_s "$D/audit" "$F0" "$F1")
  held=$(awk -v a="$base" -v b="$during" 'BEGIN {if (a > 0) printf "%.0f %% (%s/s of %s/s)", 100 * b / a, b, a; else print "-"}')
  if [[ -s $D/check.json ]]; then
    row=$(jq -r --arg ttr "$TTR" '
      def sum: [.[]] | add // 0;
      [ (.acked | sum), .lost_count,
        ((.integrity.chains.forks // 0) + (.integrity.chains.wrong_tips // 0) + (.reads.history_forks // 0)),
        "\((.integrity.leaks // 0) + (.reads.history_leaks // 0) + (.reads.manifest_leaks // 0)) (reads checked: \(.integrity.private_to_members // 0) private deliveries, \(.reads.history_checked // 0) histories, \(.reads.manifests_checked // 0) manifests, \(.reads.manifests_off // 0) off)",
        (if .fi then "\(.fi.leaks) (\(.fi.enables + .fi.disables) flips)" else "-" end), .gaps_without_close,
        ([ (if .error_answers > 0 then "error: \(.error_answers)" else empty end),
           (.expected_refusals | to_entries[] | "\(.key): \(.value)"),
           (.other_refusals | to_entries[] | "\(.key): \(.value | sum) (unexpected)"),
           (if (.unanswered | sum) > 0 then "unanswered: \(.unanswered | sum)" else empty end),
           (if (.integrity.timeouts // 0) > 0 then "timeouts: \(.integrity.timeouts)" else empty end)
         ] | if length == 0 then "none" else join(", ") end),
        "\($ttr) s"
      ] | map(tostring) | join(" | ")' "$D/check.json")
  else
    row="- | - | - | - | - | - | check failed: $(tail -n 1 "$D/check.txt") | $TTR s"
  fi
  verdict=$( ((pass)) && echo PASS || echo FAIL)
  ((pass)) || FAILED=$((FAILED + 1))
  echo "| $n | $f | $held | $row | $verdict |" >>"$TABLE"
  log "faults: [$n/${#FAULTS[@]}] $f: $verdict (recovered in $TTR s; $D/check.txt)"
  # The next fault starts from a ready cluster.
  wait_until 60 all_ready || die "faults: the cluster is not ready after '$f'"
done

{
  echo
  echo "$n fault(s), $FAILED failed, $(since "$T_ALL") s ($PROFILE binaries, $(nproc) cores, $(date -u +%Y-%m-%d))"
} >>"$TABLE"
cat "$TABLE"
log "faults: $( ((FAILED == 0)) && echo PASS || echo FAIL ): $TABLE"
((FAILED == 0))
