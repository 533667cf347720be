#!/usr/bin/env bash
# Make sure the local services buzz-relay's tests need are running:
#   PostgreSQL  127.0.0.1:5432  (user postgres, no password over TCP)
#   Redis       127.0.0.1:6379
#   NATS        127.0.0.1:4222  (JetStream enabled)
# Missing services are installed from Debian packages and started on loopback only.
# Idempotent; when everything is already up it only checks (well under a second).
#
# Overrides: when DATABASE_URL / REDIS_URL / NATS_URL point anywhere else than the
# default loopback address and port, that service is not managed, only checked for
# reachability.
#
# Usage: scripts/deps-up.sh [-n|--dry-run] [-h|--help]
#   -n, --dry-run   check only; print what would be installed/started/changed
# Environment: DEPS_UP_TIMEOUT  seconds to wait for each service to come up (30)
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$SCRIPT_DIR/lib.sh"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

DRY_RUN=0
for arg in "$@"; do
  case $arg in
    -n | --dry-run) DRY_RUN=1 ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) die "unknown argument: $arg (try --help)" ;;
  esac
done

TIMEOUT=${DEPS_UP_TIMEOUT:-30}
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "DEPS_UP_TIMEOUT must be a whole number of seconds, got '$TIMEOUT'"

PG_URL_DEFAULT=postgres://postgres@127.0.0.1:5432/postgres
REDIS_URL_DEFAULT=redis://127.0.0.1:6379
NATS_URL_DEFAULT=nats://127.0.0.1:4222

REDIS_LOG=/var/log/redis/ci.log
NATS_BIN=/usr/sbin/nats-server
NATS_LOG=/var/log/nats-server.log
PG_HBA_MARK='# added by buzz-relay scripts/deps-up.sh: password-less local TCP connections'

# ---------------------------------------------------------------- classification

# is_local URL SCHEMES PORT HOSTS: URL is one of SCHEMES (space separated) on one of
# HOSTS with PORT (or no port): that is the instance this script manages.
is_local() {
  local url=$1 schemes=" $2 " port=$3 hosts=" $4 "
  [[ $url != *,* ]] || return 1 # a list of servers: not ours
  parse_url "$url"
  [[ -z $URL_SCHEME || $schemes == *" $URL_SCHEME "* ]] || return 1
  [[ -n $URL_HOST && $hosts == *" $URL_HOST "* ]] || return 1
  [[ -z $URL_PORT || $URL_PORT == "$port" ]]
}

PG_URL=${DATABASE_URL:-$PG_URL_DEFAULT}
REDIS_URL_EFF=${REDIS_URL:-$REDIS_URL_DEFAULT}
NATS_URL_EFF=${NATS_URL:-$NATS_URL_DEFAULT}
PG_MANAGED=1 REDIS_MANAGED=1 NATS_MANAGED=1
# key=value conninfo strings and URLs with ?host=... are never ours
if [[ $PG_URL != *://* || $PG_URL == *[?\&]host=* || $PG_URL == *[?\&]hostaddr=* || $PG_URL == *[?\&]port=* ]] ||
  ! is_local "$PG_URL" "postgres postgresql" 5432 "127.0.0.1 localhost ::1"; then
  PG_MANAGED=0
fi
is_local "$REDIS_URL_EFF" "redis" 6379 "127.0.0.1 localhost ::1" || REDIS_MANAGED=0
is_local "$NATS_URL_EFF" "nats" 4222 "127.0.0.1 localhost" || NATS_MANAGED=0

# ---------------------------------------------------------------- probes

# pg_ready: 0 = accepting connections on 127.0.0.1:5432, 1 = starting up, 2 = nothing there
pg_ready() {
  if pg_client_ok; then
    local out
    out=$(pg_isready -h 127.0.0.1 -p 5432 -t 2 2>&1) && return 0
    case $out in
      *rejecting*) return 1 ;;
      *"no response"* | *"no attempt"*) return 2 ;;
    esac
  fi
  tcp_open 127.0.0.1 5432 2 || return 2 # no usable pg_isready: a TCP connect will do
}

# pg_client_ok: psql and pg_isready work (on Debian they are wrappers that fail when no
# postgresql-client-NN package is installed)
pg_client_ok() {
  have psql && have pg_isready || return 1
  [[ $(readlink -f "$(command -v psql)") == */pg_wrapper ]] || return 0
  compgen -G '/usr/lib/postgresql/*/bin/psql' >/dev/null && compgen -G '/usr/lib/postgresql/*/bin/pg_isready' >/dev/null
}

