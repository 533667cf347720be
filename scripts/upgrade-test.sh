#!/usr/bin/env bash
# The upgrade test: a release (FROM_REF) runs as separate processes on loopback under a mixed
# load, and is upgraded to HEAD (the working tree) the way charts/buzz-relay does it, while the
# load goes on; then the run is judged from what the clients saw and what PostgreSQL stored.
#
# Usage: scripts/upgrade-test.sh [--if-changed] [FROM_REF]
#   --if-changed: run only when store/migrations/ or bus/src/ differ between FROM_REF and the
#   working tree (a migration or a bus payload changed); scripts/test.sh runs it so.
#   FROM_REF defaults to the last release's commit in CHANGELOG.md (the first `Commit: <sha>`
#   under the first `## [X.Y.Z]` heading). HEAD itself is a rolling restart under load.
#
# 1. Builds FROM_REF's release binaries in a git worktree (/var/tmp/buzz-upgrade/src, checked
#    out at the sha; CARGO_TARGET_DIR /var/tmp/buzz-target-upgrade), kept in
#    /var/tmp/buzz-upgrade/from-<sha>/bin and reused for that sha; HEAD's release binaries in
#    $CARGO_TARGET_DIR (default /var/tmp/buzz-target). Builds run under `nice -n 10`.
# 2. Fresh database buzz_upgrade_test migrated by the OLD `buzz migrate`; the OLD release runs
#    as 2 gateways, 2 write-, 2 query-services, 1 snapshot, 1 policy (own NATS subject and Redis
#    key prefixes, ports 19600-19799).
# 3. HEAD's `buzz-load coordinator --scenario workday --subscribers N --reconnect --audit DIR`
#    (2 spawned workers) loads both gateways for the whole upgrade. Clients find the gateways in
#    an endpoints file, the Service's ready endpoints: a replica is added when its readiness
#    probe passes and removed when its termination starts.
# 4. The upgrade, as the chart: the migrate Job's command (`buzz migrate`, HEAD), then each
#    Deployment in the order the chart renders them (gateway, policy, query, snapshot, write),
#    one after another, replicas replaced one at a time as the default RollingUpdate (maxSurge 1,
#    maxUnavailable 0 at 2 replicas): start the new replica, wait for /readyz, then terminate the
#    old one (endpoint removed, preStop `sleep preStopDelaySeconds`, SIGTERM, SIGKILL after
#    terminationGracePeriodSeconds) while the next new replica starts. The gateway gets
#    BUZZ_SHUTDOWN_GRACE_SECS = grace - delay - 2, as the chart sets it.
# 5. `buzz-load check` judges the audit against the database: lost acknowledged writes,
#    answers by prefix, listener gaps, snapshot outcomes. Exit 0 only when everything passes.
#
# Output: $BUZZ_UPGRADE_RUNS/<time>/ (default /var/tmp/buzz-upgrade/runs): logs/, audit/,
# rollout.log, summary.json, summary.md. Environment knobs (defaults): UPGRADE_DURATION (150 s
# of load), UPGRADE_WARMUP (20 s before the upgrade starts), UPGRADE_CLIENTS (30),
# UPGRADE_SUBSCRIBERS (20), UPGRADE_WEIGHTS, UPGRADE_THINK_SCALE (0.2: think times of the
# workday profile x 0.2), UPGRADE_PORT (19600), UPGRADE_PROFILE (release | debug),
# UPGRADE_REPLAY_MARGIN (60 s), BUZZ_UPGRADE_NO_BUILD=1
# (use the binaries as they are), RUST_LOG (info).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh

IF_CHANGED=
case ${1:-} in
  -h | --help)
    sed -n '2,39p' "$0"
    exit 0
    ;;
  --if-changed)
    IF_CHANGED=1
    shift
    ;;
esac
T0=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}'; }

