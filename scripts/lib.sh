# shellcheck shell=bash
# Shared helpers for scripts/*.sh. Source it (". scripts/lib.sh"); it only defines
# functions and a few variables and runs nothing by itself.

# Debian keeps daemons and admin tools (start-stop-daemon, nats-server) in sbin,
# which is not on every user's PATH.
case ":$PATH:" in
  *:/usr/sbin:*) ;;
  *) PATH="$PATH:/usr/sbin:/sbin" ;;
esac

# DRY_RUN=1: commands that would change the machine are printed, not run.
DRY_RUN=${DRY_RUN:-0}

log() { printf '%s\n' "$*" >&2; }      # progress and diagnostics: stderr
say() { printf '%s\n' "$*"; }          # the one status line per dependency: stdout
die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# show_cmd CMD...: CMD quoted so it can be pasted into a shell.
show_cmd() {
  local out
  printf -v out ' %q' "$@"
  printf '%s' "${out# }"
}

# as_root CMD...: run CMD as root: directly when we are root, else through sudo.
# Without sudo it stops and says what to run as root. With DRY_RUN=1 it only prints CMD.
as_root() {
  if [[ $DRY_RUN == 1 ]]; then
    log "  would run: $(show_cmd "$@")"
    return 0
  fi
  # 9>&-: daemons started here must not inherit deps-up.sh's lock (fd 9)
  if [[ $EUID -eq 0 ]]; then
    "$@" 9>&-
  elif have sudo; then
    sudo -- "$@" 9>&-
  else
    die "this step needs root and sudo is not installed. Run it as root:
    $(show_cmd "$@")
  or run the whole script as root: su -c 'bash $(show_cmd "${BASH_SOURCE[-1]}")'"
  fi
}

# now_ms: milliseconds since the epoch, in REPLY (no subshell).
now_ms() {
  local t=${EPOCHREALTIME/[.,]/}
  REPLY=$((t / 1000))
}

# since MS: seconds elapsed since MS (from now_ms), like "1.3s".
since() {
  now_ms
  local d=$((REPLY - $1))
  printf '%d.%ds' $((d / 1000)) $((d % 1000 / 100))
}

# tcp_open HOST PORT [SECONDS]: true when a TCP connection to HOST:PORT succeeds.
tcp_open() {
  # shellcheck disable=SC2016 # $1/$2 are expanded by the inner bash
  timeout "${3:-3}" bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# show_log FILE: last lines of a log file (read as root when needed), to stderr.
show_log() {
  local f=$1
  [[ -n $f ]] || return 0
  if [[ -r $f ]]; then
    log "---- last lines of $f ----"
    tail -n 20 -- "$f" >&2 || true
    log "----"
  elif [[ -e $f && $DRY_RUN != 1 ]]; then
    log "---- last lines of $f ----"
    as_root tail -n 20 -- "$f" >&2 || true
    log "----"
  else
    log "(log file $f does not exist)"
  fi
}

# wait_for WHAT SECONDS LOG ALIVE CHECK...: run CHECK every 0.1 s until it succeeds.
# Fails (with the tail of LOG) after SECONDS, or when the command ALIVE fails once the
# daemon had 1 s to get going (use "true" when there is nothing to watch).
wait_for() {
  local what=$1 secs=$2 logfile=$3 alive=$4
  shift 4
  local start
  now_ms
  start=$REPLY
  until "$@"; do
    now_ms
    if ((REPLY - start >= secs * 1000)); then
      log "error: $what is not ready after ${secs}s (see $logfile)"
      show_log "$logfile"
      return 1
    fi
    if ((REPLY - start >= 1000)) && ! "$alive"; then
      "$@" && return 0 # it may have come up just before exiting the check
      log "error: $what exited during start-up (see $logfile)"
      show_log "$logfile"
      return 1
    fi
    sleep 0.1
  done
}

# parse_url URL: sets URL_SCHEME, URL_HOST (no [] around IPv6) and URL_PORT (empty
# when absent). A URL without "scheme://" is read as host[:port].
# shellcheck disable=SC2034 # the URL_* results are read by the callers
parse_url() {
  local rest=$1 hp
  URL_SCHEME='' URL_HOST='' URL_PORT=''
  if [[ $rest == *://* ]]; then
    URL_SCHEME=${rest%%://*}
    rest=${rest#*://}
  fi
  rest=${rest%%[/?#]*} # authority only
  rest=${rest##*@}     # without user:password@
  if [[ $rest == \[*\]* ]]; then
    URL_HOST=${rest#\[}
    URL_HOST=${URL_HOST%%\]*}
    hp=${rest#*\]}
    URL_PORT=${hp#:}
  elif [[ $rest == *:* ]]; then
    URL_HOST=${rest%:*}
    URL_PORT=${rest##*:}
  else
    URL_HOST=$rest
  fi
}

# mask_url URL: URL with its password replaced by ***, for printing.
mask_url() {
  local re='^([^:/]+://[^:/@]*):[^@]*@(.*)$'
  if [[ $1 =~ $re ]]; then
    printf '%s:***@%s' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  else
    printf '%s' "$1"
  fi
}

APT_UPDATED=0
# apt_install PKG...: install Debian packages (apt-get update runs once per process).
apt_install() {
  (($#)) || return 0
  have apt-get || die "packages needed: $* — but apt-get is missing (not Debian?); install them yourself"
  log "installing Debian packages: $*"
  if [[ $APT_UPDATED == 0 ]]; then
    as_root apt-get update -q >&2 || die "apt-get update failed"
    APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2 ||
    die "apt-get install $* failed"
}
