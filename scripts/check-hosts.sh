#!/usr/bin/env bash
# Fails when a tracked file names a package registry's or a package mirror's host. Where the
# project runs, registries and mirrors are the operator's choice (the machine's own apt, cargo and
# npm configuration): the project names them generically ("the Rust registry", "Debian's
# mirror") and reads them from the machine. Lockfiles that the tools write themselves (Cargo.lock
# records each crate's source) are not checked. The patterns are spelled with character classes,
# so this script names no host either.
#
# Usage: scripts/check-hosts.sh    (exit 1 and the offending lines when one is found)
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

patterns=(
  '(^|[^a-z0-9-])([a-z]+[.])?c[r]ates[.]io'
  '[a-z.-]*d[e]bian[.](org|net)'
  'a[r]chive[.]ubuntu[.]com'
  '([a-z]+[.])?n[p]mjs[.](org|com)'
  'y[a]rnpkg[.]com'
  'p[y]pi[.](org|python[.]org)'
  'f[i]les[.]pythonhosted[.]org'
  'g[h]cr[.]io'
  '([a-z0-9-]+[.])?d[o]cker[.](io|com)'
  'q[u]ay[.]io'
  '([a-z]+[.])?g[c]r[.]io'
  'r[u]bygems[.]org'
  'r[e]po1?[.]maven[.]org'
  'p[r]oxy[.]golang[.]org'
  'd[e]b[.]nodesource[.]com'
)
regex=$(IFS='|'; printf '%s' "${patterns[*]}")

mapfile -t files < <(git ls-files | grep -v -E '(^|/)(Cargo[.]lock)$')
found=$(printf '%s\0' "${files[@]}" | xargs -0 grep -n -I -i -E "$regex" -- 2>/dev/null || true)
if [[ -n $found ]]; then
  printf '%s\n' "$found" >&2
  echo "check-hosts: tracked files name a package registry or mirror host (say \"the Rust registry\", \"Debian's mirror\"; read the mirror from the machine's configuration)" >&2
  exit 1
fi
echo "check-hosts: no registry or mirror host named in $(printf '%s\n' "${files[@]}" | wc -l) tracked files" >&2
