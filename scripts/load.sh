#!/usr/bin/env bash
# Load test of a local buzz-relay: brings up the dependencies, runs `buzz dev` (all five services in
# one process) on its own ports and a fresh database, provisions a community through the operator
# API and runs buzz-load against it. Bounded: the run stops by itself.
#
# Usage: scripts/load.sh [buzz-load flags...]   e.g. scripts/load.sh --publishers 8 --duration 20
# Defaults: 4 publishers, 4 subscribers, 10 s, closed loop. JSON report: $BUZZ_LOAD_JSON
# (default target/load-buzz.json under the repo).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
GATEWAY_PORT=${BUZZ_LOAD_GATEWAY_PORT:-17777}
POLICY_PORT=${BUZZ_LOAD_POLICY_PORT:-17070}
DB=buzz_load
JSON=${BUZZ_LOAD_JSON:-$ROOT/target/load-buzz.json}
# The relay's log of the last run (RUST_LOG, default warn).
RELAY_LOG=$ROOT/target/load-relay.log
mkdir -p "$(dirname "$JSON")"

bash scripts/deps-up.sh
cargo build --release -p buzz-cli --bin buzz -p buzz-load --bin buzz-load

psql -q "postgres://postgres@127.0.0.1:5432/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
work=$(mktemp -d)
relay_pid=
cleanup() {
  [[ -n $relay_pid ]] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# A throughput benchmark: the write rate limits are raised far above what one run can reach
# (override with the variables themselves).
export BUZZ_RATE_CONN_PER_SEC=${BUZZ_RATE_CONN_PER_SEC:-1000000}
export BUZZ_RATE_CONN_BURST=${BUZZ_RATE_CONN_BURST:-1000000}
export BUZZ_RATE_PUBKEY_PER_MIN=${BUZZ_RATE_PUBKEY_PER_MIN:-100000000}
# Loopback: no TLS to PostgreSQL (encrypting loopback traffic cost ~8 % of the relay's CPU and
# as much of PostgreSQL's; deployments keep their sslmode, docs/operations.md).
DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB?sslmode=disable" BUZZ_DEV_DIR="$work" RUST_LOG=${RUST_LOG:-warn} \
  BUZZ_GATEWAY_ADDR="127.0.0.1:$GATEWAY_PORT" BUZZ_POLICY_ADDR="127.0.0.1:$POLICY_PORT" \
  "$CARGO_TARGET_DIR/release/buzz" dev >"$RELAY_LOG" 2>&1 &
relay_pid=$!

for _ in $(seq 1 200); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$GATEWAY_PORT") 2>/dev/null && [[ -s $work/operator.key ]]; then
    break
  fi
  kill -0 "$relay_pid" 2>/dev/null || { cat "$RELAY_LOG" >&2; echo "load.sh: relay did not start" >&2; exit 1; }
  sleep 0.1
done

# `buzz dev` binds its own community to localhost:<port>; the load run provisions another one,
# bound to 127.0.0.1:<port> (also a loopback host, where NIP-98 accepts http:// URLs).
"$CARGO_TARGET_DIR/release/buzz-load" --mode buzz --url "ws://127.0.0.1:$GATEWAY_PORT" \
  --operator-url "http://127.0.0.1:$POLICY_PORT" --operator-secret "$(cat "$work/operator.key")" \
  --json "$JSON" "$@"
