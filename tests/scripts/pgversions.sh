#!/usr/bin/env bash
# PostgreSQL majors other than the system's, for the portability runs of
# `make test`. Sourced by common.sh; usable directly as well:
#
#   bash tests/scripts/pgversions.sh fetch 18    prints the bin directory of 18
#
# Debian 12 carries only PostgreSQL 15. The other majors come from the Debian
# releases that carry them (pgv_suites), fetched with a private apt
# configuration that is built at run time from this machine's own apt sources
# (same archives and keyrings, other suite names), with lists, cache and
# status of its own: the machine's apt configuration and its installed
# packages are never changed. The packages are extracted (dpkg-deb -x) into
# a cache directory, FENCING_PG_CACHE (default /var/cache/fencing-pg),
# root-owned and world-readable; a second run reuses them.
#
# The binaries of those releases need their own, newer glibc: patchelf points
# each ELF program at the release's dynamic loader, extracted beside it, and
# at the release's libraries (DT_RPATH, which also covers the libraries and
# modules they load). Programs keep their real paths, so PostgreSQL still
# finds its share and lib directories relative to them, and pg_ctl, initdb
# and postgres can start each other as usual.
#
# Building against those headers with Debian 12's gcc 12 needs the PGXS flags
# fitted (pgv_make_flags) and a declaration of strlcpy/strlcat, which glibc
# declares from 2.38 on only (see src/pg/pg.hpp).

PGV_CACHE="${FENCING_PG_CACHE:-/var/cache/fencing-pg}"
PGV_ARCH_TRIPLET="x86_64-linux-gnu"

# pgv_suites MAJOR: the Debian suites that carry MAJOR (the last one is the
# one its packages are taken from; the ones before fill dependencies).
pgv_suites() {
  case "$1" in
    17) echo "trixie" ;;
    18) echo "sid" ;;
    19) echo "sid experimental" ;;
    *) return 1 ;;
  esac
}

pgv_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# pgv_host_release: the codename of this machine's own release (bookworm).
pgv_host_release() {
  . /etc/os-release
  echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}"
}

# pgv_machine_sources: this machine's Debian sources, one "URI SUITE COMPONENTS
# SIGNED_BY" line each (deb822 files and the one-line format), "-" for no
# Signed-By. Only "deb" entries of the machine's own release.
pgv_machine_sources() {
  python3 - "$(pgv_host_release)" <<'PY'
import glob, os, re, sys
host = sys.argv[1]
entries = []
def add(uris, suites, comps, signed):
    for u in uris:
        for s in suites:
            if s == host or s.startswith(host + "-"):
                entries.append((u.rstrip("/"), s, " ".join(comps), signed or "-"))
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    with open(path) as fh:
        text = fh.read()
    for stanza in re.split(r"\n\s*\n", text):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        add(fields.get("uris", "").split(), fields.get("suites", "").split(),
            fields.get("components", "main").split(), fields.get("signed-by", "").split()[0] if fields.get("signed-by") else "")
lists = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
for path in lists:
    if not os.path.isfile(path):
        continue
    with open(path) as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line.startswith("deb "):
                continue
            words = line.split()[1:]
            signed = ""
            if words and words[0].startswith("["):
                opts = []
                while words:
                    w = words.pop(0)
                    opts.append(w)
                    if w.endswith("]"):
                        break
                m = re.search(r"signed-by=([^\s\]]+)", " ".join(opts))
                signed = m.group(1) if m else ""
            if len(words) >= 2:
                add([words[0]], [words[1]], words[2:] or ["main"], signed)
for e in entries:
    print(*e)
PY
}