# ---- what to upgrade from ----------------------------------------------------------------------
FROM_REF=${1:-}
if [[ -z $FROM_REF ]]; then
  [[ -f CHANGELOG.md ]] || die "no FROM_REF given and no CHANGELOG.md to take the last release from"
  FROM_REF=$(awk '
    /^## \[[0-9]+\.[0-9]+\.[0-9]+[^]]*\]/ { inrel = 1; next }
    /^## / && inrel { exit }
    inrel && match($0, /^Commit: *[0-9a-f]{40}[[:space:]]*$/) { sub(/^Commit: */, ""); sub(/[[:space:]]+$/, ""); print; exit }
  ' CHANGELOG.md)
  [[ -n $FROM_REF ]] || die "CHANGELOG.md: no 'Commit: <40 hex>' line under the first '## [X.Y.Z]' release heading"
  FROM_VERSION=$(sed -n 's/^## \[\([0-9][0-9.]*[^]]*\)\].*/\1/p' CHANGELOG.md | grep -v -i unreleased | head -n 1)
  log "upgrade-test: last release ${FROM_VERSION:-?} is commit $FROM_REF (CHANGELOG.md)"
fi
FROM_SHA=$(git rev-parse --verify --quiet "$FROM_REF^{commit}") || die "FROM_REF '$FROM_REF' is not a commit here"
HEAD_SHA=$(git rev-parse HEAD)
if [[ -n $IF_CHANGED ]] && git diff --quiet "$FROM_SHA" -- store/migrations bus/src &&
  [[ -z $(git ls-files --others --exclude-standard -- store/migrations bus/src) ]]; then
  log "upgrade-test: no migration or bus payload changed since ${FROM_SHA:0:12}; skipped (--if-changed)"
  exit 0
fi
DIRTY=$(git status --porcelain --untracked-files=no | wc -l)

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}
UP=/var/tmp/buzz-upgrade
FROM_TARGET=/var/tmp/buzz-target-upgrade
# UPGRADE_PROFILE=debug runs unoptimised binaries (the ones scripts/test.sh has just built, so CI
# builds nothing but FROM_REF once); release is the default by hand.
PROFILE=${UPGRADE_PROFILE:-release}
case $PROFILE in
  release) PROFILE_FLAG=(--release) PROFILE_DIR=release SUFFIX="" ;;
  debug) PROFILE_FLAG=() PROFILE_DIR=debug SUFFIX=-debug ;;
  *) die "UPGRADE_PROFILE must be release or debug, not '$PROFILE'" ;;
esac
FROM_BIN=$UP/from-$FROM_SHA$SUFFIX/bin
BINS=(buzz buzz-gateway buzz-write buzz-query buzz-snapshot buzz-policy)
PKGS=(-p buzz-cli -p buzz-gateway -p buzz-write -p buzz-query -p buzz-snapshot -p buzz-policy)
mkdir -p "$UP"
exec 8>>"$UP/lock"
flock -w 5 8 || die "another scripts/upgrade-test.sh is running (lock $UP/lock)"

have_all() { for b in "${BINS[@]}"; do [[ -x $1/$b ]] || return 1; done; }

# ---- builds ------------------------------------------------------------------------------------
BUILD_FROM_S=0 BUILD_HEAD_S=0
if have_all "$FROM_BIN"; then
  log "upgrade-test: FROM ${FROM_SHA:0:12}: $PROFILE binaries already built ($FROM_BIN)"
else
  need_cargo
  b0=$(date +%s.%N)
  src=$UP/src
  if [[ -e $src/.git ]]; then
    git -C "$src" checkout --quiet --detach --force "$FROM_SHA"
  else
    rm -rf "$src"
    git worktree prune
    git worktree add --quiet --detach "$src" "$FROM_SHA"
  fi
  log "upgrade-test: building FROM ${FROM_SHA:0:12} ($PROFILE, worktree $src, target $FROM_TARGET; long on 2 cores)"
  (cd "$src" && CARGO_TARGET_DIR=$FROM_TARGET nice -n 10 cargo build "${PROFILE_FLAG[@]}" --quiet "${PKGS[@]}" --bins) ||
    die "building $FROM_SHA failed"
  mkdir -p "$FROM_BIN.tmp"
  for b in "${BINS[@]}"; do cp "$FROM_TARGET/$PROFILE_DIR/$b" "$FROM_BIN.tmp/"; done
  rm -rf "$FROM_BIN" && mv "$FROM_BIN.tmp" "$FROM_BIN"
  BUILD_FROM_S=$(elapsed "$b0")
fi
if [[ -z ${BUZZ_UPGRADE_NO_BUILD:-} ]]; then
  need_cargo
  b0=$(date +%s.%N)
  log "upgrade-test: building HEAD (the working tree, $PROFILE, target $CARGO_TARGET_DIR)"
  nice -n 10 cargo build "${PROFILE_FLAG[@]}" --quiet "${PKGS[@]}" -p buzz-load --bins || die "building HEAD failed"
  BUILD_HEAD_S=$(elapsed "$b0")
fi

