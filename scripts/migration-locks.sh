#!/usr/bin/env bash
# How long each migration blocks writes, measured on a database of realistic size.
#
#  1. creates the scratch database buzz_migration_locks (dropped first) and migrates it to schema
#     version 1 (`buzz migrate --to-version 1`, the 0.1.0 baseline);
#  2. seeds one community with MESSAGES kind-9 messages (default 1,000,000, each with its `h` tag
#     row) in 500 channels and ARTIFACTS NIP-AR artifacts (default 1,000,000: each a revision
#     event, its record, its artifact row and current-tag row), then VACUUM ANALYZE;
#  3. for every later migration N in turn: starts write probes (pgbench; each
#     transaction takes ROW EXCLUSIVE, the lock every INSERT/UPDATE/DELETE takes, on every table
#     of the schema, then inserts one kind-9 message; two clients, staggered), applies `buzz migrate --to-version N` as the
#     chart's migrate Job does, and reports the migration's run time and the longest probe
#     transaction that overlapped it: the longest any write waited on that migration's locks.
# The bound (docs/operations.md "Changing the schema") is 1 s; the script exits 1 above it.
#
#   scripts/migration-locks.sh            # ~5 minutes on 2 cores, most of it the seed
# Environment: PGURL (postgres://postgres@127.0.0.1:5432), MESSAGES, ARTIFACTS, BOUND_MS (1000),
# KEEP=1 keeps the database, CARGO_TARGET_DIR (/var/tmp/buzz-target; builds the `buzz` binary).
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo

PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
DB=buzz_migration_locks
URL=$PGURL/$DB
MESSAGES=${MESSAGES:-1000000}
ARTIFACTS=${ARTIFACTS:-1000000}
BOUND_MS=${BOUND_MS:-1000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

PGBENCH=$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)
[[ -x $PGBENCH ]] || die "pgbench not found (Debian: postgresql-contrib or the server package)"

cargo build -q -p buzz-cli --bin buzz
BUZZ=$CARGO_TARGET_DIR/debug/buzz
latest=$(sed -n 's/^pub const SCHEMA_VERSION: i64 = \([0-9]*\);.*/\1/p' store/src/lib.rs)
[[ -n $latest ]] || die "SCHEMA_VERSION not found in store/src/lib.rs"

WORK=$(mktemp -d /tmp/buzz-migration-locks.XXXXXX)
cleanup() {
  [[ -f $WORK/stop ]] || touch "$WORK/stop"
  wait 2>/dev/null || true
  [[ ${KEEP:-} == 1 ]] || psql "$PGURL/postgres" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

q() { psql "$URL" -v ON_ERROR_STOP=1 -qtA "$@"; }
psql "$PGURL/postgres" -v ON_ERROR_STOP=1 -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
"$BUZZ" migrate --database-url "$URL" --to-version 1 >/dev/null

log "migration-locks: seeding $MESSAGES messages and $ARTIFACTS artifacts (schema 1)"
t0=$SECONDS
q <<SQL
INSERT INTO communities (id, host, owner_pubkey) VALUES (md5('c0')::uuid, 'locks.test', repeat('a', 64));
INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by)
SELECT md5('c0')::uuid, md5('ch' || c)::uuid, 'c' || c, 'open', 'stream', repeat('a', 64)
FROM generate_series(0, 499) c;
INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw)
SELECT md5('c0')::uuid, md5('m' || g) || md5('n' || g), repeat('b', 64), 9, 1700000000 + g,
       md5('ch' || (g % 500))::uuid, '{"kind":9,"content":"' || repeat('x', 376) || '"}'
FROM generate_series(1, $MESSAGES) g;
INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at)
SELECT md5('c0')::uuid, md5('m' || g) || md5('n' || g), 'h', sha256(md5('ch' || (g % 500))::bytea), 1700000000 + g
FROM generate_series(1, $MESSAGES) g;
INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw)
SELECT md5('c0')::uuid, md5('r' || g) || md5('s' || g), repeat('b', 64), 45010, 1700000000 + g,
       md5('ch' || (g % 500))::uuid, '{"kind":45010,"content":"' || repeat('x', 772) || '"}'