# pgv_apt_dir SUITES: a private apt configuration for SUITES (space-separated)
# under the cache; updates its lists once a day. Prints the directory.
pgv_apt_dir() {
  local suites="$1" host dir uri suite comps signed target line n=0
  host="$(pgv_host_release)"
  dir="$PGV_CACHE/apt-${suites// /+}"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts" "$dir/prefs" "$dir/debs"
  : > "$dir/sources.list.new"
  while read -r uri suite comps signed; do
    for target in $suites; do
      line=""
      if [ "$suite" = "$host" ]; then
        line="$target"
      elif [ "${suite#"$host"-}" != "$suite" ]; then
        # bookworm-updates, bookworm-security: only for releases that have them.
        case "$target" in sid|experimental) continue ;; esac
        line="${target}-${suite#"$host"-}"
      fi
      [ -n "$line" ] || continue
      if [ "$signed" = "-" ]; then
        echo "deb $uri $line $comps" >> "$dir/sources.list.new"
      else
        echo "deb [signed-by=$signed] $uri $line $comps" >> "$dir/sources.list.new"
      fi
      n=$((n + 1))
    done
  done < <(pgv_machine_sources)
  if [ "$n" -eq 0 ]; then
    pgv_log "no Debian sources of $host found in /etc/apt: cannot derive the sources of $suites"
    return 1
  fi
  if ! cmp -s "$dir/sources.list.new" "$dir/sources.list"; then
    mv "$dir/sources.list.new" "$dir/sources.list"
    rm -f "$dir/updated"
  else
    rm -f "$dir/sources.list.new"
  fi
  [ -f "$dir/status" ] || : > "$dir/status"
  if [ -z "$(find "$dir/updated" -mmin -1440 2>/dev/null)" ]; then
    pgv_log "apt-get update for $suites (private lists in $dir)"
    pgv_apt "$dir" update -qq >"$dir/update.log" 2>&1 || { cat "$dir/update.log" >&2; return 1; }
    # A suite missing from the archive only warns: refuse that too.
    if grep -qE '^(W|E): .*(does not have a Release file|Failed to fetch|not signed|NO_PUBKEY)' "$dir/update.log"; then
      cat "$dir/update.log" >&2
      return 1
    fi
    touch "$dir/updated"
  fi
  echo "$dir"
}

# pgv_apt DIR APT-GET-ARGS...: apt-get with the private configuration of DIR.
pgv_apt() {
  local dir="$1"
  shift
  apt-get -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts="$dir/parts" \
    -o Dir::Etc::Preferences="$dir/prefs/none" -o Dir::Etc::PreferencesParts="$dir/prefs" \
    -o Dir::State::Lists="$dir/lists" -o Dir::State::status="$dir/status" \
    -o Dir::State::extended_states="$dir/extended_states" \
    -o Dir::Cache="$dir/cache" -o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" \
    -o APT::Update::Post-Invoke::= -o APT::Update::Post-Invoke-Success::= \
    -o APT::Sandbox::User=root -o Debug::NoLocking=true "$@"
}

pgv_apt_cache() {
  local dir="$1"
  shift
  apt-cache -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts="$dir/parts" \
    -o Dir::Etc::Preferences="$dir/prefs/none" -o Dir::Etc::PreferencesParts="$dir/prefs" \
    -o Dir::State::Lists="$dir/lists" -o Dir::State::status="$dir/status" \
    -o Dir::Cache="$dir/cache" -o Dir::Cache::pkgcache="" -o Dir::Cache::srcpkgcache="" "$@"
}