RUN=${BUZZ_UPGRADE_RUNS:-$UP/runs}/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$RUN/logs" "$RUN/audit" "$RUN/bin-from" "$RUN/bin-to"
# Hard links (copies across file systems): the shared target directory may be rebuilt by
# someone else while this runs (cargo writes new files, the links keep these); removed at exit.
for b in "${BINS[@]}"; do cp -l "$FROM_BIN/$b" "$RUN/bin-from/" 2>/dev/null || cp "$FROM_BIN/$b" "$RUN/bin-from/"; done
for b in "${BINS[@]}" buzz-load; do
  cp -l "$CARGO_TARGET_DIR/$PROFILE_DIR/$b" "$RUN/bin-to/" 2>/dev/null || cp "$CARGO_TARGET_DIR/$PROFILE_DIR/$b" "$RUN/bin-to/" ||
    die "no HEAD binary $b (build first)"
done
OLD=$RUN/bin-from NEW=$RUN/bin-to
RT0=$(date +%s.%N)

# ---- the chart's settings ----------------------------------------------------------------------
VALUES=charts/buzz-relay/values.yaml
GRACE=$(sed -n 's/^terminationGracePeriodSeconds: *\([0-9]*\).*/\1/p' "$VALUES")
PRESTOP=$(sed -n 's/^preStopDelaySeconds: *\([0-9]*\).*/\1/p' "$VALUES")
[[ $GRACE =~ ^[0-9]+$ && $PRESTOP =~ ^[0-9]+$ ]] || die "cannot read terminationGracePeriodSeconds/preStopDelaySeconds from $VALUES"
GW_DRAIN=$((GRACE - PRESTOP - 2))
ORDER=(gateway policy query snapshot write) # the order `range` renders the Deployments in

# ---- environment -------------------------------------------------------------------------------
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
DB=buzz_upgrade_test
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB?sslmode=disable"
BASE=${UPGRADE_PORT:-19600}
HOST=upgrade.localhost
tag=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
export BUZZ_NATS_PREFIX="up$tag" BUZZ_REDIS_PREFIX="up:$tag:"
export RUST_LOG=${RUST_LOG:-info} BUZZ_LOG_FORMAT=${BUZZ_LOG_FORMAT:-text}
export BUZZ_RATE_CONN_PER_SEC=${BUZZ_RATE_CONN_PER_SEC:-1000000}
export BUZZ_RATE_CONN_BURST=${BUZZ_RATE_CONN_BURST:-1000000}
export BUZZ_RATE_PUBKEY_PER_MIN=${BUZZ_RATE_PUBKEY_PER_MIN:-100000000}
# The chart's defaults for what it sets per service (values.yaml services.*).
export BUZZ_WRITE_DB_CONNECTIONS=6 BUZZ_WRITE_BATCH_LANES=1 BUZZ_WRITE_BATCH_MAX=64
export BUZZ_QUERY_DB_CONNECTIONS=8 BUZZ_SNAPSHOT_DB_CONNECTIONS=3
export BUZZ_SHUTDOWN_GRACE_SECS=$GW_DRAIN
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

bash scripts/deps-up.sh >"$RUN/logs/deps-up.log" 2>&1 || { cat "$RUN/logs/deps-up.log" >&2; die "deps-up failed"; }

# ---- processes ---------------------------------------------------------------------------------
declare -A PID PUB ADM
SERIAL=0
COORD=
ANALYZER=
ROLL=$RUN/rollout.log
ENDPOINTS=$RUN/endpoints
: >"$ROLL"
event() { printf '%s %s\n' "$(date +%s.%N)" "$*" >>"$ROLL"; }

cleanup() {
  local p
  [[ -n $COORD ]] && kill "$COORD" 2>/dev/null
  [[ -n $ANALYZER ]] && kill "$ANALYZER" 2>/dev/null
  for p in "${PID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${PID[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "${RUN:?}/bin-from" "${RUN:?}/bin-to"
}
trap cleanup EXIT

