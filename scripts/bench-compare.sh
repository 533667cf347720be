#!/usr/bin/env bash
# Side-by-side load comparison: nostr-rs-relay 0.8.12 and buzz-relay, measured by the same
# buzz-load run (same publishers, events in flight, subscribers, duration) on this machine, one
# after the other in one run of this script. Then nostr-bench (a third-party tool from the Rust registry)
# against nostr-rs-relay, as a cross-check of the anchor's figure.
# nostr-rs-relay and nostr-bench are installed from the Rust registry on first use (nostr-rs-relay needs
# Debian's protobuf-compiler). Everything listens on loopback only and stops by itself.
#
# Usage: scripts/bench-compare.sh [buzz-load flags...]
# Default load: 8 publishers with 8 events in flight each (64 in flight), 4 subscribers, 15 s: enough
# in flight that throughput, not one client's round trip, decides. Any flags replace the default.
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh
need_cargo
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/tmp/buzz-target}
NRR_ROOT=${NRR_ROOT:-/var/tmp/nostr-rs-relay}
NRR=$NRR_ROOT/bin/nostr-rs-relay
NRR_PORT=${NRR_PORT:-18080}
NOSTR_BENCH_ROOT=${NOSTR_BENCH_ROOT:-/var/tmp/nostr-bench}
NOSTR_BENCH=$NOSTR_BENCH_ROOT/bin/nostr-bench
NOSTR_BENCH_CLIENTS=${NOSTR_BENCH_CLIENTS:-64}
NOSTR_BENCH_SECS=${NOSTR_BENCH_SECS:-15}
if (($# == 0)); then
  set -- --publishers 8 --in-flight 8 --subscribers 4 --duration 15
fi
OUT=$ROOT/target/bench
mkdir -p "$OUT"

if [[ ! -x $NRR ]]; then
  have protoc || apt_install protobuf-compiler
  # --locked pins time 0.3.25, which current rustc rejects; resolve compatible versions instead.
  cargo install nostr-rs-relay --version 0.8.12 --root "$NRR_ROOT"
fi
if [[ ! -x $NOSTR_BENCH ]]; then
  cargo install nostr-bench --version 0.4.0 --root "$NOSTR_BENCH_ROOT"
fi
cargo build --release -p buzz-load --bin buzz-load

work=$(mktemp -d)
nrr_pid=
cleanup() {
  [[ -n $nrr_pid ]] && kill "$nrr_pid" 2>/dev/null && wait "$nrr_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/config.toml" <<TOML
[info]
relay_url = "ws://127.0.0.1:$NRR_PORT/"
name = "nostr-rs-relay (comparison)"
[database]
data_directory = "$work"
[network]
address = "127.0.0.1"
port = $NRR_PORT
TOML
RUST_LOG=warn "$NRR" --config "$work/config.toml" >"$work/nrr.log" 2>&1 &
nrr_pid=$!
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$NRR_PORT") 2>/dev/null && break
  kill -0 "$nrr_pid" 2>/dev/null || { cat "$work/nrr.log" >&2; exit 1; }
  sleep 0.1
done

echo "=== nostr-rs-relay 0.8.12"
"$CARGO_TARGET_DIR/release/buzz-load" --mode plain --url "ws://127.0.0.1:$NRR_PORT" --json "$OUT/nostr-rs-relay.json" "$@"
echo "=== nostr-bench 0.4.0 against nostr-rs-relay ($NOSTR_BENCH_CLIENTS clients, one event in flight each, ${NOSTR_BENCH_SECS} s)"
timeout "$NOSTR_BENCH_SECS" "$NOSTR_BENCH" event -c "$NOSTR_BENCH_CLIENTS" -r "$NOSTR_BENCH_CLIENTS" --json \
  "ws://127.0.0.1:$NRR_PORT" >"$OUT/nostr-bench.jsonl" 2>/dev/null || true
kill "$nrr_pid"; wait "$nrr_pid" 2>/dev/null || true; nrr_pid=

echo "=== buzz-relay (buzz dev: all five services in one process)"
BUZZ_LOAD_JSON="$OUT/buzz-relay.json" bash scripts/load.sh "$@"

python3 - "$OUT/buzz-relay.json" "$OUT/nostr-rs-relay.json" "$OUT/nostr-bench.jsonl" <<'PY'
import json, sys
b, n = (json.load(open(p)) for p in sys.argv[1:3])
lines = [l for l in open(sys.argv[3]) if l.strip().startswith("{")]
if lines:
    last = json.loads(lines[-1])
    m, secs = last["message_stats"], last["elapsed"] / 1000
    rate = m["complete"] / secs if secs else float("nan")
    print(f"\n=== nostr-bench cross-check: nostr-rs-relay accepted {m['complete']} events in {secs:.1f} s"
          f" = {rate:.1f} ev/s, mean OK latency {m['success_time']['avg']} ms, errors {m['error']}")
else:
    print("\n=== nostr-bench printed nothing")
def get(r, *path):
    r = r["results"]
    for k in path:
        r = r[k]
    return r
print("\n=== ratio buzz-relay / nostr-rs-relay")
rows = [("accepted events/s", ("accepted_per_sec",), 1.0),
        ("OK p50 ms", ("ok_latency", "p50_us"), 1000.0), ("OK p99 ms", ("ok_latency", "p99_us"), 1000.0),
        ("delivery p50 ms", ("delivery", "latency", "p50_us"), 1000.0),
        ("delivery p99 ms", ("delivery", "latency", "p99_us"), 1000.0)]
for label, path, scale in rows:
    bv, nv = get(b, *path), get(n, *path)
    print(f"  {label:18} buzz {bv/scale:10.2f}   nostr-rs-relay {nv/scale:10.2f}   ratio {bv/nv if nv else float('nan'):.2f}")
PY
