#!/usr/bin/env bash
# WAL written per kind-9 event, single-event transactions (kind9.sql) and 32-event batches
# (kind9-batch32.sql), 4 clients for SECS seconds each (default 5), read back with pg_walinspect
# (installed into the scratch database of pg-setup.sh) and counted only for the transactions that
# touched the scratch database (other databases on the server write WAL too). Splits record bytes
# from full-page images: the FPI share depends on how recently a checkpoint ran (every page's first
# change after a checkpoint logs the whole 8 KiB page), so it is reported apart. Each script runs
# twice: with the server's wal_compression (off here) and with wal_compression=lz4 set for the
# benchmark's sessions only (PGOPTIONS; needs a superuser, as the scratch setup does).
#
#   scripts/scaling/pg-wal.sh
# Each pgbench run is wrapped in `flock /tmp/buzz-bench.lock`.
set -euo pipefail
cd "$(dirname "$(realpath "$0")")"
URL=${PGURL:-postgres://postgres@127.0.0.1:5432}/${DB:-buzz_scaling_scratch}
SECS=${SECS:-5}
q() { psql "$URL" -qtA "$@"; }
PGOPTIONS= q -c "SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS pg_walinspect"
DBOID=$(q -c "SELECT oid FROM pg_database WHERE datname = current_database()")
echo "# $(date -u +%FT%TZ) PostgreSQL $(q -c 'SHOW server_version'), full_page_writes=$(q -c 'SHOW full_page_writes'), wal_compression=$(q -c 'SHOW wal_compression'), checkpoint_timeout=$(q -c 'SHOW checkpoint_timeout')"
for spec in "kind9.sql 1 off" "kind9-batch32.sql 32 off" "kind9.sql 1 lz4" "kind9-batch32.sql 32 lz4"; do
  read -r script per compression <<<"$spec"
  export PGOPTIONS="-c wal_compression=$compression" # this session only; the server setting is untouched
  out=$(flock /tmp/buzz-bench.lock bash -c '
    echo "L0 $(psql "$1" -qtAc "SELECT pg_current_wal_lsn()")"
    pgbench -n -M prepared -D communities=1000 -f "$2" -c 4 -j 4 -T "$3" "$1" 2>&1 | grep "actually processed"
    echo "L1 $(psql "$1" -qtAc "SELECT pg_current_wal_lsn()")"' _ "$URL" "$script" "$SECS")
  l0=$(awk '/^L0/ {print $2}' <<<"$out"); l1=$(awk '/^L1/ {print $2}' <<<"$out")
  n=$(awk '/actually processed/ {print $NF}' <<<"$out")
  q -F ' ' -c "
    WITH r AS (SELECT * FROM pg_get_wal_records_info('$l0', '$l1')),
    ours AS (SELECT DISTINCT xid FROM r WHERE block_ref LIKE '%/$DBOID/%' AND xid <> 0)
    SELECT '$script', 'wal_compression=$compression', 'events', $n * $per,
           'records_B/event', round(sum(record_length - fpi_length)::numeric / ($n * $per)),
           'fpi_B/event', round(sum(fpi_length)::numeric / ($n * $per)),
           'records/event', round(count(*)::numeric / ($n * $per), 1)
    FROM r WHERE xid IN (SELECT xid FROM ours)"
done
