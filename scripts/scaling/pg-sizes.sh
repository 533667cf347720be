#!/usr/bin/env bash
# Bytes on disk per stored row, from the scratch database of pg-setup.sh (VACUUMed, so no bloat):
#  1. per kind-9 event: `events` heap and each of its indexes, `event_tags` (one `h` row per event)
#     and its indexes, divided by the row counts (the seed's raw JSON is 600 bytes);
#  2. per NIP-AR artifact: seeds ARTIFACTS artifacts (default 50000) in community 0's channels,
#     each with REVISIONS revisions (default 3: create + 2 updates), every revision a kind-45010
#     event of about 800 bytes with 4 tags (d, type, h, project) and its `artifact_revisions` row,
#     stored as the write path stores them since migrations 0014 and 0015: no `event_tags` rows (a
#     revision's `d` and `h` are its record and event row, `type` and `project` are
#     multi-character names), and the current revision's `artifact_current_tags` rows for `h` and
#     `project` (`d` and `type` are columns), each with the revision id and the type; and prints
#     the growth of every table and its indexes per artifact and per revision.
#
#   scripts/scaling/pg-sizes.sh      # once per fresh scratch database (it refuses a second run)
# The seeding runs under `flock /tmp/buzz-bench.lock`.
set -euo pipefail
URL=${PGURL:-postgres://postgres@127.0.0.1:5432}/${DB:-buzz_scaling_scratch}
ARTIFACTS=${ARTIFACTS:-50000}
REVISIONS=${REVISIONS:-3}
q() { psql "$URL" -v ON_ERROR_STOP=1 -qtA -F $'\t' "$@"; }

sizes() { # table, rows, heap+toast bytes, index bytes
  for t in events event_tags artifacts artifact_revisions artifact_current_tags read_markers; do
    q -c "SELECT '$t', (SELECT count(*) FROM $t), pg_table_size('$t'), pg_indexes_size('$t')"
  done
}

# Growth is measured as a difference of relation sizes, so it needs tables without free space:
# a database fresh from pg-setup.sh (the write benchmarks may run before; deleting rows may not).
if [[ $(q -c "SELECT count(*) FROM artifacts") != 0 ]]; then
  echo "pg-sizes.sh: artifacts already seeded; run scripts/scaling/pg-setup.sh first" >&2
  exit 1
fi
q -c "VACUUM ANALYZE"
echo "# $(date -u +%FT%TZ) PostgreSQL $(q -c 'SHOW server_version')"
echo "## per kind-9 event (all events are kind 9 before the artifact seed)"
q -c "SELECT 'events heap (raw 600 B)', round(pg_table_size('events')::numeric / count(*)) FROM events"
q -c "SELECT 'events ' || i.relname, round(pg_relation_size(i.oid)::numeric / (SELECT count(*) FROM events))
      FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = 'events'::regclass ORDER BY 1"
q -c "SELECT 'event_tags heap per tag row', round(pg_table_size('event_tags')::numeric / count(*)) FROM event_tags"
q -c "SELECT 'event_tags ' || i.relname || ' per tag row', round(pg_relation_size(i.oid)::numeric / (SELECT count(*) FROM event_tags))
      FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = 'event_tags'::regclass ORDER BY 1"
q -c "SELECT 'total per kind-9 event with 1 tag', round((pg_total_relation_size('events') + pg_total_relation_size('event_tags'))::numeric
      / (SELECT count(*) FROM events))"

before=$(sizes)
flock /tmp/buzz-bench.lock psql "$URL" -v ON_ERROR_STOP=1 -q -o /dev/null <<SQL
WITH a AS (
  SELECT g, md5('art' || g)::uuid AS d, md5('ch0-' || (g % 4))::uuid AS ch FROM generate_series(1, $ARTIFACTS) g),
r AS (
  SELECT a.*, v, md5('rev' || g || '-' || v) || md5('rvs' || g || '-' || v) AS id,
         CASE WHEN v > 1 THEN md5('rev' || g || '-' || (v - 1)) || md5('rvs' || g || '-' || (v - 1)) END AS prev
  FROM a, generate_series(1, $REVISIONS) v),
e AS (
  INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw)
  SELECT md5('c0')::uuid, id, md5('m0-1') || md5('n0-1'), 45010, 1700000000 + g * 10 + v, md5('ch0-' || (g % 4))::uuid,
         rpad('{"id":"' || id || '","kind":45010,"tags":[["d","' || d || '"],["type","buzz.task"]],"content":"', 800, 'x')
  FROM r RETURNING id),
ar AS (
  INSERT INTO artifacts (community_id, d, type, current_revision, home_channel)
  SELECT md5('c0')::uuid, d, 'buzz.task', md5('rev' || g || '-' || $REVISIONS) || md5('rvs' || g || '-' || $REVISIONS), ch FROM a)
SELECT 1;
INSERT INTO artifact_revisions (community_id, revision_id, d, prev, op, channel_id, accepted_seq)
SELECT md5('c0')::uuid, md5('rev' || g || '-' || v) || md5('rvs' || g || '-' || v), md5('art' || g)::uuid,
       CASE WHEN v > 1 THEN md5('rev' || g || '-' || (v - 1)) || md5('rvs' || g || '-' || (v - 1)) END,
       CASE WHEN v = 1 THEN 'create' ELSE 'update' END, md5('ch0-' || (g % 4))::uuid, g * 10 + v
FROM generate_series(1, $ARTIFACTS) g, generate_series(1, $REVISIONS) v;
INSERT INTO artifact_current_tags (community_id, d, name, value_hash, home_channel, updated_at, revision, type)
SELECT md5('c0')::uuid, md5('art' || g)::uuid, n, sha256((n || g)::bytea), md5('ch0-' || (g % 4))::uuid, now(),
       md5('rev' || g || '-' || $REVISIONS) || md5('rvs' || g || '-' || $REVISIONS), 'buzz.task'
FROM generate_series(1, $ARTIFACTS) g, unnest(ARRAY['h', 'project']) n;
VACUUM ANALYZE;
SQL
after=$(sizes)
echo "## growth from $ARTIFACTS artifacts x $REVISIONS revisions (4 tags each)"
printf 'table\trows added\theap bytes/row\tindex bytes/row\ttotal bytes per artifact\n'
join -t $'\t' <(sort <<<"$before") <(sort <<<"$after") | awk -F'\t' -v n="$ARTIFACTS" '
  { dr = $5 - $2; dh = $6 - $3; di = $7 - $4; if (dr > 0)
      printf "%s\t%d\t%.0f\t%.0f\t%.0f\n", $1, dr, dh / dr, di / dr, (dh + di) / n; tot += dh + di }
  END { printf "all tables\t\t\t\t%.0f bytes per artifact (%d revisions)\n", tot / n, '"$REVISIONS"' }'
