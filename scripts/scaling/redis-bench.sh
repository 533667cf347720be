#!/usr/bin/env bash
# Redis throughput and memory for the operations buzz-relay uses, against the machine's Redis
# (REDIS_HOST/REDIS_PORT, default 127.0.0.1:6379), under the key prefix buzzscaling: (deleted or
# expiring afterwards; nothing else is touched):
#   - NIP-98 replay guard: SET <prefix>nip98:<event id> 1 EX 130 NX (http-auth/src/lib.rs)
#   - per-pubkey rate limit: EVALSHA of the gateway's sliding-window script, 2 keys (gateway/src/ratelimit.rs)
#   - snapshot page: one page request reads the whole frozen manifest from the one snapshot hash;
#     modelled as HMGET of 50 fields of 64 KiB (3.2 MB, a 50,000-entry capture), and HGET of one
#     64 KiB page
#   - MEMORY USAGE of one replay-guard key and of one rate-limit key
#
#   scripts/scaling/redis-bench.sh          # N=200000 requests per test, C=16 clients
# Each redis-benchmark run is wrapped in `flock /tmp/buzz-bench.lock` and takes a few seconds.
set -euo pipefail
H=${REDIS_HOST:-127.0.0.1} P=${REDIS_PORT:-6379}
N=${N:-200000} C=${C:-16}
rc() { redis-cli -h "$H" -p "$P" "$@"; }
bench() { flock /tmp/buzz-bench.lock redis-benchmark -h "$H" -p "$P" -q -c "$C" "$@" | tr '\r' '\n' | grep -v '^$' | tail -1; }

SCRIPT="local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
if prev * tonumber(ARGV[1]) + cur + 1 > tonumber(ARGV[2]) then
  return 0
end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1"
SHA=$(rc SCRIPT LOAD "$SCRIPT")
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(rc INFO server | grep -m1 redis_version | tr -d '\r'), $C clients, load $(cut -d' ' -f1 /proc/loadavg)"
PK=$(printf 'a%.0s' {1..64})
echo -n "nip98 SET NX EX 130:         "; bench -n "$N" -r 10000000 SET "buzzscaling:nip98:__rand_int__" 1 EX 130 NX
echo -n "rate limit EVALSHA (2 keys): "; bench -n "$N" -r 100000 EVALSHA "$SHA" 2 \
  "buzzscaling:rate:pk:{00000000-0000-0000-0000-000000000000:__rand_int__}:29000000" \
  "buzzscaling:rate:pk:{00000000-0000-0000-0000-000000000000:__rand_int__}:28999999" 0.5 1200 120000
echo -n "rate limit, pipeline 16:     "; bench -n "$N" -r 100000 -P 16 EVALSHA "$SHA" 2 \
  "buzzscaling:rate:pk:{x:__rand_int__}:1" "buzzscaling:rate:pk:{x:__rand_int__}:0" 0.5 1200 120000

# A 50,000-entry capture: 50 pages of 1,000 entries x 64 bytes.
python3 -c "import sys; sys.stdout.buffer.write(b'x' * 65536)" > /tmp/buzz-scaling-page
for i in $(seq 0 49); do rc -x HSET buzzscaling:snapshot "1:p:$i" < /tmp/buzz-scaling-page > /dev/null; done
FIELDS=$(for i in $(seq 0 49); do printf '1:p:%d ' "$i"; done)
echo -n "snapshot HGET one 64 KiB page: "; bench -n 20000 HGET buzzscaling:snapshot 1:p:0
# shellcheck disable=SC2086
echo -n "snapshot HMGET 50 pages (3.2 MB): "; bench -n 1000 HMGET buzzscaling:snapshot $FIELDS

rc SET "buzzscaling:nip98:$(printf 'e%.0s' {1..64})" 1 EX 130 NX > /dev/null
rc SET "buzzscaling:rate:pk:{00000000-0000-0000-0000-000000000000:$PK}:29000000" 7 PX 120000 > /dev/null
echo "MEMORY USAGE nip98 key: $(rc MEMORY USAGE "buzzscaling:nip98:$(printf 'e%.0s' {1..64})") bytes (prefix buzz: in production is 7 bytes shorter)"
echo "MEMORY USAGE rate-limit key: $(rc MEMORY USAGE "buzzscaling:rate:pk:{00000000-0000-0000-0000-000000000000:$PK}:29000000") bytes"
echo "MEMORY USAGE snapshot hash (50 x 64 KiB): $(rc MEMORY USAGE buzzscaling:snapshot) bytes"
rc DEL buzzscaling:snapshot > /dev/null
# The SET/EVAL keys expire by themselves within 130 s; remove them now anyway.
rc --scan --pattern 'buzzscaling:*' | xargs -r -n 1000 redis-cli -h "$H" -p "$P" UNLINK > /dev/null
rm -f /tmp/buzz-scaling-page
