#!/usr/bin/env bash
# test.sh quick|long|ha -- `make test` / `make test-long` / `make test-ha`.
#
# Installs the Debian packages that are missing, builds and installs the
# extension and the unit tests, copies the tree into a scratch directory owned
# by the unprivileged user and runs tests/scripts/suites.sh there as that user
# (a throwaway cluster on a free loopback port; no system cluster is touched).
#
# Every test result is a line "PASS <suite>/<name>" or "FAIL <suite>/<name>".
# The last line printed is exactly "N passed, N failed"; the exit status is
# non-zero when anything failed or when no test ran at all.
#
# Before the suites, for the upgrade suite (when FENCING_SUITES, default all,
# names it), while the checkout and its history are at hand: the earlier
# releases CHANGELOG.md names are built from their commits and the current
# tree is staged, each as a package, beside a private copy of PostgreSQL
# whose fencing files the tests may replace (prepare_upgrade;
# tests/scripts/releases.sh). "upgrade/changelog" checks the release list
# against the history. Until a first release exists, the update starts from
# a commit of the working tree's own tracked files.
#
# Then the portability runs: for each major of FENCING_PG_VERSIONS (default
# "17 18"), fetched from another Debian release (tests/scripts/pgversions.sh;
# cached in /var/cache/fencing-pg), the module is built against that major's
# headers ("pgNN/compile") and installed into a private copy of it, and the
# pg_regress, isolation, pgTAP, TAP and upgrade suites and `make
# installcheck` run on a throwaway cluster of it ("pgNN/<suite>/<name>"; only
# those FENCING_SUITES names, when it is set); the upgrade suite there is
# pg_upgrade from the main run's PostgreSQL 15 with fencing. For each major of
# FENCING_PG_COMPILE_ONLY (default "19") the module is only built
# ("pgNN/compile"). A major whose packages cannot be fetched is a failure
# ("pgNN/fetch").
#
# Environment: FENCING_KEEP_WORKDIR=1 keeps the scratch directory even when
# everything passed (it is always kept after a failure).
# FENCING_UPGRADE_FROM="REV..." updates from these commits instead of the
# releases of CHANGELOG.md (e.g. HEAD, to compare the committed install
# script with the working tree's).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/releases.sh"
source "$(dirname "${BASH_SOURCE[0]}")/packaging.sh"
source "$(dirname "${BASH_SOURCE[0]}")/install_doc.sh"

profile="${1:-quick}"
case "$profile" in
  quick|long) ;;
  # `make test-ha`: only the HA suite (Patroni), its full profile, and no
  # portability runs.
  ha) profile=long
      FENCING_SUITES="${FENCING_SUITES:-ha}"
      FENCING_PG_VERSIONS="${FENCING_PG_VERSIONS-}" FENCING_PG_COMPILE_ONLY="${FENCING_PG_COMPILE_ONLY-}" ;;
  *) echo "usage: $0 quick|long|ha" >&2; exit 2 ;;
esac
export FENCING_PROFILE="$profile"
# Building and testing are heavy and the machine is small: be nice to it.
renice -n 10 -p $$ >/dev/null 2>&1 || true

# Packages of the test suites (later suites add theirs here).
TEST_PACKAGES=("${BASE_PACKAGES[@]}" python3-psycopg2 pgbouncer nodejs npm clang clang-format libclang-rt-14-dev patchelf
  # the client libraries of tests/clients (Node's pg and postgres come from npm)
  python3-psycopg python3-asyncpg python3-sqlalchemy python3-django python3-yaml
  libpostgresql-jdbc-java default-jdk-headless
  golang-go golang-github-jackc-pgx-v4-dev
  # the HA suite: Patroni with one etcd
  patroni etcd-server python3-etcd
  # the dist and package suites: PGXN's client, Debian's PostgreSQL packaging
  pgxnclient unzip dpkg-dev debhelper postgresql-server-dev-all)
PG_VERSIONS="${FENCING_PG_VERSIONS-17 18}"
PG_COMPILE_ONLY="${FENCING_PG_COMPILE_ONLY-19}"
# The suites of the portability runs (those FENCING_SUITES names, when set).
OTHER_MAJOR_SUITES="regress isolation pgtap tap installcheck upgrade"
# The system's PostgreSQL, before PGBIN names the private copy.
SYS_PGBIN="$PGBIN"

# suite_selected NAME: whether FENCING_SUITES (default: every suite) names NAME.
suite_selected() { [ -z "${FENCING_SUITES:-}" ] || [[ " $FENCING_SUITES " == *" $1 "* ]]; }

