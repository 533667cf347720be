#!/usr/bin/env bash
# The distributed load tester's figures (docs/benchmarks.md, "Distributed load tester"), each a
# scripts/load-cluster.sh run on this machine, JSON and SVG reports into $OUT (target/dist):
#   fanout  1 writer at 20 ev/s -> 1,000 subscribers over 2 gateways, 20 s (delivery latency)
#   idle    10,000 authenticated idle sockets on 1 gateway, 30 s (the gateway's peak RSS)
#   scale   chat ingest, 16 closed-loop publishers (8 in flight each), 15 s, with 1, 2 and 4
#           gateway and write-service replicas
# Usage: scripts/bench-distributed.sh [fanout|idle|scale]...   (default: all three)
# Run it alone on the machine: flock /tmp/buzz-bench.lock scripts/bench-distributed.sh
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
OUT=${OUT:-$ROOT/target/dist}
mkdir -p "$OUT"
LC=scripts/load-cluster.sh
built=
run() {
  if [[ -n $built ]]; then BUZZ_LC_NO_BUILD=1 bash "$LC" "$@"; else bash "$LC" "$@"; built=1; fi
}
figures=("$@")
((${#figures[@]})) || figures=(fanout idle scale)
for f in "${figures[@]}"; do
  case $f in
    fanout)
      run --gateways 2 --writers 2 --workers 2 -- --scenario fanout --subscribers 1000 --rate 20 \
        --duration 20 --json "$OUT/fanout.json" --svg "$OUT/fanout.svg" ;;
    idle)
      run --gateways 1 --writers 1 --workers 2 -- --scenario idle --clients 10000 --duration 30 \
        --json "$OUT/idle.json" --svg "$OUT/idle.svg" ;;
    scale)
      for n in 1 2 4; do
        run --gateways "$n" --writers "$n" --workers 2 -- --scenario chat --clients 16 --in-flight 8 \
          --duration 15 --json "$OUT/scale-$n.json" --svg "$OUT/scale-$n.svg"
      done ;;
    *) echo "bench-distributed.sh: unknown figure '$f' (fanout, idle, scale)" >&2; exit 2 ;;
  esac
done
