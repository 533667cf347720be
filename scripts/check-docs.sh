#!/usr/bin/env bash
# Fails when the docs and the code disagree on what exists (scripts/check-docs.py does the work):
#   (a) an environment variable that non-test code of a workspace crate reads is not named (in
#       backticks) in docs/configuration.md. Reads found: clap `env = "..."`, `env::var("...")` /
#       `var_os`, `env!`/`option_env!` (cargo's own `CARGO_*` aside), any string literal naming a
#       `BUZZ_`/`OTEL_`/`NATS_`/`REDIS_`/`RELAY_`/`DATABASE_`/`PG_` variable (reads through a helper),
#       and `RUST_LOG` where tracing's `EnvFilter` reads it. Test-only and bench-only code is not
#       searched: the `tests` crate, `*/tests/`, `*_tests.rs`, `tests.rs`, `#[cfg(test)]` items, and
#       benches/examples (which live outside `src/`); their variables are listed in
#       docs/configuration.md "Tests, benchmarks and scripts" but not required.
#   (b) a document names a repository path that does not exist: every tracked or new Markdown file
#       (fuzz/ aside) — backticked tokens and plain-text paths whose first folder is a top-level
#       folder of the repository (globs must match something; paths git ignores, such as build
#       outputs, count as existing), `file.rs::name` and `test_file::test_name` references (the
#       name must occur in the file or its module folder), relative links (and their #anchors),
#       and `docs/x.md "Section"` references (a heading or bold item of that document; for
#       docs/design.md, of it or of docs/design/*.md). CHANGELOG.md and docs/benchmarks-log.md are
#       history: their links and sections are checked, their paths are not.
#
# Usage: scripts/check-docs.sh    (exit 1 and one `file:line: problem` line per offender)
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
command -v python3 >/dev/null || { echo "check-docs: python3 is required" >&2; exit 1; }
exec python3 scripts/check-docs.py "$@"
