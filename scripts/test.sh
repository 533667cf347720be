#!/usr/bin/env bash
# The one command that runs buzz-relay's default test suite:
#   1. makes sure PostgreSQL, Redis and NATS (JetStream) are up (scripts/deps-up.sh),
#   2. builds every target of the workspace,
#   3. runs every test: cargo nextest when installed, else cargo test.
# Load tests are not part of it; they have their own command.
#
# Usage: scripts/test.sh [ARGS...]   ARGS go to the test runner, e.g.
#   scripts/test.sh -p buzz-store              (either runner)
#   scripts/test.sh -E 'test(/subscribe/)'     (nextest filter expression)
# Environment (defaults shown; tests make their own databases/prefixes from these):
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres
#   REDIS_URL=redis://127.0.0.1:6379
#   NATS_URL=nats://127.0.0.1:4222
#   CARGO_TARGET_DIR=/var/tmp/buzz-target      (shared by all clones)
# Exit status: the test runner's (or the build's, when the build fails).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

# rustup installs into ~/.cargo/bin, which a non-login shell may not have on PATH.
cargo_bin=${CARGO_HOME:-${HOME:-/root}/.cargo}/bin
if ! command -v cargo >/dev/null 2>&1 && [[ -x $cargo_bin/cargo ]]; then
  PATH="$cargo_bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  cat >&2 <<'MSG'
error: cargo (Rust) is not installed. Install it with rustup:
    apt-get install -y curl ca-certificates build-essential pkg-config
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y
    . "$HOME/.cargo/env"
then run scripts/test.sh again.
MSG
  exit 1
fi

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}

bash scripts/deps-up.sh

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

# The Helm chart: lint, offline render and Kubernetes schema checks (fast; before the Rust suite so
# the test runner's summary stays the last line).
bash scripts/chart-test.sh || exit $?

echo "test.sh: cargo build --workspace --all-targets (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
cargo build --workspace --all-targets || exit $?

if cargo nextest --version >/dev/null 2>&1; then
  runner=(cargo nextest run --workspace --no-fail-fast)
else
  runner=(cargo test --workspace --no-fail-fast)
fi
echo "test.sh: ${runner[*]}${*:+ $*}" >&2
exec "${runner[@]}" "$@"