FROM generate_series(1, $ARTIFACTS) g;
INSERT INTO artifact_revisions (community_id, revision_id, d, prev, op, channel_id, accepted_seq)
SELECT md5('c0')::uuid, md5('r' || g) || md5('s' || g), md5('a' || g)::uuid, NULL, 'create',
       md5('ch' || (g % 500))::uuid, g
FROM generate_series(1, $ARTIFACTS) g;
INSERT INTO artifacts (community_id, d, type, current_revision, home_channel)
SELECT md5('c0')::uuid, md5('a' || g)::uuid, 'buzz.task', md5('r' || g) || md5('s' || g), md5('ch' || (g % 500))::uuid
FROM generate_series(1, $ARTIFACTS) g;
INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, revision, type)
SELECT md5('c0')::uuid, md5('a' || g)::uuid, 'h', sha256(md5('ch' || (g % 500))::bytea), md5('ch' || (g % 500))::uuid,
       now(), md5('r' || g) || md5('s' || g), 'buzz.task'
FROM generate_series(1, $ARTIFACTS) g;
VACUUM ANALYZE;
SQL
log "migration-locks: seeded in $((SECONDS - t0)) s; $(q -c "SELECT pg_size_pretty(pg_database_size('$DB'))")"

# The probe: the write lock on every table of the schema, then one real insert (which also takes
# the foreign key's row lock on communities).
tables=$(q -c "SELECT string_agg(quote_ident(tablename), ', ' ORDER BY tablename) FROM pg_tables
               WHERE schemaname = 'public' AND tablename <> '_sqlx_migrations'")
cat >"$WORK/probe.sql" <<SQL
\set n random(1, 1000000000)
BEGIN;
LOCK TABLE $tables IN ROW EXCLUSIVE MODE;
INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw)
VALUES (md5('c0')::uuid, md5('p' || :n || random()) || md5('q' || :n), repeat('c', 64), 9, 1800000000,
        md5('ch0')::uuid, '{}');
COMMIT;
SQL

# probes: one client's pgbench runs of 1 s back to back (each writes its per-transaction log when
# it ends), until $WORK/stop exists. Two loops half a second apart, so one always runs while the
# other restarts.
probes() {
  local i=0
  until [[ -f $WORK/stop ]]; do
    i=$((i + 1))
    (cd "$WORK" && "$PGBENCH" -n -c 1 -T 1 -f probe.sql -l --log-prefix="p$1-$2-$i" "$URL" >/dev/null 2>&1) || true
  done
}

now_us() { date +%s%6N; }
printf '| migration | run time | longest write wait during it | probe writes |\n| --- | --- | --- | --- |\n' >"$WORK/table.md"
status=0
for ((v = 2; v <= latest; v++)); do
  name=$(basename "$(ls store/migrations/"$(printf '%04d' "$v")"_*.sql)" .sql)
  rm -f "$WORK/stop"
  probes "$v" a &
  sleep 0.5
  probes "$v" b &
  sleep 1
  start=$(now_us)
  "$BUZZ" migrate --database-url "$URL" --to-version "$v" >/dev/null
  end=$(now_us)
  sleep 1.5
  touch "$WORK/stop"
  wait
  # pgbench log line: client transaction latency_us script epoch_s epoch_us (completion time).
  read -r worst count < <(cat "$WORK"/p"$v"-* 2>/dev/null | awk -v s="$start" -v e="$end" '
    { done = $5 * 1000000 + $6; began = done - $3
      if (done >= s && began <= e) { n++; if ($3 > w) w = $3 } }
    END { printf "%d %d\n", w, n }')
  run_ms=$(((end - start) / 1000))
  worst_ms=$((worst / 1000))
  printf '| %s | %d ms | %d ms | %d |\n' "$name" "$run_ms" "$worst_ms" "$count" >>"$WORK/table.md"
  if ((count == 0)); then
    log "migration-locks: $name: no probe write overlapped the migration (too fast to sample?)"
  fi
  if ((worst_ms > BOUND_MS)); then
    log "migration-locks: $name blocked writes for $worst_ms ms (bound $BOUND_MS ms)"
    status=1
  fi
done
echo "# migration locks, $(date -u +%FT%TZ), $MESSAGES messages + $ARTIFACTS artifacts, PostgreSQL $(q -c 'SHOW server_version')"
cat "$WORK/table.md"
exit $status