# NodeSource's nodejs package bundles npm and conflicts with Debian's npm:
# when an npm is already there, do not ask for the Debian one.
if command -v npm >/dev/null 2>&1; then
  pkgs=()
  for p in "${TEST_PACKAGES[@]}"; do [ "$p" = npm ] || pkgs+=("$p"); done
  TEST_PACKAGES=("${pkgs[@]}")
fi

work=""
results=""
stage="start"
summary_done=0

# summary: failed names, then "N passed, N failed" as the very last line.
summary() {
  local passed=0 failed=0
  if [ -n "$results" ] && [ -f "$results" ]; then
    passed=$(grep -c '^PASS ' "$results" || true)
    failed=$(grep -c '^FAIL ' "$results" || true)
  fi
  echo
  if [ "$failed" -gt 0 ]; then
    echo "Failed tests:"
    grep '^FAIL ' "$results" | sed 's/^FAIL /  /'
  fi
  if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then echo "No test ran."; fi
  if [ -n "$work" ] && { [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; }; then
    echo "Logs and outputs (kept): $work"
  fi
  summary_done=1
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}

# A step before the suites failed (set -e got us here): still end with the
# summary line, counting the failed step.
on_exit() {
  local rc=$?
  trap - EXIT
  if [ "$summary_done" -eq 0 ]; then
    local tmp=""
    if [ -z "$results" ]; then tmp="$(mktemp /tmp/fencing-results.XXXXXX)"; results="$tmp"; fi
    echo "FAIL setup/$stage" >> "$results"
    summary || true
    if [ -n "$tmp" ]; then rm -f "$tmp"; fi
    [ "$rc" -eq 0 ] && rc=1
  fi
  exit "$rc"
}
trap on_exit EXIT

stage="packages"
ensure_packages "${TEST_PACKAGES[@]}"
stage="user"
ensure_user
stage="build"
log "building fencing"
make -C "$FENCING_ROOT" -s PG_CONFIG="$PGBIN/pg_config" >/dev/null
stage="build_unit_tests"
log "building the unit tests"
# Always relink: make cannot tell that a test file was removed.
rm -f "$FENCING_ROOT/tests/unit/unit_tests"
make -C "$FENCING_ROOT" -s tests/unit/unit_tests PG_CONFIG="$PGBIN/pg_config" >/dev/null

stage="workdir"
work="$(make_workdir)"
results="$work/results.txt"
: > "$results"
stage="install"
log "installing fencing into a private copy of PostgreSQL in $work/pg"
PGBIN="$(private_tree "$work/pg")"
export PGBIN
log "copying the tree into $work/repo"
mkdir -p "$work/repo"
tar -C "$FENCING_ROOT" -cf - \
    --exclude=./.git --exclude=./results --exclude=./tmp_check --exclude=./log \
    --exclude=./regression.diffs --exclude=./regression.out --exclude=./tests/isolation/output_iso . |
  tar -C "$work/repo" -xf -
# Not -R over $work: the private PostgreSQL tree shares its files with the system one.
[ "$(id -u)" -eq 0 ] && chown -R "$FENCING_USER" "$work/repo" "$results"

# prepare_upgrade DIR: what the update tests need (suite upgrade,
# tests/upgrade/update.pl), made here as root while the checkout and its
# history are at hand: in DIR
#   packages/current          the current tree, staged by its `make install`
#                             (lib/fencing.so, extension/fencing.control and
#                             every script)
#   packages/<label>          each earlier release, built from its commit (git
#                             archive) against the same PostgreSQL and staged
#                             the same way
#   releases.txt              "<label> <version> <commit> <package>" each
#   install                   a private copy of PostgreSQL (the directory
#                             holding bin/) whose module and extension
#                             directories the unprivileged user may change
# The releases come from CHANGELOG.md (checked: "upgrade/changelog"); with
# FENCING_UPGRADE_FROM the commits it names; with neither, the working tree's
# own tracked files, committed without touching the checkout
# (releases_worktree_commit), so that the machinery runs before a first
# release. A release that does not build is "upgrade/<label>" failed.
prepare_upgrade() {
  local dir="$1" pg_config="$SYS_PGBIN/pg_config" list="" rev version commit label entry bin libdir extdir
  local from=()
  mkdir -p "$dir/packages"
  : > "$dir/releases.txt"
  log "upgrade: staging the current tree"
  if ! release_package "$FENCING_ROOT" "$pg_config" "$dir/packages/current" > "$dir/current.log" 2>&1; then
    echo "FAIL upgrade/packages (make install of the current tree into a staging directory failed: $dir/current.log)" >> "$results"
    return 0
  fi
  if ! git -C "$FENCING_ROOT" rev-parse --verify -q HEAD > /dev/null 2>&1; then
    echo "FAIL upgrade/releases ($FENCING_ROOT is no git checkout: the earlier releases are built from their commits)" >> "$results"
    return 0
  fi
  if list="$(releases_check "$FENCING_ROOT" 2> "$dir/changelog.txt")"; then
    echo "PASS upgrade/changelog" >> "$results"
  else
    echo "FAIL upgrade/changelog ($(head -n 1 "$dir/changelog.txt"))" >> "$results"
    sed 's/^/  /' "$dir/changelog.txt" >&2
  fi
  if [ -n "${FENCING_UPGRADE_FROM:-}" ]; then
    for rev in $FENCING_UPGRADE_FROM; do
      if ! commit="$(git -C "$FENCING_ROOT" rev-parse --verify -q "$rev^{commit}")"; then
        echo "FAIL upgrade/update_from_$rev (FENCING_UPGRADE_FROM names no commit)" >> "$results"
        continue
      fi
      version="$(git -C "$FENCING_ROOT" show "$commit:fencing.control" | control_version -)"
      from+=("update_from_${version}@${commit:0:7} $version $commit")
    done
  elif [ -n "$list" ]; then
    while read -r version commit; do from+=("update_from_$version $version $commit"); done <<<"$list"
  else
    commit="$(releases_worktree_commit "$FENCING_ROOT")"
    version="$(control_version "$FENCING_ROOT/fencing.control")"
    log "upgrade: no release yet; updating from the working tree's own files (commit ${commit:0:7}, $version)"
    from+=("update_from_${version}@worktree $version $commit")
  fi
  for entry in "${from[@]}"; do
    read -r label version commit <<<"$entry"
    log "upgrade: building $version from commit ${commit:0:7}"
    if release_build "$FENCING_ROOT" "$commit" "$pg_config" "$dir/packages/$label" > "$dir/build-$label.log" 2>&1; then
      echo "$label $version $commit $dir/packages/$label" >> "$dir/releases.txt"
    else
      echo "FAIL upgrade/$label (the build of commit $commit failed: $dir/build-$label.log)" >> "$results"
      tail -n 20 "$dir/build-$label.log" >&2
    fi
  done
  bin="$(private_tree "$dir/pg")"
  libdir="$("$bin/pg_config" --pkglibdir)"
  extdir="$("$bin/pg_config" --sharedir)/extension"
  # These two directories only: the files of the copy are hard links of the
  # system's own, which the tests unlink and never write to.
  [ "$(id -u)" -eq 0 ] && chown "$FENCING_USER" "$libdir" "$extdir"
  dirname "$bin" > "$dir/install"
}

# One directory where every TAP run (this one's and the other majors') reserves
# its ports, as they may run side by side.
port_dir="$work/ports"
mkdir -p "$port_dir"
[ "$(id -u)" -eq 0 ] && chown "$FENCING_USER" "$port_dir"

upgrade_dir=""
if suite_selected upgrade; then
  stage="upgrade"
  upgrade_dir="$work/upgrade"
  prepare_upgrade "$upgrade_dir"
fi

if suite_selected dist || suite_selected package || suite_selected install_doc; then
  stage="packaging"
  packaging_prepare "$work/packaging"
fi
# The install guide's commands as written, on stock clusters of their own
# (as root: namespaces; tests/scripts/install_doc.sh).
if suite_selected install_doc; then
  stage="install_doc"
  install_doc_check "$work/install_doc"
fi

stage="suites"
log "running the suites as ${FENCING_USER} (profile $profile)"
rc=0
as_user env FENCING_PROFILE="$profile" FENCING_SUITES="${FENCING_SUITES:-}" PGBIN="$PGBIN" \
    FENCING_UPGRADE_DIR="$upgrade_dir" FENCING_PORT_DIR="$port_dir" bash "$work/repo/tests/scripts/suites.sh" "$work" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL runner/suites.sh (exit status $rc)" >> "$results"
fi

# other_major MAJOR run|compile: the portability run of one other major. Its
# lines go to $work/pgMAJOR/outcome.txt (the runs go side by side; see below).
other_major() {
  local major="$1" mode="$2" dir="$work/pg$major" bin flags=() pgbin rc=0 suites="" s
  local results="$work/pg$major/outcome.txt"
  mkdir -p "$dir"
  : > "$results"
  log "PostgreSQL $major: fetching (cache $PGV_CACHE)"
  if ! bin="$(pgv_fetch "$major" 2> >(tee "$dir/fetch.log" >&2))"; then
    echo "FAIL pg$major/fetch (packages of PostgreSQL $major could not be fetched: $dir/fetch.log)" >> "$results"
    return 0
  fi
  mapfile -t flags < <(pgv_make_flags "$bin")
  log "PostgreSQL $major: building fencing against $("$bin/pg_config" --version)"
  mkdir -p "$dir/repo"
  tar -C "$FENCING_ROOT" -cf - \
      --exclude=./.git --exclude=./results --exclude=./tmp_check --exclude=./log --exclude='*.o' \
      --exclude='*.so' --exclude='*.bc' --exclude=.deps --exclude=./tests/unit/unit_tests \
      --exclude=./regression.diffs --exclude=./regression.out --exclude=./tests/isolation/output_iso . |
    tar -C "$dir/repo" -xf -
  if ! make -C "$dir/repo" -s PG_CONFIG="$bin/pg_config" "${flags[@]}" > "$dir/build.log" 2>&1; then
    echo "FAIL pg$major/compile (see $dir/build.log)" >> "$results"
    tail -n 40 "$dir/build.log"
    return 0
  fi
  echo "PASS pg$major/compile" >> "$results"
  [ "$mode" = run ] || return 0
  for s in $OTHER_MAJOR_SUITES; do
    if suite_selected "$s"; then suites="$suites $s"; fi
  done
  [ -n "$suites" ] || return 0
  if ! pgbin="$(PGBIN="$bin" private_tree "$dir/pg" "$dir/repo" "${flags[@]}")"; then
    echo "FAIL pg$major/install (into a private copy of PostgreSQL $major)" >> "$results"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] && chown -R "$FENCING_USER" "$dir/repo" && chown "$FENCING_USER" "$dir"
  log "PostgreSQL $major: running the suites as ${FENCING_USER}"
  as_user env FENCING_PROFILE="$profile" PGBIN="$pgbin" FENCING_SUITES="${suites# }" FENCING_UPGRADE_OLD_BIN="$PGBIN" \
      FENCING_PORT_DIR="$port_dir" bash "$dir/repo/tests/scripts/suites.sh" "$dir" || rc=$?
  if [ -f "$dir/results.txt" ]; then
    sed -E "s#^(PASS|FAIL) #\1 pg$major/#" "$dir/results.txt" >> "$results"
  fi
  if [ "$rc" -ne 0 ]; then
    echo "FAIL pg$major/runner (suites.sh exit status $rc)" >> "$results"
  fi
}