# pgv_packages DIR MAJOR: the packages to extract for MAJOR: PostgreSQL's own
# and every library they need (recursively), without what is not needed to
# build and run the tests (LLVM for the JIT, perl, python, tzdata, ...).
pgv_packages() {
  local dir="$1" major="$2" want=() p dev
  want=("postgresql-$major" "postgresql-client-$major" libpq5 libpq-dev libc6 libstdc++6 libgcc-s1)
  # pgTAP where the release has it (a release candidate may not yet): the
  # pgTAP suite of that major then fails.
  p="postgresql-$major-pgtap"
  if [ -n "$(pgv_apt_cache "$dir" show --no-all-versions "$p" 2>/dev/null | sed -n 's/^Package: //p')" ]; then
    want+=("$p")
  else
    pgv_log "$p is not in $(pgv_suites "$major"): no pgTAP for $major"
  fi
  # The server headers and PGXS: postgresql-server-dev-MAJOR where the
  # release still has it.
  dev="postgresql-server-dev-$major"
  if [ -z "$(pgv_apt_cache "$dir" show --no-all-versions "$dev" 2>/dev/null | sed -n 's/^Package: //p')" ]; then
    pgv_log "$dev is not in $(pgv_suites "$major"); no headers for $major"
    return 1
  fi
  want+=("$dev")
  for p in "${want[@]}"; do
    if [ -z "$(pgv_apt_cache "$dir" show --no-all-versions "$p" 2>/dev/null | sed -n 's/^Package: //p')" ]; then
      pgv_log "package $p not found in $(pgv_suites "$major")"
      return 1
    fi
  done
  {
    printf '%s\n' "${want[@]}"
    pgv_apt_cache "$dir" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
        --no-replaces --no-enhances --no-pre-depends "${want[@]}" 2>/dev/null |
      sed -n 's/^ *\(Pre\)\{0,1\}Depends: \([^ <]*\).*/\2/p; s/^\([a-z0-9][^ ]*\)$/\1/p' |
      grep -E '^lib|^zlib1g$' |
      grep -vE '^lib(llvm|clang|perl|python|z3|.*-perl$|.*-dev$)' |
      grep -vE '^lib(asan|tsan|hwasan|lsan|ubsan|gprofng|binutils|ctf|sframe|objc|gomp|itm|quadmath|cc1|c-dev-bin|c-l10n|gc1)' || true
    echo libpq-dev
    echo "$dev"
  } | sed 's/:any$//' | LC_ALL=C sort -u
}

# pgv_fetch MAJOR: fetches and extracts MAJOR (once; cached) and prints its
# bin directory. Fails loudly (non-zero, with the reason) when it cannot.
# The mark of a complete extraction; a new name when the extracted tree changes
# shape (2: without llvmjit.so) makes older caches extract again.
PGV_STAMP=".complete-2"

pgv_fetch() {
  local major="$1" bindir="$PGV_CACHE/pg$1/usr/lib/postgresql/$1/bin"
  if [ -f "$PGV_CACHE/pg$major/$PGV_STAMP" ] && [ -x "$bindir/pg_config" ]; then
    echo "$bindir"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    pgv_log "PostgreSQL $major is not in $PGV_CACHE yet: fetch it as root"
    return 1
  fi
  umask 022
  mkdir -p "$PGV_CACHE"
  chmod 755 "$PGV_CACHE"
  # One fetch at a time: test runs of several checkouts share the cache.
  (
    flock -w 1800 9 || { pgv_log "timed out waiting for $PGV_CACHE/.lock"; exit 1; }
    pgv_fetch_locked "$major"
  ) 9>"$PGV_CACHE/.lock"
}