# pg_login: connect to PG_URL without a password (no PGPASSWORD, no ~/.pgpass: a
# missing PGPASSFILE is silently ignored); the error text goes to PG_LOGIN_ERR.
pg_login() {
  PG_LOGIN_ERR=$(env -u PGPASSWORD -u PGSERVICE PGPASSFILE=/nonexistent/buzz-no-pgpass PGCONNECT_TIMEOUT=5 \
    psql -d "$PG_URL" -w -X -A -t -q -c 'select 1' 2>&1 >/dev/null)
}

pg_installed() { have pg_ctlcluster && have pg_lsclusters && compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }

# redis_ping: PING 127.0.0.1:6379; the reply line goes to REDIS_REPLY (empty when
# nothing listens there).
redis_ping() {
  REDIS_REPLY=$(
    exec 2>/dev/null
    exec 3<>/dev/tcp/127.0.0.1/6379 || exit 1
    printf 'PING\r\n' >&3
    IFS= read -r -t 2 line <&3 || line='(no reply within 2s)'
    printf '%s' "${line%$'\r'}"
  ) || REDIS_REPLY='' # nothing listening
  [[ $REDIS_REPLY == +PONG ]]
}

# nats_probe: sets NATS_STATE to up (JetStream on) | nojs | other (port taken by
# something that is not NATS) | down, from the INFO line a NATS server sends first.
nats_probe() {
  local info
  info=$(
    exec 2>/dev/null
    exec 3<>/dev/tcp/127.0.0.1/4222 || exit 1
    IFS= read -r -t 2 line <&3
    printf '%s' "${line%$'\r'}"
  ) || {
    NATS_STATE=down
    return 0
  }
  if [[ $info != INFO* ]]; then
    NATS_STATE=other
  elif [[ $info == *'"jetstream":true'* ]]; then
    NATS_STATE=up
  else
    NATS_STATE=nojs
  fi
}
nats_up() {
  nats_probe
  [[ $NATS_STATE == up ]]
}

proc_alive() { ! have pgrep || pgrep -x "$1" >/dev/null; }
redis_alive() { proc_alive redis-server; }
nats_alive() { proc_alive nats-server; }

# ---------------------------------------------------------------- unmanaged targets

# check_reachable NAME URL DEFAULT_PORT VAR: TCP connect to each host:port in URL (a
# comma-separated list is allowed); one reachable server is enough.
check_reachable() {
  local name=$1 url=$2 dport=$3 var=$4 u urls=() tried=()
  IFS=, read -ra urls <<<"$url"
  for u in "${urls[@]}"; do
    parse_url "$u"
    [[ -n $URL_HOST ]] || continue
    tried+=("$URL_HOST:${URL_PORT:-$dport}")
    if tcp_open "$URL_HOST" "${URL_PORT:-$dport}" 5; then
      say "$name: up (reachable at ${tried[-1]}; $var is not the local default, not managed)"
      return 0
    fi
  done
  die "$name: $var=$(mask_url "$url") is not reachable (tried: ${tried[*]:-no host in URL}).
  It is not the local default, so this script does not start it. Start that server, or unset $var to use the local one."
}

