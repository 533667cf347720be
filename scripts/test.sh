#!/usr/bin/env bash
# The one command that runs buzz-relay's default test suite:
#   1. makes sure PostgreSQL, Redis and NATS are up (scripts/deps-up.sh),
#   2. installs the JavaScript client the newcomer-path test drives (tests/js: node, nostr-tools),
#   3. checks that no tracked file names a registry or mirror host and that the docs name what exists,
#      lints and renders the chart, builds every target of the workspace, starts the chart's pods
#      as local processes (scripts/chart-run.sh),
#   4. runs the upgrade test when a migration or a bus payload changed since the last release,
#   5. a 20 s cargo-fuzz smoke per fuzz target when the nightly toolchain is present,
#   6. runs every test: cargo nextest when installed, else cargo test.
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

# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
export NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}

bash scripts/deps-up.sh

# cli/tests/dev_path.rs runs scripts/dev.sh and posts through nostr-tools, a third-party client.
if ! have node || ! have npm; then apt_install nodejs npm; fi
if [[ ! -d tests/js/node_modules ]]; then
  npm ci --prefix tests/js --no-audit --no-fund >&2 || die "npm ci in tests/js failed"
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

# No tracked file names a package registry's or mirror's host (scripts/check-hosts.sh).
bash scripts/check-hosts.sh || exit $?

# Every environment variable the code reads is in docs/configuration.md, and every path, test,
# link and section the docs name exists (scripts/check-docs.sh).
bash scripts/check-docs.sh || exit $?

# The Helm chart: lint, offline render and Kubernetes schema checks (fast; before the Rust suite so
# the test runner's summary stays the last line).
bash scripts/chart-test.sh || exit $?

echo "test.sh: cargo build --workspace --all-targets (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)" >&2
cargo build --workspace --all-targets || exit $?

# The chart's pods as local processes, exactly as rendered, from the binaries just built: env names
# each binary reads, probes, mounts, the migrate hook and `helm test` (scripts/chart-run.sh).
bash scripts/chart-run.sh || exit $?

# The upgrade test from the last release (CHANGELOG.md) to this tree, under load, when a migration
# or the bus payloads changed since that release (scripts/upgrade-test.sh --if-changed; ~4 minutes
# with the debug binaries just built, plus one build of the release's binaries, kept for reuse).
UPGRADE_PROFILE=debug bash scripts/upgrade-test.sh --if-changed || exit $?

# cargo-fuzz smoke: 20 s per target when the nightly toolchain is present (docs/fuzzing.md); the
# fuzz build is kept in FUZZ_TARGET_DIR between runs (a cold one takes long on 2 cores).
FUZZ_TARGET_DIR=${FUZZ_TARGET_DIR:-/var/tmp/buzz-target-fuzz} bash scripts/fuzz.sh --smoke || exit $?

if cargo nextest --version >/dev/null 2>&1; then
  runner=(cargo nextest run --workspace --no-fail-fast)
else
  runner=(cargo test --workspace --no-fail-fast)
fi
echo "test.sh: ${runner[*]}${*:+ $*}" >&2
exec "${runner[@]}" "$@"