# start KIND BINDIR: a new replica (its name KIND-N) in the background; sets REPLICA.
start() {
  local kind=$1 bin=$2 n=$SERIAL name
  SERIAL=$((SERIAL + 1))
  name=$kind-$n
  local -a env=()
  case $kind in
    gateway)
      PUB[$name]=$((BASE + n)) ADM[$name]=$((BASE + 100 + n))
      env=(BUZZ_GATEWAY_ADDR="127.0.0.1:${PUB[$name]}" BUZZ_GATEWAY_ADMIN_ADDR="127.0.0.1:${ADM[$name]}") ;;
    policy)
      PUB[$name]=$((BASE + n)) ADM[$name]=$((BASE + 100 + n))
      env=(BUZZ_POLICY_ADDR="127.0.0.1:${PUB[$name]}" BUZZ_POLICY_ADMIN_ADDR="127.0.0.1:${ADM[$name]}"
        RELAY_OPERATOR_PUBKEYS="$OP_PUBKEY" RELAY_OPERATOR_API_ORIGIN="http://127.0.0.1:$POLICY_PORT") ;;
    write | query | snapshot)
      ADM[$name]=$((BASE + 100 + n))
      env=("BUZZ_${kind^^}_ADMIN_ADDR=127.0.0.1:${ADM[$name]}") ;;
  esac
  env "${env[@]}" "$bin/buzz-$kind" >"$RUN/logs/$name.log" 2>&1 &
  PID[$name]=$!
  REPLICA=$name
  event "start $name pid ${PID[$name]} ($([[ $bin == "$OLD" ]] && echo old || echo new))"
}
wait_ready() {
  local name=$1
  if ! wait_until 60 ready "${ADM[$name]}"; then
    tail -n 30 "$RUN/logs/$name.log" >&2
    die "$name did not get ready within 60 s (log above: $RUN/logs/$name.log)"
  fi
  event "ready $name"
}
# The Service's ready endpoints: every gateway in GW_READY, written atomically.
GW_READY=()
write_endpoints() {
  local g
  for g in "${GW_READY[@]}"; do echo "ws://127.0.0.1:${PUB[$g]}"; done >"$ENDPOINTS.tmp"
  mv "$ENDPOINTS.tmp" "$ENDPOINTS"
}
# gone PID: the process has exited (a zombie until reaped counts as exited).
gone() { [[ ! -e /proc/$1 ]] || [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == Z ]]; }
# terminate NAME: what the kubelet does to a terminating pod, in the background: preStop
# sleep, SIGTERM, SIGKILL at the end of the grace period. (Endpoint removal is done by the caller.)
TERMINATORS=()
terminate() {
  local name=$1 pid=${PID[$1]}
  (
    event "terminate $name: preStop sleep $PRESTOP s"
    sleep "$PRESTOP"
    event "SIGTERM $name"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$(($(date +%s) + GRACE - PRESTOP))
    until gone "$pid"; do
      if (($(date +%s) >= deadline)); then
        event "SIGKILL $name (still running after the ${GRACE} s grace period)"
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.1
    done
    event "exited $name"
  ) &
  TERMINATORS+=($!)
}

# ---- the old release ---------------------------------------------------------------------------
psql -q "postgres://postgres@127.0.0.1:5432/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
psql -q "postgres://postgres@127.0.0.1:5432/postgres" -c "CREATE DATABASE $DB" >/dev/null
"$OLD/buzz" migrate --database-url "$DATABASE_URL" >"$RUN/logs/migrate-old.log" 2>&1 ||
  { cat "$RUN/logs/migrate-old.log" >&2; die "the old buzz migrate failed"; }
relay_json=$("$NEW/buzz" keygen)
op_json=$("$NEW/buzz" keygen)
BUZZ_RELAY_SECRET_KEY=$(hex_field "$relay_json" secret_key)
export BUZZ_RELAY_SECRET_KEY
OP_SECRET=$(hex_field "$op_json" secret_key)
OP_PUBKEY=$(hex_field "$op_json" pubkey)
POLICY_PORT=$((BASE + SERIAL)) # the first policy replica's port: the operator API's origin

declare -A CURRENT # Deployment -> its replicas (names, space-separated)
start policy "$OLD"
CURRENT[policy]=$REPLICA
for kind in write write query query snapshot gateway gateway; do
  start "$kind" "$OLD"
  CURRENT[$kind]="${CURRENT[$kind]:-} $REPLICA"
done
for kind in "${ORDER[@]}"; do
  for r in ${CURRENT[$kind]}; do wait_ready "$r"; done
done
for g in ${CURRENT[gateway]}; do GW_READY+=("$g"); done
write_endpoints
log "upgrade-test: FROM ${FROM_SHA:0:12} running: 2 gateways, 2 write, 2 query, 1 snapshot, 1 policy (run dir $RUN)"

