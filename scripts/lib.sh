# shellcheck shell=bash
# Helpers shared by scripts/*.sh. Source it; it only defines functions and runs nothing itself.

# Debian keeps daemons and admin tools (start-stop-daemon, nats-server) in sbin.
case ":$PATH:" in
  *:/usr/sbin:*) ;;
  *) PATH="$PATH:/usr/sbin:/sbin" ;;
esac

log() { printf '%s\n' "$*" >&2; }
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# as_root CMD...: CMD as root (directly, or through sudo). Daemons started here must not
# inherit deps-up.sh's lock, hence 9>&-.
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@" 9>&-
  elif have sudo; then
    sudo -- "$@" 9>&-
  else
    die "'$*' needs root and sudo is not installed; run this script as root"
  fi
}

# wait_until SECONDS CMD...: run CMD every 0.2 s until it succeeds; false after SECONDS.
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# ready PORT: /readyz of a service's admin listener on 127.0.0.1:PORT answers 2xx within 1 s.
ready() { curl -fsS -m 1 -o /dev/null "http://127.0.0.1:$1/readyz" 2>/dev/null; }

# hex_field JSON NAME: the lowercase-hex string field NAME of a one-line JSON object (`buzz keygen`).
hex_field() { sed -n "s/.*\"$2\":\"\([0-9a-f]*\)\".*/\1/p" <<<"$1"; }

# apt_install PKG...: install Debian packages (one apt-get update per process).
apt_install() {
  have apt-get || die "needed: $* — apt-get is missing (not Debian?); install them yourself"
  log "installing Debian packages: $*"
  if [[ -z ${APT_UPDATED:-} ]]; then
    as_root apt-get update -q >&2 || die "apt-get update failed"
    APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 ||
    die "apt-get install $* failed"
}

# need_cargo: cargo on PATH (rustup installs into ~/.cargo/bin, which a non-login shell may lack).
need_cargo() {
  local bin=${CARGO_HOME:-${HOME:-/root}/.cargo}/bin
  if ! have cargo && [[ -x $bin/cargo ]]; then
    PATH="$bin:$PATH"
  fi
  have cargo && return 0
  cat >&2 <<'MSG'
error: cargo (Rust) is not installed. Install it with rustup:
    apt-get install -y curl ca-certificates build-essential pkg-config
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y
    . "$HOME/.cargo/env"
then run the script again.
MSG
  exit 1
}
