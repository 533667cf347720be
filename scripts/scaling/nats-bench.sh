#!/usr/bin/env bash
# The NATS measurements of docs/scaling.md, each run under `flock /tmp/buzz-bench.lock`
# (nats_fanout.py says what each one does). Needs `pip install nats-py`.
#
#   scripts/scaling/nats-bench.sh            # RATE=5000 messages/s, SECS=10 per run
set -euo pipefail
cd "$(dirname "$(realpath "$0")")"
RATE=${RATE:-5000} SECS=${SECS:-10}
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(nats-server --version), load $(cut -d' ' -f1 /proc/loadavg)"
for g in 1 2 4 8; do
  flock /tmp/buzz-bench.lock python3 nats_fanout.py fanout --mode wildcard --gateways "$g" --rate "$RATE" --secs "$SECS"
done
for g in 4 8; do
  flock /tmp/buzz-bench.lock python3 nats_fanout.py fanout --mode interest --gateways "$g" --rate "$RATE" --secs "$SECS"
done
flock /tmp/buzz-bench.lock python3 nats_fanout.py request --in-flight 16 --secs "$SECS"
