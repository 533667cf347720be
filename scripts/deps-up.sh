#!/usr/bin/env bash
# Makes sure the services buzz-relay needs run on loopback:
#   PostgreSQL  127.0.0.1:5432  (user postgres, no password over TCP)
#   Redis       127.0.0.1:6379
#   NATS        127.0.0.1:4222  (core NATS; nothing here needs JetStream)
# A missing one is installed from Debian packages and started with the packages' own tools
# (pg_createcluster/pg_ctlcluster, redis-server --daemonize, start-stop-daemon). Idempotent:
# when all three answer, it only checks (well under a second).
#
# The database named in DATABASE_URL need not exist yet (`buzz dev` and the tests create theirs);
# only the login is checked. A DATABASE_URL / REDIS_URL / NATS_URL that names another host or
# port is not managed here: the services report an unreachable server themselves.
#
# Environment: DEPS_UP_TIMEOUT  seconds to wait for each service to come up (30)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

TIMEOUT=${DEPS_UP_TIMEOUT:-30}
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "DEPS_UP_TIMEOUT must be a whole number of seconds, got '$TIMEOUT'"

PG_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
REDIS_LOG=/var/log/redis/buzz-deps-up.log
NATS_LOG=/var/log/nats-server.log

# is_local URL SCHEME PORT: URL names the loopback instance this script manages.
is_local() {
  [[ $1 =~ ^$2://([^@/]*@)?(127\.0\.0\.1|localhost)(:$3)?(/.*)?$ ]]
}

# first_line PORT [SEND]: the first line a server on 127.0.0.1:PORT answers (after SEND).
first_line() {
  (
    exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    [[ -z ${2:-} ]] || printf '%s\r\n' "$2" >&3
    IFS= read -r -t 2 line <&3 && printf '%s' "${line%$'\r'}"
  )
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
redis_up() { [[ $(first_line 6379 PING) == +PONG ]]; }
nats_up() { [[ $(first_line 4222) == INFO* ]]; }
pg_newest() { find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n 1; }
pg_tools() { pg_isready --version >/dev/null 2>&1 && psql --version >/dev/null 2>&1; }
pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 -t 2; }

# pg_login: a password-less login as DATABASE_URL works. PostgreSQL authenticates before it
# looks the database up, so "database ... does not exist" means the login itself is fine.
pg_login() {
  PG_ERR=$(env -u PGPASSWORD PGPASSFILE=/nonexistent/buzz PGCONNECT_TIMEOUT=5 \
    psql -d "$PG_URL" -w -X -q -t -c 'select 1' 2>&1 >/dev/null) && return 0
  [[ $PG_ERR == *'database "'*'" does not exist'* ]]
}

# show_tail NAME LOG: die saying NAME did not come up, with the end of its log.
show_tail() {
  log "---- last lines of $2 ----"
  as_root tail -n 20 -- "$2" >&2 || true
  die "$1 did not come up on loopback within ${TIMEOUT}s (log: $2)"
}

# pg_fresh_cluster: the packages were just installed, so their cluster "main" is empty; make
# it again with password-less TCP logins from loopback (the Debian default asks for one).
pg_fresh_cluster() {
  local v
  v=$(pg_lsclusters -h | awk '$2 == "main" {print $1}' | sort -V | tail -n 1)
  [[ -n $v ]] || v=$(pg_newest)
  log "postgres: (re)creating the new cluster $v/main on 127.0.0.1:5432 with trust for loopback"
  as_root pg_dropcluster --stop "$v" main 2>/dev/null || true
  as_root pg_createcluster --port 5432 "$v" main -- --auth-host=trust --auth-local=peer >&2
}

# pg_start: start the Debian cluster configured for port 5432, creating one when there is none.
pg_start() {
  local v name
  read -r v name < <(pg_lsclusters -h | awk '$3 == 5432 {print $1, $2}' | sort -V | tail -n 1) || true
  if [[ -z ${v:-} ]]; then
    v=$(pg_newest) name=buzz
    [[ -n $v ]] || die "postgres: no PostgreSQL server is installed (apt-get install postgresql)"
    log "postgres: no cluster uses port 5432; creating $v/$name there"
    as_root pg_createcluster --port 5432 "$v" "$name" -- --auth-host=trust --auth-local=peer >&2
  fi
  log "postgres: starting cluster $v/$name"
  as_root pg_ctlcluster "$v" "$name" start >&2 || true
  wait_until "$TIMEOUT" pg_up || show_tail "postgres $v/$name" "/var/log/postgresql/postgresql-$v-$name.log"
}

ensure_postgres() {
  local how="already running"
  if ((PG_FRESH)); then
    pg_fresh_cluster
  fi
  if ! pg_up; then
    pg_start
    how=started
  fi
  pg_login || die "postgres: 127.0.0.1:5432 is up but a password-less login as $(sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$PG_URL") fails:
  $PG_ERR
  Allow it with 'host all all 127.0.0.1/32 trust' (and ::1/128) at the top of the server's
  pg_hba.conf, then reload it (pg_ctlcluster <version> <cluster> reload)."
  echo "postgres: up ($how, 127.0.0.1:5432)"
}

ensure_redis() {
  redis_up && {
    echo "redis: up (already running, 127.0.0.1:6379)"
    return
  }
  have redis-server || die "redis: redis-server is not installed (apt-get install redis-server)"
  log "redis: starting redis-server on 127.0.0.1:6379 (log: $REDIS_LOG)"
  as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save '' --appendonly no \
    --dir /var/lib/redis --pidfile /run/buzz-redis-server.pid --logfile "$REDIS_LOG" >&2 || true
  wait_until "$TIMEOUT" redis_up || show_tail redis "$REDIS_LOG"
  echo "redis: up (started, 127.0.0.1:6379)"
}

ensure_nats() {
  nats_up && {
    echo "nats: up (already running, 127.0.0.1:4222)"
    return
  }
  have nats-server || die "nats: nats-server is not installed (apt-get install nats-server)"
  log "nats: starting nats-server on 127.0.0.1:4222 (log: $NATS_LOG)"
  # the pid file makes a second run see its own server, not any other nats-server process
  as_root start-stop-daemon --start --oknodo --background --make-pidfile --pidfile /run/buzz-nats-server.pid \
    --exec "$(command -v nats-server)" -- -a 127.0.0.1 -p 4222 -l "$NATS_LOG" >&2 || true
  wait_until "$TIMEOUT" nats_up || show_tail nats "$NATS_LOG"
  echo "nats: up (started, 127.0.0.1:4222)"
}

# Two runs at once (two test.sh) must not start things twice; fd 9 holds the lock.
if have flock && { exec 9>>"${TMPDIR:-/tmp}/buzz-relay-deps-up.lock"; } 2>/dev/null; then
  flock -w 300 9 || die "another scripts/deps-up.sh has held the lock for 5 minutes"
fi

PG_MANAGED=0 REDIS_MANAGED=0 NATS_MANAGED=0 PG_FRESH=0
is_local "$PG_URL" 'postgres(ql)?' 5432 && PG_MANAGED=1
is_local "${REDIS_URL:-redis://127.0.0.1:6379}" redis 6379 && REDIS_MANAGED=1
is_local "${NATS_URL:-nats://127.0.0.1:4222}" nats 4222 && NATS_MANAGED=1

# The Debian packages the managed services lack, in one apt-get run.
need=()
if ((PG_MANAGED)); then
  if ! have pg_lsclusters && ! port_open 5432; then
    need+=(postgresql) PG_FRESH=1
  elif ! pg_tools; then
    need+=(postgresql-client)
  fi
fi
((REDIS_MANAGED)) && ! redis_up && ! have redis-server && need+=(redis-server)
((NATS_MANAGED)) && ! nats_up && ! have nats-server && need+=(nats-server)
((${#need[@]} == 0)) || apt_install "${need[@]}"

if ((PG_MANAGED)); then ensure_postgres; else echo "postgres: not managed (DATABASE_URL is not 127.0.0.1:5432)"; fi
if ((REDIS_MANAGED)); then ensure_redis; else echo "redis: not managed (REDIS_URL is not 127.0.0.1:6379)"; fi
if ((NATS_MANAGED)); then ensure_nats; else echo "nats: not managed (NATS_URL is not 127.0.0.1:4222)"; fi
