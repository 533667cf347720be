#!/usr/bin/env bash
# Brings the whole of buzz-relay up locally: PostgreSQL, Redis and NATS on loopback (started, or
# installed from Debian packages, when missing), the database created and migrated, and all five
# services (gateway, write, query, snapshot, policy) in one process. Ctrl-C stops everything.
#
# Environment (defaults shown):
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/buzz_dev
#   REDIS_URL=redis://127.0.0.1:6379   NATS_URL=nats://127.0.0.1:4222
#   BUZZ_GATEWAY_ADDR=127.0.0.1:7777   BUZZ_POLICY_ADDR=127.0.0.1:7070
#   BUZZ_DEV_DIR=.dev  (relay and operator keys, kept between runs)
#   CARGO_TARGET_DIR=/var/tmp/buzz-target
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

cargo_bin=${CARGO_HOME:-${HOME:-/root}/.cargo}/bin
if ! command -v cargo >/dev/null 2>&1 && [[ -x $cargo_bin/cargo ]]; then
  PATH="$cargo_bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo (Rust) is not installed; see scripts/test.sh for the rustup steps" >&2
  exit 1
fi

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/buzz_dev}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
export BUZZ_LOG_FORMAT=${BUZZ_LOG_FORMAT:-text}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

bash scripts/deps-up.sh
cargo build --release -p buzz-cli --bin buzz
exec "$CARGO_TARGET_DIR/release/buzz" dev "$@"
