#!/usr/bin/env bash
# Builds the Dockerfile and runs the image's binaries on a machine that reaches no container
# registry (only Debian's mirrors and the Rust registry), as root:
#   1. stand-in base images made from Debian packages: a bookworm build-essential rootfs
#      (mmdebstrap) with this machine's rustup toolchain and a cargo-chef built from the Rust registry, and
#      a bookworm minbase rootfs, imported into a containers storage private to this script;
#   2. `buildah build --layers` of the Dockerfile with them passed as RUST_IMAGE / RUNTIME_IMAGE;
#   3. every binary of the image starts (--help) as the image's user 65532;
#   4. the whole system from the image: `buzz migrate`, the five services (one container each,
#      host network, user 65532) against PostgreSQL/Redis/NATS on loopback, a community bound to
#      `localhost` provisioned through the operator API, and the chart's `helm test` round trip
#      (buzz-load --mode=buzz --publishers=1 --subscribers=1 --events=5 --require-complete).
#
# Usage: scripts/image-test.sh [--rev REV | --worktree] [--timing] [--no-build] [--rebuild-standins]
#   --rev REV           build that commit (default HEAD: committed sources, so that edits in
#                       progress elsewhere in the tree cannot break the build)
#   --worktree          build the working tree as it is, uncommitted files included
#   --timing            after the build, rebuild once after changing one workspace source file
#                       and once with no change, and print both times (the cargo chef cook layer
#                       must come from the cache)
#   --no-build          test the image built last time
#   --rebuild-standins  make the stand-in base images again
# Tools: podman, buildah, mmdebstrap, runc (installed from Debian when missing), cargo on the host.
# State (storage, stand-in rootfs, logs, timings): $BUZZ_IMAGE_TEST_DIR (/var/tmp/buzz-image-test).
# Ports: $BUZZ_IMAGE_TEST_PORT (19400) and up; database buzz_image_test (dropped and made again).
# A first run takes 30-45 minutes on 2 cores (the release build of the workspace).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. scripts/lib.sh

SOURCE=rev REV=HEAD TIMING= BUILD=1 REBUILD_STANDINS=
while (($#)); do
  case $1 in
    --worktree) SOURCE=worktree ;;
    --rev) REV=${2:?--rev needs a commit}; shift ;;
    --timing) TIMING=1 ;;
    --no-build) BUILD= ;;
    --rebuild-standins) REBUILD_STANDINS=1 ;;
    -h | --help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "image-test.sh: unknown flag $1" >&2; exit 2 ;;
  esac
  shift
done

[[ $EUID -eq 0 ]] || die "run as root: mmdebstrap and podman/buildah use a root containers storage"

WORK=${BUZZ_IMAGE_TEST_DIR:-/var/tmp/buzz-image-test}
BASE=${BUZZ_IMAGE_TEST_PORT:-19400}
IMAGE=localhost/buzz-relay:0.1.0
RUST_STANDIN=localhost/buzz-standin/rust:bookworm
RUNTIME_STANDIN=localhost/buzz-standin/runtime:bookworm
DB=buzz_image_test
BINS=(buzz-gateway buzz-write buzz-query buzz-snapshot buzz-policy buzz buzz-load)
mkdir -p "$WORK"
TIMINGS=$WORK/timings.log

# ---- tools ----
missing=()
for t in podman:podman buildah:buildah mmdebstrap:mmdebstrap runc:runc curl:curl psql:postgresql-client; do
  have "${t%%:*}" || missing+=("${t#*:}")
