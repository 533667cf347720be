#!/usr/bin/env bash
# Brings the whole of buzz-relay up locally: PostgreSQL, Redis and NATS on loopback (started, or
# installed from Debian packages, when missing), the database created and migrated, all five
# services (gateway, write, query, snapshot, policy) in one process, and a community bound to the
# gateway's host with an owner key. It prints the WebSocket URL, the owner key, a nostr-tools
# snippet that posts a first message and the `buzz members add` command. Ctrl-C stops everything.
#
# Environment (defaults shown):
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/buzz_dev   (created when missing)
#   REDIS_URL=redis://127.0.0.1:6379   NATS_URL=nats://127.0.0.1:4222
#   BUZZ_GATEWAY_ADDR=127.0.0.1:7777   BUZZ_POLICY_ADDR=127.0.0.1:7070
#   BUZZ_DEV_DIR=.dev  (relay, operator and owner keys, kept between runs)
#   BUZZ_DEV_PROFILE=release  (cargo profile of the `buzz` build: release or debug)
#   BUZZ_DEV_BIN=  (run this `buzz` binary instead of building one)
#   CARGO_TARGET_DIR=/var/tmp/buzz-target
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/buzz_dev}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
export BUZZ_LOG_FORMAT=${BUZZ_LOG_FORMAT:-text}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

bash scripts/deps-up.sh

bin=${BUZZ_DEV_BIN:-}
if [[ -z $bin ]]; then
  need_cargo
  case ${BUZZ_DEV_PROFILE:-release} in
    release) cargo build --release -p buzz-cli --bin buzz ;;
    debug) cargo build -p buzz-cli --bin buzz ;;
    *) die "BUZZ_DEV_PROFILE must be release or debug, got '$BUZZ_DEV_PROFILE'" ;;
  esac
  bin=$CARGO_TARGET_DIR/${BUZZ_DEV_PROFILE:-release}/buzz
fi
[[ -x $bin ]] || die "no buzz binary at $bin"
exec "$bin" dev "$@"