# The portability runs go FENCING_MAJOR_JOBS (default 2) at a time: most of
# their time is spent waiting (the TAP files' leases, crashes and restarts),
# each has clusters of its own, and PostgreSQL::Test::Cluster reserves ports
# across all of them in one directory (FENCING_PORT_DIR). Each one's log lines
# carry its major; its results are added in the order of the majors, and a run
# that did not get to its end is "pgNN/runner" failed.
stage="other_majors"
major_jobs="${FENCING_MAJOR_JOBS:-2}"
running=0
majors=()
for major in $PG_VERSIONS; do majors+=("$major run"); done
for major in $PG_COMPILE_ONLY; do majors+=("$major compile"); done
for entry in "${majors[@]}"; do
  read -r major mode <<<"$entry"
  if [ "$running" -ge "$major_jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  ( other_major "$major" "$mode"; touch "$work/pg$major/.done" ) 2>&1 | sed -u "s/^/[pg$major] /" &
  running=$((running + 1))
done
wait || true
for entry in "${majors[@]}"; do
  read -r major mode <<<"$entry"
  cat "$work/pg$major/outcome.txt" >> "$results" 2>/dev/null || true
  if [ ! -f "$work/pg$major/.done" ]; then
    echo "FAIL pg$major/runner (the $mode run of PostgreSQL $major stopped before its end)" >> "$results"
  fi
done

# The Debian packages of the other majors, built with 15's (tests/scripts/packaging.sh).
if suite_selected package && [ -n "${PG_VERSIONS// /}" ]; then
  stage="package_majors"
  packaging_majors "$work/package_majors" $PG_VERSIONS
fi

trap - EXIT
if summary; then
  [ "${FENCING_KEEP_WORKDIR:-0}" = 1 ] || rm -rf "$work"
  exit 0
fi
exit 1