done
((${#missing[@]} == 0)) || apt_install "${missing[@]}"

# ---- a containers configuration and storage of our own (nothing global is touched) ----
# default_ulimits = []: crun/runc may not raise RLIMIT_NOFILE here. cgroupfs and runc: this
# machine has cgroup v1 next to a cgroup2 mount ("hybrid"), which crun refuses.
mkdir -p "$WORK/conf"
DRIVER=${BUZZ_IMAGE_TEST_DRIVER:-overlay}
write_conf() {
  cat >"$WORK/conf/storage.conf" <<EOF
[storage]
driver = "$DRIVER"
graphroot = "$WORK/storage-$DRIVER"
runroot = "$WORK/run-$DRIVER"
EOF
  cat >"$WORK/conf/containers.conf" <<EOF
[containers]
default_ulimits = []
netns = "host"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$WORK/events.log"
runtime = "runc"
EOF
  cat >"$WORK/conf/registries.conf" <<'EOF'
unqualified-search-registries = []
short-name-mode = "permissive"
EOF
}
write_conf
export CONTAINERS_STORAGE_CONF=$WORK/conf/storage.conf CONTAINERS_CONF=$WORK/conf/containers.conf \
  CONTAINERS_REGISTRIES_CONF=$WORK/conf/registries.conf
if ! podman info >/dev/null 2>"$WORK/podman-info.err"; then
  [[ $DRIVER == overlay ]] || die "podman info fails with the $DRIVER driver: $(cat "$WORK/podman-info.err")"
  log "image-test: the overlay storage driver does not work here; using vfs (slower, larger)"
  DRIVER=vfs
  write_conf
  podman info >/dev/null || die "podman info fails with the vfs driver too"
fi

# ---- stand-in base images ----
# The Debian mirrors this machine's apt uses (deb822 or one-line sources), for the rootfs;
# BUZZ_DEBIAN_MIRROR / BUZZ_DEBIAN_SECURITY_MIRROR win over them. The project names no mirror:
# without either, the script stops and says so.
mirror_of() { # mirror_of debian|debian-security
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v want="$1" '
    /^URIs:/ {for (i = 2; i <= NF; i++) {n = split($i, p, "/"); if (p[n] == want || p[n-1] == want && p[n] == "") {print $i; exit}}}')
  [[ -n $m ]] || m=$(cat /etc/apt/sources.list 2>/dev/null | awk -v want="$1" '
    $1 == "deb" {u = ($2 ~ /^\[/) ? $3 : $2; n = split(u, p, "/"); if (p[n] == want) {print u; exit}}')
  printf '%s' "$m"
}
MIRROR=${BUZZ_DEBIAN_MIRROR:-$(mirror_of debian)}
SECURITY=${BUZZ_DEBIAN_SECURITY_MIRROR:-$(mirror_of debian-security)}
[[ -n $MIRROR ]] || die "no Debian mirror in this machine's apt sources (/etc/apt/sources.list*): set BUZZ_DEBIAN_MIRROR to one (e.g. the URL whose last path segment is debian)"
[[ -n $SECURITY ]] || die "no Debian security mirror in this machine's apt sources: set BUZZ_DEBIAN_SECURITY_MIRROR to one (the URL ending in debian-security)"
SOURCES=("deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main" "deb $SECURITY bookworm-security main")

image_exists() { podman image exists "$1"; }

make_runtime_standin() {
  local fs=$WORK/rootfs-runtime
  rm -rf "$fs"
  log "image-test: mmdebstrap bookworm minbase (runtime stand-in) from $MIRROR"
  mmdebstrap --variant=minbase --mode=root bookworm "$fs" "${SOURCES[@]}" >"$WORK/mmdebstrap-runtime.log" 2>&1 ||
    die "mmdebstrap failed (log: $WORK/mmdebstrap-runtime.log)"
  # debian:bookworm-slim's PATH (an imported rootfs has no environment).
  tar -C "$fs" -c . | podman import -q \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    - "$RUNTIME_STANDIN" >/dev/null
  rm -rf "$fs"
}

make_rust_standin() {
  local fs=$WORK/rootfs-rust chef=$WORK/cargo-chef/bin/cargo-chef toolchain name
  need_cargo
  if [[ ! -x $chef ]]; then
    log "image-test: cargo install cargo-chef (the Rust registry) into $WORK/cargo-chef"
    nice -n 10 cargo install --locked cargo-chef --root "$WORK/cargo-chef" \
      --target-dir "$WORK/cargo-chef-target" >"$WORK/cargo-chef-install.log" 2>&1 ||
      die "cargo install cargo-chef failed (log: $WORK/cargo-chef-install.log)"
  fi
  # The toolchain the host's cargo runs (rustup's proxy resolves it; a symlinked name is followed).
  toolchain=$(readlink -f "$(dirname "$(rustup which cargo)")/..")
  name=$(basename "$toolchain")
  # A rootfs left by a run that failed after mmdebstrap is reused.
  if [[ ! -e $fs.done ]]; then
    rm -rf "$fs"
    log "image-test: mmdebstrap bookworm with build-essential (Rust stand-in) from $MIRROR"
    mmdebstrap --variant=apt --mode=root \
      --include=build-essential,pkg-config,ca-certificates,libssl-dev,git \
      bookworm "$fs" "${SOURCES[@]}" >"$WORK/mmdebstrap-rust.log" 2>&1 ||
      die "mmdebstrap failed (log: $WORK/mmdebstrap-rust.log)"
    touch "$fs.done"
  fi
  # As in the rust images: RUSTUP_HOME=/usr/local/rustup, CARGO_HOME=/usr/local/cargo with the
  # rustup proxies in its bin. The toolchain's HTML docs are left out.
  mkdir -p "$fs/usr/local/rustup/toolchains/$name" "$fs/usr/local/cargo/bin"
  tar -C "$toolchain" --exclude=./share/doc -c . | tar -C "$fs/usr/local/rustup/toolchains/$name" -x
  printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\nauto_self_update = "disable"\n' \
    "$name" >"$fs/usr/local/rustup/settings.toml"
  cp "$(command -v rustup || echo "${CARGO_HOME:-$HOME/.cargo}/bin/rustup")" "$fs/usr/local/cargo/bin/rustup"
  for p in cargo rustc rustdoc; do ln -sf rustup "$fs/usr/local/cargo/bin/$p"; done
  cp "$chef" "$fs/usr/local/cargo/bin/cargo-chef"
  # The build downloads crates from the Rust registry: the stand-in trusts what this machine trusts (a
  # machine whose egress goes through a TLS proxy has that proxy's CA here).
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$fs/usr/local/share/ca-certificates/"
    chroot "$fs" update-ca-certificates >/dev/null
  fi
  tar -C "$fs" -c . | podman import -q \
    --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV RUSTUP_HOME=/usr/local/rustup' --change 'ENV CARGO_HOME=/usr/local/cargo' \
    - "$RUST_STANDIN" >/dev/null
  # The toolchain runs inside it, the way the build's RUN steps will run it.
  local c
  c=$(buildah from --pull=never "$RUST_STANDIN")
  if ! buildah run --isolation chroot "$c" -- sh -c 'cargo --version && rustc --version && cargo chef --version' >&2; then
    buildah rm "$c" >/dev/null
    podman rmi "$RUST_STANDIN" >/dev/null
    die "the Rust toolchain does not run inside the stand-in (buildah run --isolation chroot)"
  fi
  buildah rm "$c" >/dev/null
  rm -rf "$fs" "$fs.done"
}

if [[ -n $BUILD ]]; then
  if [[ -n $REBUILD_STANDINS ]] || ! image_exists "$RUNTIME_STANDIN"; then make_runtime_standin; fi
  if [[ -n $REBUILD_STANDINS ]] || ! image_exists "$RUST_STANDIN"; then make_rust_standin; fi
fi

# ---- the build ----
CONTEXT=$WORK/context
make_context() {
  rm -rf "$CONTEXT"
  mkdir -p "$CONTEXT"
  if [[ $SOURCE == rev ]]; then
    git archive "$REV" | tar -C "$CONTEXT" -x
  else
    git ls-files -z -co --exclude-standard | tar -C "$ROOT" --null -T - -c | tar -C "$CONTEXT" -x
  fi
}

# build LABEL: buildah build of $CONTEXT; its wall time is appended to $TIMINGS.
build() {
  local label=$1 t0=$SECONDS rc=0
  log "image-test: buildah build ($label), log $WORK/build-$label.log"
  # chroot isolation: no OCI runtime and no cgroups needed for RUN steps; host network for
  # the Rust registry and Debian's mirror.
  nice -n 10 buildah build --isolation chroot --layers --network host --pull=never \
    --build-arg RUST_IMAGE="$RUST_STANDIN" --build-arg RUNTIME_IMAGE="$RUNTIME_STANDIN" \
    -t "$IMAGE" -f "$CONTEXT/Dockerfile" "$CONTEXT" >"$WORK/build-$label.log" 2>&1 || rc=$?
  printf '%s build %-10s %5d s rc=%d (%s)\n' "$(date -u +%FT%TZ)" "$label" $((SECONDS - t0)) "$rc" \
    "$(git rev-parse --short "$REV") $SOURCE" | tee -a "$TIMINGS" >&2
  ((rc == 0)) || {
    tail -n 30 "$WORK/build-$label.log" >&2
    die "the build failed (log: $WORK/build-$label.log)"
  }
  # Which RUN steps came from the cache.
  grep -E 'STEP [0-9]+/[0-9]+: (RUN|COPY)|^--> Using cache' "$WORK/build-$label.log" | sed 's/^/    /' >&2 || true
}

if [[ -n $BUILD ]]; then
  make_context
  build first
  if [[ -n $TIMING ]]; then
    # One workspace source file changed (a comment appended): the cook layer must be reused.
    echo "// image-test.sh cache probe $(date +%s)" >>"$CONTEXT/gateway/src/main.rs"
    build one-file
    grep -A1 'cargo chef cook' "$WORK/build-one-file.log" | grep -q 'Using cache' ||
      log "image-test: WARNING: the cargo chef cook layer was rebuilt after a source change"
    build no-change
  fi
fi
image_exists "$IMAGE" || die "no image $IMAGE (run without --no-build)"
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
log "image-test: $IMAGE is $((size / 1000 / 1000)) MB (podman image inspect .Size)"
echo "$(date -u +%FT%TZ) size $IMAGE $size bytes" >>"$TIMINGS"

# ---- running the image ----
# Every container: host network (loopback PostgreSQL/Redis/NATS), the image's own user.
CTRS=()
cleanup() {
  for c in "${CTRS[@]}"; do podman rm -f -t 2 "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
run() { podman run --rm --network host "$@"; }

uid=$(run --entrypoint /usr/bin/id "$IMAGE" -u) || die "podman run of the image fails (see above)"
[[ $uid == 65532 ]] || die "the image runs as uid $uid, not 65532"
log "image-test: podman run works; the image's user is $uid"
for b in "${BINS[@]}"; do
  out=$(run --entrypoint "/usr/local/bin/$b" "$IMAGE" --help 2>&1) || die "$b --help failed: $out"
  log "  $b --help: $(head -n 1 <<<"$out")"
done

bash scripts/deps-up.sh
PG=postgres://postgres@127.0.0.1:5432
psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null
psql -q "$PG/postgres" -c "CREATE DATABASE $DB" >/dev/null
DATABASE_URL="$PG/$DB?sslmode=disable"
run "$IMAGE" buzz migrate --database-url "$DATABASE_URL" >/dev/null

field() { sed -n "s/.*\"$2\":\"\([0-9a-f]*\)\".*/\1/p" <<<"$1"; }
relay_json=$(run "$IMAGE" buzz keygen)
op_json=$(run "$IMAGE" buzz keygen)
owner_json=$(run "$IMAGE" buzz keygen)
tag=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
POLICY=$((BASE + 10)) GATEWAY=$BASE
ENVS=(
  -e "DATABASE_URL=$DATABASE_URL" -e REDIS_URL=redis://127.0.0.1:6379 -e NATS_URL=nats://127.0.0.1:4222
  -e "BUZZ_RELAY_SECRET_KEY=$(field "$relay_json" secret_key)"
  -e "BUZZ_NATS_PREFIX=it$tag" -e "BUZZ_REDIS_PREFIX=it:$tag:"
  -e RUST_LOG=warn -e BUZZ_LOG_FORMAT=text
)
start() { # start NAME BINARY ENV...: one service in its own container
  local name=buzz-it-$1 bin=$2
  shift 2
  podman rm -f "$name" >/dev/null 2>&1 || true
  CTRS+=("$name")
  podman run -d --name "$name" --network host "${ENVS[@]}" "$@" "$IMAGE" "/usr/local/bin/$bin" >/dev/null
}
start policy buzz-policy -e "BUZZ_POLICY_ADDR=127.0.0.1:$POLICY" -e "BUZZ_POLICY_ADMIN_ADDR=127.0.0.1:$((BASE + 11))" \
  -e "RELAY_OPERATOR_PUBKEYS=$(field "$op_json" pubkey)" -e "RELAY_OPERATOR_API_ORIGIN=http://127.0.0.1:$POLICY"
start write buzz-write -e "BUZZ_WRITE_ADMIN_ADDR=127.0.0.1:$((BASE + 12))"
start query buzz-query -e "BUZZ_QUERY_ADMIN_ADDR=127.0.0.1:$((BASE + 13))"
start snapshot buzz-snapshot -e "BUZZ_SNAPSHOT_ADMIN_ADDR=127.0.0.1:$((BASE + 14))"
start gateway buzz-gateway -e "BUZZ_GATEWAY_ADDR=127.0.0.1:$GATEWAY" -e "BUZZ_GATEWAY_ADMIN_ADDR=127.0.0.1:$((BASE + 15))"

ready() { curl -fsS -o /dev/null "http://127.0.0.1:$1/readyz" 2>/dev/null; }
for port in $((BASE + 11)) $((BASE + 12)) $((BASE + 13)) $((BASE + 14)) $((BASE + 15)); do
  if ! wait_until 60 ready "$port"; then
    for c in "${CTRS[@]}"; do log "---- $c"; podman logs --tail 15 "$c" >&2 || true; done
    die "a service on admin port $port did not get ready (logs above)"
  fi
done
for c in "${CTRS[@]}"; do
  pid=$(podman inspect --format '{{.State.Pid}}' "$c")
  u=$(ps -o uid= -p "$pid" | tr -d ' ')
  [[ $u == 65532 ]] || die "$c runs as uid $u, not 65532"
  log "  $c: ready, process $pid runs as uid $u"
done

# The community of the chart's helm test: bound to helmTest.host (localhost), owned by the key
# that helmTest.existingSecret would hold.
run "$IMAGE" buzz operator create-community --url "http://127.0.0.1:$POLICY" \
  --secret-key "$(field "$op_json" secret_key)" --host localhost \
  --owner-pubkey "$(field "$owner_json" pubkey)" >/dev/null

# templates/tests/roundtrip.yaml's command and arguments, the Service URL being the gateway's.
log "image-test: helm test round trip (buzz-load --mode=buzz ... --events=5 --require-complete)"
rc=0
run -e "BUZZ_LOAD_OWNER_SECRET=$(field "$owner_json" secret_key)" --entrypoint /usr/local/bin/buzz-load "$IMAGE" \
  --mode=buzz --url="ws://127.0.0.1:$GATEWAY" --host-header=localhost \
  --publishers=1 --subscribers=1 --events=5 --require-complete || rc=$?
if ((rc != 0)); then
  for c in "${CTRS[@]}"; do log "---- $c"; podman logs --tail 15 "$c" >&2 || true; done
  die "the round trip failed (exit $rc)"
fi
echo "$(date -u +%FT%TZ) roundtrip ok" >>"$TIMINGS"
log "image-test: OK: image built from stand-in bases, every binary starts as uid 65532, helm test round trip passed"
