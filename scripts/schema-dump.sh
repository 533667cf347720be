#!/usr/bin/env bash
# Rewrites store/schema.sql from the migrations: migrates a scratch database and keeps its
# normalised `pg_dump --schema-only` (the same code as the test that fails when the two differ,
# tests/tests/migrations.rs). Run it after changing store/migrations/ and commit both.
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}
bash scripts/deps-up.sh
BUZZ_UPDATE_SCHEMA=1 cargo test -q -p buzz-tests --test migrations -- the_migrations_create_exactly_store_schema_sql
git --no-pager diff --stat -- store/schema.sql
