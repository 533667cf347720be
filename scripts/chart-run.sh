#!/usr/bin/env bash
# Runs the Helm chart's pods as local processes exactly as rendered (default values and
# ci/production-values.yaml), to catch what rendering cannot: an env name no binary reads, a probe
# on the wrong port, a Secret key nothing mounts, a file path no volume provides, a hook or
# `helm test` that fails. Only ports and connection settings are overridden (private ports
# 19500-19569, loopback PostgreSQL/Redis/NATS, NATS subject and Redis key prefix `chartrun`, a fresh
# database buzz_chart_run). See charts/buzz-relay/tests/chart_run.py and docs/operations.md
# "Running the chart's pods locally".
#
# Needs the debug binaries (it builds nothing):
#   cargo build -p buzz-cli -p buzz-gateway -p buzz-write -p buzz-query -p buzz-snapshot \
#     -p buzz-policy -p buzz-load --bins
# and PostgreSQL (trust auth), Redis and NATS on their usual loopback ports (scripts/deps-up.sh);
# nats-server, redis-server and openssl for the production render's private TLS endpoints.
# Environment:
#   CHART_RUN_BIN_DIR      directory standing in for /usr/local/bin ($CARGO_TARGET_DIR/debug)
#   CHART_RUN_EXEC_PREFIX  prefix for every command, e.g. "chroot --userspec=65532:65532 /rootfs"
#   CHART_RUN_ROOTFS       the root the prefix runs in: mounted files go there at their real paths
#   CHART_RUN_PORT_BASE    first private port (19500)
#   CHART_RUN_ONLY         default|production: one render only
#   CHART_RUN_KEEP=1       keep the work directory (logs, mounted files) after a pass
# Exit status: 0 when both renders ran clean, 1 on any mismatch (the message says which).
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh

have python3 || die "chart-run: python3 is required"
have psql || die "chart-run: psql is required (apt-get install -y postgresql-client)"
for tool in nats-server redis-server openssl; do
  have "$tool" || die "chart-run: $tool is required for the production render's TLS endpoints"
done
if ! python3 -c "import helm_python, yaml" 2>/dev/null; then
  python3 -m pip install -q --disable-pip-version-check helm-python-sdk kubernetes-validate pyyaml 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages helm-python-sdk kubernetes-validate pyyaml
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}

# One chart-run at a time on a machine: the ports and the database name are fixed.
exec 8>/tmp/buzz-chart-run.lock
flock -w 600 8 || die "chart-run: another chart-run held /tmp/buzz-chart-run.lock for 10 minutes"

work=$(mktemp -d /tmp/buzz-chart-run.XXXXXX)
export CHART_RUN_WORK_DIR=$work
py=
status=1
cleanup() {
  # The driver stops its processes itself; this is the backstop if it was killed outright.
  if [[ -n $py ]] && kill -0 "$py" 2>/dev/null; then
    kill -TERM "$py" 2>/dev/null || true
    wait "$py" 2>/dev/null || true
  fi
  if [[ -f $work/pids ]]; then
    while read -r pid; do
      # Only a process group this run started (each child leads its own group).
      if [[ -d /proc/$pid ]] && [[ $(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ') == "$pid" ]]; then
        kill -KILL -- "-$pid" 2>/dev/null || true
      fi
    done <"$work/pids"
  fi
  if [[ $status -eq 0 && -z ${CHART_RUN_KEEP:-} ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

python3 charts/buzz-relay/tests/chart_run.py 8>&- &
py=$!
wait "$py" && status=0 || status=$?
py=
exit "$status"