check_pg_external() {
  local out
  if pg_client_ok; then
    if out=$(pg_isready -d "$PG_URL" -t 5 2>&1); then
      say "postgres: up (reachable: $out; DATABASE_URL is not the local default, not managed)"
      return 0
    fi
    die "postgres: DATABASE_URL=$(mask_url "$PG_URL") is not usable: ${out:-pg_isready failed}.
  It is not the local default, so this script does not start it. Start that server, or unset DATABASE_URL to use the local one."
  elif [[ $PG_URL == *://* ]]; then
    check_reachable postgres "$PG_URL" 5432 DATABASE_URL
  else
    say "postgres: not checked (DATABASE_URL is a key=value string and pg_isready is not installed; not managed)"
  fi
}

# ---------------------------------------------------------------- PostgreSQL

# pg_pick_cluster: the Debian cluster to run on 5432: PG_VER PG_CLUSTER PG_CL_PORT
# PG_CL_STATUS PG_LOG (PG_VER empty when there is no cluster at all). Prefers a
# cluster configured for 5432, else "main" of the newest version.
pg_pick_cluster() {
  local ver name port status owner dir logf main=''
  PG_VER='' PG_CLUSTER='' PG_CL_PORT='' PG_CL_STATUS='' PG_LOG=''
  while read -r ver name port status owner dir logf; do
    : "$owner" "$dir"
    if [[ $port == 5432 && -z $PG_VER ]]; then
      PG_VER=$ver PG_CLUSTER=$name PG_CL_PORT=$port PG_CL_STATUS=$status PG_LOG=$logf
    elif [[ $name == main ]]; then
      main="$ver $name $port $status $logf"
    fi
  done < <(pg_lsclusters -h 2>/dev/null | sort -V)
  if [[ -z $PG_VER && -n $main ]]; then
    read -r PG_VER PG_CLUSTER PG_CL_PORT PG_CL_STATUS PG_LOG <<<"$main"
  fi
}

# pg_ctl_flags: on a machine without systemd, pg_ctlcluster must not try to redirect
# to systemctl; with systemd, let it (the cluster then stays under systemd's control).
pg_ctl_flags() {
  PG_CTL_FLAGS=()
  [[ -d /run/systemd/system ]] || PG_CTL_FLAGS=(--skip-systemctl-redirect)
}

# listen_is_loopback VALUE: listen_addresses only names loopback, including 127.0.0.1
listen_is_loopback() {
  local item ok=0 items=()
  IFS=, read -ra items <<<"${1// /}"
  ((${#items[@]})) || return 1
  for item in "${items[@]}"; do
    case $item in
      localhost | 127.0.0.1) ok=1 ;;
      ::1) ;;
      *) return 1 ;;
    esac
  done
  ((ok))
}

pg_start() {
  if ! pg_installed; then
    [[ $DRY_RUN == 1 ]] && {
      log "postgres: would create (if the package did not) and start cluster main on 127.0.0.1:5432"
      return 0
    }
    die "postgres: PostgreSQL is not installed even after apt-get install postgresql"
  fi
  pg_ctl_flags
  pg_pick_cluster
  if [[ -z $PG_VER ]]; then
    local v
    v=$(printf '%s\n' /usr/lib/postgresql/*/bin/postgres | sed 's#^/usr/lib/postgresql/##; s#/.*##' | sort -V | tail -n 1)
    log "postgres: no cluster exists; creating $v/main on port 5432"
    as_root pg_createcluster --port 5432 "$v" main >&2 || die "postgres: pg_createcluster $v main failed"
    PG_VER=$v PG_CLUSTER=main PG_CL_PORT=5432 PG_CL_STATUS=down PG_LOG=/var/log/postgresql/postgresql-$v-main.log
  fi
  local conf_dir=/etc/postgresql/$PG_VER/$PG_CLUSTER
  if [[ $PG_CL_STATUS == online* ]]; then
    die "postgres: cluster $PG_VER/$PG_CLUSTER is running (port $PG_CL_PORT) but 127.0.0.1:5432 does not accept connections.
  Check port and listen_addresses in $conf_dir/postgresql.conf (need 5432 and localhost), then:
    pg_ctlcluster $PG_VER $PG_CLUSTER restart      (log: $PG_LOG)"
  fi
  if [[ $PG_CL_PORT != 5432 ]]; then
    log "postgres: setting port = 5432 for cluster $PG_VER/$PG_CLUSTER (was $PG_CL_PORT)"
    as_root pg_conftool "$PG_VER" "$PG_CLUSTER" set port 5432 || die "postgres: could not set the port in $conf_dir/postgresql.conf"
  fi
  local listen
  listen=$(pg_conftool -s "$PG_VER" "$PG_CLUSTER" show listen_addresses 2>/dev/null) || listen=localhost # unset: default localhost
  if ! listen_is_loopback "$listen"; then
    log "postgres: setting listen_addresses = 'localhost' for cluster $PG_VER/$PG_CLUSTER (was '$listen')"
    as_root pg_conftool "$PG_VER" "$PG_CLUSTER" set listen_addresses localhost ||
      die "postgres: could not set listen_addresses in $conf_dir/postgresql.conf"
  fi
  log "postgres: starting cluster $PG_VER/$PG_CLUSTER"
  if ! as_root pg_ctlcluster "${PG_CTL_FLAGS[@]}" "$PG_VER" "$PG_CLUSTER" start >&2; then
    show_log "$PG_LOG"
    die "postgres: pg_ctlcluster $PG_VER $PG_CLUSTER start failed (log: $PG_LOG)"
  fi
  [[ $DRY_RUN == 1 ]] && return 0
  wait_for "postgres (cluster $PG_VER/$PG_CLUSTER)" "$TIMEOUT" "$PG_LOG" true pg_ready ||
    die "postgres: not accepting connections on 127.0.0.1:5432 (log: $PG_LOG)"
}

# pg_hba_with_trust: pg_hba.conf on stdin -> stdout with trust lines for local TCP
# prepended (pg_hba.conf is first-match, so they must come before any password rule).
pg_hba_with_trust() {
  printf '%s\n' "$PG_HBA_MARK" \
    'host    all             all             127.0.0.1/32            trust' \
    'host    all             all             ::1/128                 trust' \
    ''
  cat
}

# pg_fix_auth: make password-less TCP logins from loopback work (pg_hba.conf: trust),
# then reload. Only called after such a login failed with an authentication error.
pg_fix_auth() {
  pg_pick_cluster
  if [[ -z $PG_VER || $PG_CL_PORT != 5432 || $PG_CL_STATUS != online* ]]; then
    die "postgres: password-less login as $(mask_url "$PG_URL") fails and the server on 5432 is not a Debian cluster this script can configure:
  $PG_LOGIN_ERR
  Allow it with 'host all all 127.0.0.1/32 trust' (and ::1/128) at the top of its pg_hba.conf, then reload it."
  fi
  local hba
  hba=$(pg_conftool -s "$PG_VER" "$PG_CLUSTER" show hba_file 2>/dev/null) || hba=/etc/postgresql/$PG_VER/$PG_CLUSTER/pg_hba.conf
  log "postgres: password-less login failed: ${PG_LOGIN_ERR//$'\n'/ }"
  log "postgres: adding trust for 127.0.0.1/32 and ::1/128 at the top of $hba, then reloading"
  if [[ $DRY_RUN == 1 ]]; then
    as_root cp -p "$hba" "$hba.bak-buzz"
    log "  would prepend to $hba:"
    pg_hba_with_trust </dev/null | sed 's/^/    /' >&2
    pg_ctl_flags
    as_root pg_ctlcluster "${PG_CTL_FLAGS[@]}" "$PG_VER" "$PG_CLUSTER" reload
    return 0
  fi
  local content
  content=$(as_root cat -- "$hba") || die "postgres: cannot read $hba"
  if grep -qF "$PG_HBA_MARK" <<<"$content"; then
    die "postgres: $hba already has this script's trust lines but password-less login still fails:
  $PG_LOGIN_ERR"
  fi
  as_root cp -p -- "$hba" "$hba.bak-buzz" || die "postgres: cannot back up $hba"
  pg_hba_with_trust <<<"$content" | as_root tee -- "$hba" >/dev/null || die "postgres: cannot write $hba"
  pg_ctl_flags
  as_root pg_ctlcluster "${PG_CTL_FLAGS[@]}" "$PG_VER" "$PG_CLUSTER" reload >&2 ||
    die "postgres: reload of cluster $PG_VER/$PG_CLUSTER failed (log: $PG_LOG)"
  # the reload is asynchronous: retry the login for a few seconds
  wait_for "postgres password-less login" 10 "$PG_LOG" true pg_login ||
    die "postgres: password-less login still fails after editing $hba (backup: $hba.bak-buzz):
  $PG_LOGIN_ERR"
}

ensure_postgres() {
  local t0 rc=0 how
  now_ms
  t0=$REPLY
  pg_ready || rc=$?
  if ((rc == 1)); then
    how="was starting up"
    pg_pick_cluster
    [[ $DRY_RUN == 1 ]] || wait_for postgres "$TIMEOUT" "${PG_LOG:-/var/log/postgresql/}" true pg_ready ||
      die "postgres: 127.0.0.1:5432 keeps rejecting connections (log: ${PG_LOG:-/var/log/postgresql/})"
  elif ((rc == 0)); then
    how="already running"
    [[ " ${NEED_PKGS[*]} " == *" postgresql "* ]] && how="started on package install"
  else
    pg_start
    [[ $DRY_RUN == 1 ]] && {
      say "postgres: down (dry run: would start it as above)"
      return 0
    }
    how="started cluster $PG_VER/$PG_CLUSTER in $(since "$t0")"
  fi
  if [[ $DRY_RUN == 1 ]] && ! pg_client_ok; then
    say "postgres: up ($how; dry run: psql missing, would install postgresql-client and check the login)"
    return 0
  fi
  if ! pg_login; then
    case $PG_LOGIN_ERR in
      # only authentication failures are fixed by pg_hba.conf (not e.g. a missing role)
      *"authentication failed"* | *"no password supplied"* | *"pg_hba.conf entry"*) pg_fix_auth ;;
      *) die "postgres: 127.0.0.1:5432 is up but logging in as $(mask_url "$PG_URL") fails:
  $PG_LOGIN_ERR" ;;
    esac
    [[ $DRY_RUN == 1 ]] && how="$how; dry run: login would be fixed as above"
  fi
  say "postgres: up ($how, 127.0.0.1:5432)"
}

# ---------------------------------------------------------------- Redis

ensure_redis() {
  local t0
  now_ms
  t0=$REPLY
  if redis_ping; then
    if [[ " ${NEED_PKGS[*]} " == *" redis-server "* ]]; then
      say "redis: up (started on package install, 127.0.0.1:6379)"
    else
      say "redis: up (already running, 127.0.0.1:6379)"
    fi
    return 0
  fi
  if [[ $REDIS_REPLY == -LOADING* ]]; then
    wait_for redis "$TIMEOUT" "$REDIS_LOG" true redis_ping || die "redis: still loading its data set after ${TIMEOUT}s"
    say "redis: up (was loading its data, 127.0.0.1:6379)"
    return 0
  fi
  if [[ -n $REDIS_REPLY ]]; then
    die "redis: 127.0.0.1:6379 answers PING with '$REDIS_REPLY', not +PONG: it is not a password-less Redis.
  Stop whatever listens there, or point REDIS_URL at the Redis to use."
  fi
  if ! have redis-server && [[ $DRY_RUN == 1 ]]; then
    say "redis: down (dry run: would install redis-server and start it on 127.0.0.1:6379)"
    return 0
  fi
  have redis-server || die "redis: redis-server is not installed even after apt-get install redis-server"
  log "redis: starting redis-server on 127.0.0.1:6379 (log: $REDIS_LOG)"
  as_root mkdir -p /var/lib/redis "${REDIS_LOG%/*}" || die "redis: cannot create /var/lib/redis or ${REDIS_LOG%/*}"
  if ! as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile "$REDIS_LOG" >&2; then
    show_log "$REDIS_LOG"
    die "redis: redis-server failed to start (log: $REDIS_LOG)"
  fi
  if [[ $DRY_RUN == 1 ]]; then
    say "redis: down (dry run: would start it as above)"
    return 0
  fi
  wait_for redis "$TIMEOUT" "$REDIS_LOG" redis_alive redis_ping ||
    die "redis: not answering PING on 127.0.0.1:6379 (log: $REDIS_LOG)"
  say "redis: up (started in $(since "$t0"), 127.0.0.1:6379)"
}

# ---------------------------------------------------------------- NATS

ensure_nats() {
  local t0 pids
  now_ms
  t0=$REPLY
  nats_probe
  case $NATS_STATE in
    up)
      say "nats: up (already running, JetStream on, 127.0.0.1:4222)"
      return 0
      ;;
    other)
      die "nats: something listens on 127.0.0.1:4222 but it is not a NATS server.
  Stop it, or point NATS_URL at the NATS server to use."
      ;;
    nojs)
      # A systemd machine starts the Debian package's own service (no JetStream) on
      # install. Only when this run installed the package is that service ours to stop.
      if [[ $NATS_INSTALLED_NOW == 1 ]] && have systemctl && systemctl is-active --quiet nats-server 2>/dev/null; then
        log "nats: the nats-server package started its service without JetStream; disabling it to start one with JetStream"
        as_root systemctl disable --now nats-server >&2 || die "nats: could not stop the nats-server service"
      else
        die "nats: the NATS server on 127.0.0.1:4222 runs without JetStream.
  Restart it with -js, e.g.:
    $(show_cmd start-stop-daemon --start --oknodo --background --exec "$NATS_BIN" -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l "$NATS_LOG")
  or point NATS_URL at a server with JetStream."
      fi
      ;;
  esac
  if [[ ! -x $NATS_BIN && $DRY_RUN == 1 ]]; then
    say "nats: down (dry run: would install nats-server and start it on 127.0.0.1:4222 with JetStream)"
    return 0
  fi
  [[ -x $NATS_BIN ]] || die "nats: $NATS_BIN is not installed even after apt-get install nats-server"
  # start-stop-daemon --oknodo does nothing when any nats-server process exists; such
  # a process (another port or config) is not ours to stop, so say so instead of waiting.
  local rc=0
  [[ $DRY_RUN == 1 ]] || start-stop-daemon --start --test --quiet --exec "$NATS_BIN" >/dev/null 2>&1 || rc=$?
  if ((rc == 1)); then
    nats_up && {
      say "nats: up (came up meanwhile, JetStream on, 127.0.0.1:4222)"
      return 0
    }
    pids=$(pgrep -d ' ' -x nats-server 2>/dev/null || true)
    die "nats: a nats-server process is running${pids:+ (pid $pids)} but not serving 127.0.0.1:4222 with JetStream.
  Stop it (kill ${pids:-<pid>}) and re-run, or point NATS_URL at the server to use."
  fi
  log "nats: starting nats-server with JetStream on 127.0.0.1:4222 (log: $NATS_LOG)"
  as_root mkdir -p /var/lib/nats-server "${NATS_LOG%/*}" || die "nats: cannot create /var/lib/nats-server"
  as_root start-stop-daemon --start --oknodo --background --exec "$NATS_BIN" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l "$NATS_LOG" >&2 ||
    die "nats: start-stop-daemon failed to start $NATS_BIN (log: $NATS_LOG)"
  if [[ $DRY_RUN == 1 ]]; then
    say "nats: down (dry run: would start it as above)"
    return 0
  fi
  wait_for nats "$TIMEOUT" "$NATS_LOG" nats_alive nats_up ||
    die "nats: not serving on 127.0.0.1:4222 with JetStream (state: $NATS_STATE, log: $NATS_LOG)"
  say "nats: up (started in $(since "$t0"), JetStream on, 127.0.0.1:4222)"
}

# ---------------------------------------------------------------- main

# Serialize concurrent runs (two test.sh at once) so they do not start things twice.
# fd 9 holds the lock; as_root closes it for the daemons it starts.
LOCK=${TMPDIR:-/tmp}/buzz-relay-deps-up.lock
if have flock; then
  if { exec 9>>"$LOCK"; } 2>/dev/null || { exec 9<"$LOCK"; } 2>/dev/null; then
    flock -w 300 9 || die "another scripts/deps-up.sh has held $LOCK for 5 minutes"
  fi
fi

# Which Debian packages the managed, currently down services need (one apt run for all).
NEED_PKGS=()
NATS_INSTALLED_NOW=0
if ((PG_MANAGED)); then
  pg_rc=0
  pg_ready || pg_rc=$?
  if ((pg_rc == 2)) && ! pg_installed; then
    NEED_PKGS+=(postgresql)
  elif ! pg_client_ok; then
    NEED_PKGS+=(postgresql-client)
  fi
fi
if ((REDIS_MANAGED)) && ! have redis-server && ! redis_ping && [[ -z $REDIS_REPLY ]]; then
  NEED_PKGS+=(redis-server)
fi
if ((NATS_MANAGED)) && [[ ! -x $NATS_BIN ]]; then
  nats_probe
  if [[ $NATS_STATE == down ]]; then
    NEED_PKGS+=(nats-server)
    NATS_INSTALLED_NOW=1
  fi
fi
if ((${#NEED_PKGS[@]})); then
  if [[ $DRY_RUN == 1 ]]; then
    log "dry run: would install Debian packages: ${NEED_PKGS[*]}"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${NEED_PKGS[@]}"
  else
    apt_install "${NEED_PKGS[@]}"
  fi
fi

if ((PG_MANAGED)); then ensure_postgres; else check_pg_external; fi
if ((REDIS_MANAGED)); then ensure_redis; else check_reachable redis "$REDIS_URL_EFF" 6379 REDIS_URL; fi
if ((NATS_MANAGED)); then ensure_nats; else check_reachable nats "$NATS_URL_EFF" 4222 NATS_URL; fi
