#!/usr/bin/env bash
# Shared helpers of the test, demo and bench scripts: Debian packages, the
# unprivileged OS user that runs throwaway clusters, and the clusters.
set -euo pipefail

FENCING_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FENCING_USER="${FENCING_USER:-fencing_run}"
PG_MAJOR="${PG_MAJOR:-15}"
PGBIN="${PGBIN:-/usr/lib/postgresql/${PG_MAJOR}/bin}"

# The other PostgreSQL majors of the portability runs (pgv_* functions).
source "$FENCING_ROOT/tests/scripts/pgversions.sh"

# Debian packages every command needs (others are added per command).
BASE_PACKAGES=(make g++ sudo
  "postgresql-${PG_MAJOR}" "postgresql-server-dev-${PG_MAJOR}" libpq-dev
  "postgresql-${PG_MAJOR}-pgtap" libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
  libgtest-dev googletest)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ensure_packages PKG...: installs the Debian packages that are missing.
ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing Debian packages: ${missing[*]} (run as root, or install them)"; return 1
  fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Another run may hold the package manager's locks: wait for them (up to
  # 20 minutes) instead of failing.
  local wait_lock=(-o DPkg::Lock::Timeout=1200)
  apt-get "${wait_lock[@]}" update -qq >/dev/null
  # The postgresql-common package would create and start a system cluster;
  # we never use or touch it, so ask it not to.
  mkdir -p /etc/postgresql-common/createcluster.d
  [ -f /etc/postgresql-common/createcluster.d/fencing-no-cluster.conf ] ||
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/fencing-no-cluster.conf
  # Nor would we use a system etcd (etcd-server starts one where systemd
  # runs): the HA tests start their own. Masked only if it is not there yet.
  for p in "${missing[@]}"; do
    if [ "$p" = etcd-server ] && [ -d /etc/systemd/system ] && [ ! -e /etc/systemd/system/etcd.service ]; then
      ln -s /dev/null /etc/systemd/system/etcd.service
    fi
  done
  apt-get "${wait_lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ensure_user: the unprivileged OS user that owns throwaway clusters.
ensure_user() {
  [ "$(id -u)" -ne 0 ] && return 0
  id "$FENCING_USER" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash "$FENCING_USER"
}

# as_user CMD...: runs CMD as the unprivileged user (or as oneself when not root).
as_user() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$FENCING_USER" -- env PATH="$PGBIN:$PATH" "$@"
  else
    env PATH="$PGBIN:$PATH" "$@"
  fi
}

# build_and_install: builds the module and installs it into the PostgreSQL tree.
build_and_install() {
  log "building and installing fencing"
  make -C "$FENCING_ROOT" -s PG_CONFIG="$PGBIN/pg_config" >/dev/null
  if [ "$(id -u)" -eq 0 ]; then
    make -C "$FENCING_ROOT" -s install PG_CONFIG="$PGBIN/pg_config" >/dev/null
  else
    sudo -n make -C "$FENCING_ROOT" -s install PG_CONFIG="$PGBIN/pg_config" >/dev/null
  fi
}

# private_tree DEST [SRCDIR [MAKE-ARGS...]]: a private, relocated copy of the
# PostgreSQL installation of PGBIN (binaries, share, headers; files
# hard-linked where the file system allows) in DEST, with the build of
# fencing in SRCDIR (default: this tree) installed into it. The test suites
# run against it, so that parallel runs from several checkouts never meet in
# the system's PostgreSQL directories. PostgreSQL finds its share and library
# directories relative to its binaries. Prints the copy's bin directory.
private_tree() {
  local dest="$1" src="${2:-$FENCING_ROOT}" bindir prefix rel sharedir incdir
  shift $(( $# < 2 ? $# : 2 ))
  bindir="$(cd "$PGBIN" && pwd -P)"
  sharedir="$("$PGBIN/pg_config" --sharedir)"
  incdir="$("$PGBIN/pg_config" --includedir)"
  prefix="$(dirname "$bindir")"   # e.g. /usr/lib/postgresql/15
  mkdir -p "$dest"
  for d in "$prefix" "$sharedir" "$incdir"; do
    mkdir -p "$dest$(dirname "$d")"
    cp -al "$d" "$dest$(dirname "$d")/" 2>/dev/null || cp -a "$d" "$dest$(dirname "$d")/"
  done
  # The client headers (libpq-fe.h and the like) beside the server's, in
  # pg_config --includedir: the client tests compile against them.
  for d in "$(dirname "$incdir")"/*; do
    case "$(basename "$d")" in [0-9]*) continue ;; esac
    cp -al "$d" "$dest$(dirname "$incdir")/" 2>/dev/null || cp -a "$d" "$dest$(dirname "$incdir")/"
  done
  make -C "$src" -s install PG_CONFIG="$dest$bindir/pg_config" "$@" >/dev/null
  echo "$dest$bindir"
}

# free_port: a TCP port on 127.0.0.1 nobody listens on.
free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

# make_workdir: a temp dir owned by the unprivileged user.
make_workdir() {
  local d; d="$(mktemp -d /tmp/fencing.XXXXXX)"
  chmod 755 "$d"
  [ "$(id -u)" -eq 0 ] && chown "$FENCING_USER" "$d"
  echo "$d"
}