# ---- the load ----------------------------------------------------------------------------------
DURATION=${UPGRADE_DURATION:-150}
WARMUP=${UPGRADE_WARMUP:-20}
CLIENTS=${UPGRADE_CLIENTS:-30}
SUBSCRIBERS=${UPGRADE_SUBSCRIBERS:-20}
WEIGHTS=${UPGRADE_WEIGHTS:-chat=45,artifacts=25,queries=15,snapshot=5,storm=10}
THINK=${UPGRADE_THINK_SCALE:-0.2}
MARGIN=${UPGRADE_REPLAY_MARGIN:-60}
urls=()
for g in "${GW_READY[@]}"; do urls+=(--url "ws://127.0.0.1:${PUB[$g]}"); done
"$NEW/buzz-load" coordinator --spawn-workers 2 "${urls[@]}" --host-header "$HOST" \
  --endpoints-file "$ENDPOINTS" --reconnect --audit "$RUN/audit" \
  --operator-url "http://127.0.0.1:$POLICY_PORT" --operator-secret "$OP_SECRET" \
  --scenario workday --clients "$CLIENTS" --subscribers "$SUBSCRIBERS" --weights "$WEIGHTS" \
  --think-scale "$THINK" --snapshot-readers 16 --replay-margin "$MARGIN" \
  --duration "$DURATION" --drain-timeout 20 --json "$RUN/load.json" \
  >"$RUN/logs/load.out" 2>"$RUN/logs/load.err" &
COORD=$!
# Autovacuum's ANALYZE, every 20 s: a server with autovacuum off (as on the development machine)
# never analyses the fresh database, and the planner without statistics picks plans no production
# server would run (docs/operations.md "The upgrade test").
if [[ $(psql "$DATABASE_URL" -qtAc 'SHOW autovacuum' 2>/dev/null) != on ]]; then
  while sleep 20; do psql "$DATABASE_URL" -qc ANALYZE >/dev/null 2>&1 || true; done &
  ANALYZER=$!
  log "upgrade-test: autovacuum is off on this server; ANALYZE every 20 s in its place"
fi
if ! wait_until 180 grep -q 'ready with .* connection(s); starting' "$RUN/logs/load.err"; then
  tail -n 30 "$RUN/logs/load.err" >&2
  die "the load did not start (log above)"
fi
LOAD_START=$(date +%s.%N)
event "load started"
log "upgrade-test: load running ($CLIENTS clients, $SUBSCRIBERS listeners, ${DURATION} s); upgrade in ${WARMUP} s"
sleep "$WARMUP"

# ---- the upgrade -------------------------------------------------------------------------------
U0=$(date +%s.%N)
event "migrate (HEAD buzz migrate)"
m0=$(date +%s.%N)
"$NEW/buzz" migrate --database-url "$DATABASE_URL" >"$RUN/logs/migrate-new.log" 2>&1 ||
  { cat "$RUN/logs/migrate-new.log" >&2; die "HEAD's buzz migrate failed"; }
