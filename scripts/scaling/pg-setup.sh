#!/usr/bin/env bash
# Creates the scratch database buzz_scaling_scratch, applies store/migrations in order, and seeds
# COMMUNITIES communities (default 1000), each with 20 members (member 0 is the owner) and 4 open
# stream channels, plus EVENTS existing kind-9 events (default 1000000, each with its `h` tag row)
# spread over them, so that the write benchmarks insert into indexes of a realistic size.
#
#   scripts/scaling/pg-setup.sh                    # PGURL defaults to postgres://postgres@127.0.0.1:5432
#   COMMUNITIES=1000 EVENTS=1000000 scripts/scaling/pg-setup.sh
#   scripts/scaling/pg-setup.sh --drop             # drop the scratch database and stop
#
# Ids are derived from integers so pgbench scripts can name them: community n is md5('c'||n)::uuid,
# its channel k is md5('ch'||n||'-'||k)::uuid, its member i has pubkey md5('m'||n||'-'||i)||md5('n'||n||'-'||i).
# Seeding runs in chunks of 100k events, each under `flock /tmp/buzz-bench.lock` (the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/../.."
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
DB=${DB:-buzz_scaling_scratch}
COMMUNITIES=${COMMUNITIES:-1000}
EVENTS=${EVENTS:-1000000}
psql_db() { psql "$PGURL/$DB" -v ON_ERROR_STOP=1 -q "$@"; }

psql "$PGURL/postgres" -q -c "DROP DATABASE IF EXISTS $DB"
[[ "${1:-}" == "--drop" ]] && exit 0
psql "$PGURL/postgres" -q -c "CREATE DATABASE $DB"
for f in store/migrations/*.sql; do psql_db -f "$f"; done

psql_db <<SQL
INSERT INTO communities (id, host, owner_pubkey)
SELECT md5('c'||n)::uuid, 'c'||n||'.example.com', md5('m'||n||'-0')||md5('n'||n||'-0')
FROM generate_series(0, $COMMUNITIES - 1) n;
INSERT INTO community_members (community_id, pubkey, role)
SELECT md5('c'||n)::uuid, md5('m'||n||'-'||i)||md5('n'||n||'-'||i), CASE WHEN i = 0 THEN 'owner' ELSE 'member' END
FROM generate_series(0, $COMMUNITIES - 1) n, generate_series(0, 19) i;
INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by)
SELECT md5('c'||n)::uuid, md5('ch'||n||'-'||k)::uuid, 'channel '||k, 'open', 'stream', md5('m'||n||'-0')||md5('n'||n||'-0')
FROM generate_series(0, $COMMUNITIES - 1) n, generate_series(0, 3) k;
INSERT INTO channel_members (community_id, channel_id, pubkey, role)
SELECT community_id, id, created_by, 'owner' FROM channels;
SQL

# A 600-byte raw body: the size of a signed kind-9 with a short message (the load tool's is 647 bytes).
for ((start = 0; start < EVENTS; start += 100000)); do
  end=$(( start + 100000 < EVENTS ? start + 100000 : EVENTS ))
  flock /tmp/buzz-bench.lock psql "$PGURL/$DB" -v ON_ERROR_STOP=1 -q <<SQL
WITH s AS (
  SELECT g, md5('e'||g)||md5('f'||g) AS id, (g % $COMMUNITIES) AS n, (g / $COMMUNITIES) % 4 AS k, (g / 7) % 20 AS i
  FROM generate_series($start, $end - 1) g),
e AS (
  INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw)
  SELECT md5('c'||n)::uuid, id, md5('m'||n||'-'||i)||md5('n'||n||'-'||i), 9, 1700000000 + g,
         md5('ch'||n||'-'||k)::uuid, rpad('{"id":"'||id||'","kind":9,"content":"', 600, 'x')
  FROM s RETURNING community_id, id, channel_id, created_at)
INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at)
SELECT community_id, id, 'h', sha256(channel_id::text::bytea), created_at FROM e;
SQL
done
psql_db -c "VACUUM ANALYZE"
psql_db -tA -c "SELECT 'communities', count(*) FROM communities UNION ALL SELECT 'events', count(*) FROM events"