pgv_fetch_locked() {
  local major="$1" suites last dir root stamp pkgs=() p deb ld f rpath bindir topt=()
  suites="$(pgv_suites "$major")" || { pgv_log "no Debian release known for PostgreSQL $major"; return 1; }
  last="${suites##* }"
  # An overlay suite (experimental) only wins when asked for; in a release,
  # the newest version of its suites (point release, -updates, -security).
  [ "$last" = "$suites" ] || topt=(-t "$last")
  root="$PGV_CACHE/pg$major"
  stamp="$root/$PGV_STAMP"
  bindir="$root/usr/lib/postgresql/$major/bin"
  if [ -f "$stamp" ] && [ -x "$bindir/pg_config" ]; then
    echo "$bindir"
    return 0
  fi
  command -v patchelf >/dev/null || { pgv_log "patchelf is missing"; return 1; }
  dir="$(pgv_apt_dir "$suites")" || return 1
  mapfile -t pkgs < <(pgv_packages "$dir" "$major") || return 1
  [ ${#pkgs[@]} -gt 0 ] || return 1
  pgv_log "PostgreSQL $major from $last: ${#pkgs[@]} packages"
  (
    cd "$dir/debs" || exit 1
    local missing=()
    for p in "${pkgs[@]}"; do
      ls "${p}"_*.deb >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] || pgv_apt "$dir" download -qq "${topt[@]}" "${missing[@]}" >"$dir/download.log" 2>&1 ||
      { cat "$dir/download.log" >&2; exit 1; }
  ) || { pgv_log "downloading PostgreSQL $major failed"; return 1; }
  rm -rf "$root"
  mkdir -p "$root"
  for p in "${pkgs[@]}"; do
    # The newest downloaded version of p.
    deb="$(ls -v "$dir/debs/${p}"_*.deb 2>/dev/null | tail -n 1)"
    [ -n "$deb" ] || { pgv_log "no package file of $p"; return 1; }
    dpkg-deb -x "$deb" "$root"
  done
  # LLVM is not fetched: without its provider library PostgreSQL runs without
  # JIT, quietly, instead of failing a costly query (pg_rewind's file list).
  rm -f "$root/usr/lib/postgresql/$major/lib/llvmjit.so"
  ld="$(find "$root" -name 'ld-linux-x86-64.so.2' \( -type f -o -type l \) | head -n 1)"
  [ -n "$ld" ] || { pgv_log "no dynamic loader in the packages of $major"; return 1; }
  ld="$(readlink -f "$ld")"
  # Where the release's libraries are (usr-merged or not).
  rpath="$root/usr/lib/$PGV_ARCH_TRIPLET:$root/lib/$PGV_ARCH_TRIPLET:$root/usr/lib/postgresql/$major/lib"
  # Every ELF executable of the packages runs under the release's loader and
  # libraries; the shared objects PostgreSQL loads find them through the
  # executable's DT_RPATH.
  while IFS= read -r -d '' f; do
    if head -c 4 "$f" | grep -q 'ELF' && readelf -l "$f" 2>/dev/null | grep -q 'INTERP'; then
      patchelf --set-interpreter "$ld" --force-rpath --set-rpath "$rpath" "$f" ||
        { pgv_log "patchelf failed on $f"; return 1; }
    fi
  done < <(find "$root/usr/lib/postgresql" "$root/usr/bin" -type f -perm -u+x -print0 2>/dev/null)
  chmod -R a+rX "$root"
  if ! "$bindir/pg_config" --version >/dev/null 2>&1; then
    pgv_log "pg_config of $major does not run"
    "$bindir/pg_config" --version >&2 || true
    return 1
  fi
  if [ "$("$bindir/pg_config" --sharedir)" != "$root/usr/share/postgresql/$major" ]; then
    pgv_log "pg_config of $major does not find its share directory: $("$bindir/pg_config" --sharedir)"
    return 1
  fi
  touch "$stamp"
  pgv_log "PostgreSQL $major: $("$bindir/pg_config" --version) in $root"
  echo "$bindir"
}

# pgv_make_flags BINDIR: make variables that fit the PGXS flags of another
# release to this machine's compiler: no warning options, no
# -fexcess-precision=standard (gcc 12 rejects it for C++), no LLVM bitcode.
pgv_make_flags() {
  local global var f keep out=()
  global="$(dirname "$("$1/pg_config" --pgxs)")/../Makefile.global"
  for var in CFLAGS CXXFLAGS; do
    keep=()
    for f in $(sed -n "s/^$var = //p" "$global"); do
      case "$f" in -W*|-fexcess-precision=*) continue ;; esac
      keep+=("$f")
    done
    out+=("$var=${keep[*]}")
  done
  printf '%s\n' "${out[@]}" "with_llvm=no"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    fetch) pgv_fetch "${2:?usage: $0 fetch MAJOR}" ;;
    flags) pgv_make_flags "${2:?usage: $0 flags BINDIR}" ;;
    *) echo "usage: $0 fetch MAJOR | flags BINDIR" >&2; exit 2 ;;
  esac
fi