MIGRATE_S=$(awk -v a="$m0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')
event "migrated in $MIGRATE_S s"
log "upgrade-test: migrate took $MIGRATE_S s; rolling ${ORDER[*]}"
KILLED=0
for kind in "${ORDER[@]}"; do
  new=()
  TERMINATORS=()
  for old in ${CURRENT[$kind]}; do
    start "$kind" "$NEW"
    r=$REPLICA
    wait_ready "$r"
    new+=("$r")
    if [[ $kind == gateway ]]; then
      GW_READY+=("$r")
      mapfile -t GW_READY < <(printf '%s\n' "${GW_READY[@]}" | grep -vx "$old")
      write_endpoints
      event "endpoints: ${GW_READY[*]}"
    fi
    terminate "$old"
  done
  for t in "${TERMINATORS[@]}"; do wait "$t"; done
  for old in ${CURRENT[$kind]}; do
    wait "${PID[$old]}" 2>/dev/null || true
    unset "PID[$old]"
  done
  CURRENT[$kind]="${new[*]}"
  event "rolled $kind"
  log "upgrade-test: rolled $kind ($(elapsed "$U0") s into the upgrade)"
done
ROLL_S=$(elapsed "$U0")
KILLED=$(grep -c SIGKILL "$ROLL" || true)
LOAD_LEFT=$(awk -v s="$LOAD_START" -v d="$DURATION" -v n="$(date +%s.%N)" 'BEGIN {printf "%.0f", s + d - n}')
event "upgrade done in $ROLL_S s; load window left ${LOAD_LEFT} s"
log "upgrade-test: upgrade done in $ROLL_S s (migrate $MIGRATE_S s); load goes on for ${LOAD_LEFT} s more"

LOAD_RC=0
wait "$COORD" || LOAD_RC=$?
COORD=
event "load ended (coordinator exit $LOAD_RC)"

# ---- the verdict -------------------------------------------------------------------------------
TOTAL_S=$(elapsed "$RT0")
CHECK_RC=0
"$NEW/buzz-load" check --audit "$RUN/audit" --database-url "$DATABASE_URL" \
  --json "$RUN/check.json" --markdown "$RUN/check.md" \
  --note "from=$FROM_REF ($FROM_SHA)" --note "to=HEAD $HEAD_SHA$( ((DIRTY)) && echo " + $DIRTY modified file(s)")" \
  --note "migrate_seconds=$MIGRATE_S" --note "rollout_seconds=$ROLL_S" \
  --note "run_seconds=$TOTAL_S (excluding builds)" --note "sigkills=$KILLED" \
  --note "load_window_left_after_upgrade_seconds=$LOAD_LEFT" --note "coordinator_exit=$LOAD_RC" \
  --note "order=migrate, then ${ORDER[*]}; maxSurge 1, maxUnavailable 0; preStop ${PRESTOP} s, grace ${GRACE} s, gateway drain ${GW_DRAIN} s" \
  | tee "$RUN/check.txt" || CHECK_RC=$?
((LOAD_LEFT > 5)) || { log "upgrade-test: FAIL: the load ended before the upgrade did (raise UPGRADE_DURATION)"; CHECK_RC=1; }
((LOAD_RC == 0)) || { log "upgrade-test: FAIL: the load coordinator exited $LOAD_RC (logs/load.err)"; CHECK_RC=1; }

jq -n --slurpfile check "$RUN/check.json" --slurpfile load "$RUN/load.json" \
  --arg from "$FROM_REF" --arg from_sha "$FROM_SHA" --arg head "$HEAD_SHA" --argjson dirty "$DIRTY" \
  --argjson migrate "$MIGRATE_S" --argjson rollout "$ROLL_S" --argjson total "$TOTAL_S" \
  --argjson build_from "$BUILD_FROM_S" --argjson build_head "$BUILD_HEAD_S" --argjson rc "$CHECK_RC" \
  --argjson killed "$KILLED" --rawfile rollout_log "$ROLL" '{
    pass: ($rc == 0), from: $from, from_sha: $from_sha, head_sha: $head, modified_files: $dirty,
    migrate_seconds: $migrate, rollout_seconds: $rollout, run_seconds_excluding_builds: $total,
    build_seconds: {from: $build_from, head: $build_head}, sigkills: $killed,
    writes_acknowledged: ($check[0].acked | [.[]] | add), lost: $check[0].lost_count,
    error_answers: $check[0].error_answers, error_texts: $check[0].error_texts,
    expected_refusals: $check[0].expected_refusals, other_refusals: $check[0].other_refusals,
    unanswered: $check[0].unanswered,
    listener_gaps: {without_close: $check[0].gaps_without_close, not_replayed: $check[0].missed_after_close,
      listeners_failed: $check[0].listeners_failed, expected: $check[0].listener_expected,
      received: $check[0].listener_received, resubscribes: $check[0].listener_resubscribes},
    snapshots: $check[0].snapshots, reconnects: $check[0].reconnects, transport: $check[0].transport,
    check: $check[0], load: $load[0].totals, rollout_log: ($rollout_log | split("\n"))
  }' >"$RUN/summary.json" 2>/dev/null || jq -n --slurpfile check "$RUN/check.json" '{check: $check[0]}' >"$RUN/summary.json"
{
  echo "# Upgrade test ${FROM_REF} (${FROM_SHA:0:12}) → HEAD (${HEAD_SHA:0:12}$( ((DIRTY)) && echo ", $DIRTY modified file(s)"))"
  echo
  cat "$RUN/check.md"
  echo
  echo "Rollout (seconds since the load started):"
  echo
  echo '```'
  awk -v s="$LOAD_START" '{t = $1; $1 = ""; printf "%7.1f%s\n", t - s, $0}' "$ROLL"
  echo '```'
} >"$RUN/summary.md"
log "upgrade-test: $( ((CHECK_RC == 0)) && echo PASS || echo FAIL ) in $TOTAL_S s (excluding builds); summary: $RUN/summary.md, $RUN/summary.json"
exit "$CHECK_RC"
