#!/usr/bin/env bash
# suites.sh WORKDIR -- runs every test suite against a throwaway cluster.
#
# Started by test.sh as the unprivileged user, from a copy of the tree (this
# script's ../..), after the extension and tests/unit/unit_tests were built and
# installed. Usable directly too: `bash tests/scripts/suites.sh /tmp/somewhere`.
#
# Every individual result is appended to WORKDIR/results.txt as
# "PASS <suite>/<name>" or "FAIL <suite>/<name>". Suites, in order:
#
#   unit       tests/unit/unit_tests (GoogleTest), one result per test case
#   regress    pg_regress over sql/*.sql (not the extension scripts
#              sql/fencing--*.sql nor their source sql/fencing.sql), name order;
#              each test creates (and drops) the extension itself
#   isolation  pg_isolation_regress over tests/isolation/specs/*.spec
#   pgtap      pg_prove over tests/pgtap/*.sql in a fresh database that
#              already has the pgtap and fencing extensions; one result per
#              assertion, plus a FAIL when a file dies or misses its plan
#   tap        prove over tests/tap/*.pl (PostgreSQL::Test::Cluster; the tests
#              start their own clusters); one result per assertion
#   clients    every executable tests/clients/*.sh, exit 0 = pass; each gets a
#              fresh database in PGDATABASE and a scratch dir in FENCING_TMP
#   jepsen     tests/jepsen/run.sh, one result for the run
#   ha         tests/ha/ha.py: three Patroni nodes and one etcd of its own,
#              switchover, SIGKILL failover, a zombie primary, an
#              asynchronous control run (quick: about 3 minutes; long, as
#              `make test-ha` runs it: more of each and tests/jepsen through
#              them); one result per assertion
#   installcheck  the standard PGXS `make installcheck` against the cluster
#              (where fencing is installed), one result for the run
#   dist       the release archive (`make dist`, made by test.sh): META.json,
#              `pgxn install` of it, CREATE EXTENSION (tests/scripts/packaging.sh)
#   package    the Debian package built from that archive (dpkg-buildpackage
#              -b), installed into a private copy; installcheck against it
#   upgrade    tests/upgrade: ALTER EXTENSION fencing UPDATE from every earlier
#              release, pg_upgrade from another major (see suite_upgrade);
#              these tests start their own clusters
#
# FENCING_SUITES (space-separated) runs only the suites it names, in the
# order above (the portability runs of other majors use it).
# Suites without tests are skipped. The environment of the tests: PGHOST,
# PGPORT, PGUSER=postgres (the throwaway cluster), FENCING_ROOT (this tree),
# FENCING_PROFILE (quick|long). FENCING_TEST_TIMEOUT overrides the time limit
# of one test file in seconds (quick 600, long 3600; a pg_regress run gets 3x),
# FENCING_ISOLATION_TIMEOUT the seconds an isolation step may wait (120, 300).
# FENCING_PORT_DIR is where the TAP files reserve their ports (default
# WORKDIR/tap_out); runs side by side share one.
#
# The exit status is non-zero only when the harness itself broke (e.g. the
# cluster did not start); failed tests are reported in results.txt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

work="${1:?usage: suites.sh WORKDIR}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
results="$work/results.txt"
touch "$results"

# Nothing of the caller's libpq environment leaks into the tests.
for v in $(compgen -e); do
  case "$v" in PGBIN|PG_MAJOR) ;; PG*) unset "$v" ;; esac
done

export PATH="$PGBIN:$PATH"
export FENCING_ROOT
export FENCING_PROFILE="${FENCING_PROFILE:-quick}"
cd "$FENCING_ROOT"

pkglibdir="$(pg_config --pkglibdir)"
PG_REGRESS_BIN="$pkglibdir/pgxs/src/test/regress/pg_regress"
PG_ISOLATION_REGRESS_BIN="$pkglibdir/pgxs/src/test/isolation/pg_isolation_regress"
PG_PERL_LIB="$pkglibdir/pgxs/src/test/perl"

# Time limits in seconds: of one test file (unit binary, pgTAP, TAP or client
# file; a whole pg_regress / pg_isolation_regress run gets three times as
# much), and of one isolation step that waits (isolationtester cancels it).
if [ "$FENCING_PROFILE" = long ]; then time_limit=3600 step_limit=300; else time_limit=600 step_limit=120; fi
time_limit="${FENCING_TEST_TIMEOUT:-$time_limit}"
step_limit="${FENCING_ISOLATION_TIMEOUT:-$step_limit}"

# limited CMD...: runs CMD with the time limit (exit status 124 when it hit it).
limited() { timeout --kill-after=30 "$time_limit" "$@"; }
limited_3x() { timeout --kill-after=30 "$((3 * time_limit))" "$@"; }

# record PASS|FAIL SUITE NAME
record() { printf '%s %s/%s\n' "$1" "$2" "$3" >> "$results"; }

# of SUITE [NAME]: the results recorded so far for SUITE, or for its test file
# NAME ("NAME:<n> ..." assertions and "NAME (...)" file-level failures).
of() {
  awk -v s="$1/" -v n="${2:-}" '
    { r = substr($0, index($0, " ") + 1) }
    n == "" ? index(r, s) == 1 : (index(r, s n ":") == 1 || index(r, s n " (") == 1)
  ' "$results"
}
# counts SUITE [NAME]: "N passed, N failed" for SUITE (or NAME).
counts() {
  local r
  r="$(of "$@")"
  echo "$(grep -c '^PASS ' <<<"$r" || true) passed, $(grep -c '^FAIL ' <<<"$r" || true) failed"
}
# failed_in SUITE [NAME]: true when something of SUITE (or NAME) failed.
failed_in() { [ "$(of "$@" | grep -c '^FAIL ' || true)" -gt 0 ]; }

# fresh_db NAME: (re)creates an empty database.
fresh_db() {
  PGOPTIONS="-c client_min_messages=warning" dropdb --if-exists "$1"
  createdb -T template0 "$1"
}

# regress_db NAME: a fresh database with the settings pg_regress gives the
# databases it creates itself (it does not touch them under --use-existing).
regress_db() {
  fresh_db "$1"
  local s
  for s in "lc_messages TO 'C'" "lc_monetary TO 'C'" "lc_numeric TO 'C'" "lc_time TO 'C'" \
           "bytea_output TO 'hex'" "timezone_abbreviations TO 'Default'"; do
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "ALTER DATABASE \"$1\" SET $s"
  done
}

# existing GLOB: the files matching GLOB, in C name order (none: no output).
existing() {
  local f
  for f in $1; do
    if [ -e "$f" ]; then printf '%s\n' "$f"; fi
  done | LC_ALL=C sort
}

# parse_tap SUITE LABEL OUTPUT EXIT_STATUS: one result per TAP assertion in the
# (prove / pg_prove --verbose) OUTPUT, plus a FAIL for LABEL when the run died,
# bailed out, missed its plan or failed without a failing assertion.
parse_tap() {
  python3 - "$@" >> "$results" <<'PY'
import re, sys
suite, label, path, rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
test_re = re.compile(r'^(not )?ok (\d+)\b\s*(.*)$')
plan = None
skip_all = False
seen = failed = 0
extra = []
with open(path, errors="replace") as fh:
    for line in fh:
        line = line.rstrip("\n")
        m = re.match(r'^1\.\.(\d+)(.*)$', line)
        if m:
            plan = int(m.group(1))
            skip_all = plan == 0 and re.search(r'skip', m.group(2), re.I) is not None
            continue
        m = re.match(r'^Bail out!\s*(.*)$', line)
        if m:
            extra.append(f"{label} (bailed out: {m.group(1)[:100]})")
            continue
        m = test_re.match(line)
        if not m:
            continue
        not_ok, num, desc = m.group(1), m.group(2), m.group(3).strip()
        desc = re.sub(r'^-\s*', '', desc)
        todo = re.search(r'(^|\s)#\s*todo\b', desc, re.I) is not None
        seen += 1
        ok = not not_ok or todo
        if not ok:
            failed += 1
        name = f"{label}:{num}" + (f" - {desc[:120]}" if desc else "")
        print(("PASS" if ok else "FAIL") + f" {suite}/{name}")
if not skip_all:
    if seen == 0:
        extra.append(f"{label} (no test results, exit status {rc})")
    elif plan is None:
        extra.append(f"{label} (no plan, exit status {rc})")
    elif seen != plan:
        extra.append(f"{label} (planned {plan} tests, ran {seen})")
if rc != 0 and failed == 0 and not extra:
    extra.append(f"{label} (exit status {rc})")
for e in extra:
    print(f"FAIL {suite}/{e}")
PY
}

# parse_regress SUITE OUTPUT TEST...: one result per pg_regress test.
parse_regress() {
  python3 - "$@" >> "$results" <<'PY'
import re, sys
suite, path, tests = sys.argv[1], sys.argv[2], sys.argv[3:]
status = {}
with open(path, errors="replace") as fh:
    for line in fh:
        # PostgreSQL <= 15: "test name   ... ok   12 ms" (or "     name ... FAILED")
        m = re.match(r'^(?:test\s+|\s+)?(\S+)\s+\.\.\.\s+(ok|FAILED|failed)', line)
        if m:
            status[m.group(1)] = m.group(2) == "ok"
            continue
        # PostgreSQL >= 16: "ok 1  - name   12 ms" / "not ok 1 - name"
        m = re.match(r'^(not )?ok\s+\d+\s+[-+]\s+(\S+)', line)
        if m:
            status[m.group(2)] = not m.group(1)
for t in tests:
    if t not in status:
        print(f"FAIL {suite}/{t} (no result)")
    else:
        print(("PASS" if status[t] else "FAIL") + f" {suite}/{t}")
PY
}

# ---- the throwaway cluster ----------------------------------------------------

cluster="$work/cluster"
mkdir -p "$cluster"
stop_cluster() { bash "$FENCING_ROOT/tests/scripts/cluster.sh" stop "$cluster"; }
trap stop_cluster EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port="$(free_port)"
log "starting a throwaway cluster on 127.0.0.1:$port ($cluster)"
if ! bash "$FENCING_ROOT/tests/scripts/cluster.sh" start "$cluster" "$port"; then
  record FAIL setup "cluster (did not start)"
  tail -n 30 "$cluster/initdb.log" "$cluster/server.log" 2>/dev/null || true
  exit 1
fi
export PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres PGDATABASE=postgres

# ---- suites -------------------------------------------------------------------

# format: the C++ tree follows .clang-format (make format-check; `make
# format` rewrites it). One result.
suite_format() {
  if make -s -C "$FENCING_ROOT" format-check > "$work/format.txt" 2>&1; then
    record PASS format check
  else
    record FAIL format "check (run make format)"
    head -n 40 "$work/format.txt" | sed 's/^/    /'
  fi
}

suite_unit() {
  [ -n "$(existing 'tests/unit/*.cpp')" ] || return 0
  local bin="tests/unit/unit_tests" out="$work/unit" rc=0
  mkdir -p "$out"
  if [ ! -x "$bin" ]; then
    record FAIL unit "unit_tests (not built)"
    return 0
  fi
  limited "$bin" --gtest_output="xml:$out/unit_tests.xml" > "$out/output.txt" 2>&1 || rc=$?
  if [ -f "$out/unit_tests.xml" ]; then
    python3 - "$out/unit_tests.xml" >> "$results" <<'PY'
import sys, xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if tc.get("result") == "skipped" or tc.get("status") == "notrun":
        continue
    bad = tc.find("failure") is not None or tc.find("error") is not None
    print(("FAIL" if bad else "PASS") + f" unit/{tc.get('classname')}.{tc.get('name')}")
PY
  fi
  if [ "$rc" -ne 0 ] && ! failed_in unit; then
    record FAIL unit "unit_tests (exit status $rc)"
  fi
  if failed_in unit; then
    grep -vE '^\[ +(RUN|OK) +\]' "$out/output.txt" | tail -n 200 || true
  fi
}

# run_pg_regress SUITE DRIVER DB INPUTDIR TEST...
run_pg_regress() {
  local suite="$1" driver="$2" db="$3" inputdir="$4" out="$work/${1}_out" rc=0 t runnable=()
  shift 4
  # A test without expected output would make pg_regress give up on all the
  # tests after it: report it alone and leave it out.
  for t in "$@"; do
    if [ -n "$(existing "$inputdir/expected/$t.out $inputdir/expected/${t}_[0-9].out")" ]; then
      runnable+=("$t")
    else
      record FAIL "$suite" "$t (no expected output $inputdir/expected/$t.out)"
    fi
  done
  [ ${#runnable[@]} -gt 0 ] || return 0
  set -- "${runnable[@]}"
  mkdir -p "$out"
  regress_db "$db"
  limited_3x "$driver" --use-existing --bindir="$PGBIN" --host="$PGHOST" --port="$PGPORT" --user=postgres \
      --inputdir="$inputdir" --outputdir="$out" --dbname="$db" "$@" > "$out/output.txt" 2>&1 || rc=$?
  sed 's/^/  /' "$out/output.txt"
  parse_regress "$suite" "$out/output.txt" "$@"
  if [ "$rc" -ne 0 ] && ! failed_in "$suite"; then
    record FAIL "$suite" "$(basename "$driver") (exit status $rc)"
  fi
  if failed_in "$suite" && [ -s "$out/regression.diffs" ]; then
    echo "---- $out/regression.diffs"
    head -n 400 "$out/regression.diffs"
  fi
}

suite_regress() {
  local tests=() f
  while IFS= read -r f; do
    case "$(basename "$f")" in fencing--* | fencing.sql) continue ;; esac
    tests+=("$(basename "$f" .sql)")
  done < <(existing 'sql/*.sql')
  [ ${#tests[@]} -gt 0 ] || return 0
  run_pg_regress regress "$PG_REGRESS_BIN" fencing_regress . "${tests[@]}"
}

suite_isolation() {
  local tests=() f
  while IFS= read -r f; do tests+=("$(basename "$f" .spec)"); done < <(existing 'tests/isolation/specs/*.spec')
  [ ${#tests[@]} -gt 0 ] || return 0
  PGISOLATIONTIMEOUT="$step_limit" run_pg_regress isolation "$PG_ISOLATION_REGRESS_BIN" fencing_isolation tests/isolation "${tests[@]}"
}

suite_pgtap() {
  local files=() f name out="$work/pgtap_out" rc
  while IFS= read -r f; do files+=("$f"); done < <(existing 'tests/pgtap/*.sql')
  [ ${#files[@]} -gt 0 ] || return 0
  mkdir -p "$out"
  fresh_db fencing_pgtap
  if ! psql -X -q -v ON_ERROR_STOP=1 -d fencing_pgtap \
      -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION fencing' > "$out/setup.txt" 2>&1; then
    cat "$out/setup.txt"
    for f in "${files[@]}"; do record FAIL pgtap "$(basename "$f" .sql) (setup: CREATE EXTENSION failed)"; done
    return 0
  fi
  for f in "${files[@]}"; do
    name="$(basename "$f" .sql)"
    rc=0
    limited pg_prove --verbose -d fencing_pgtap "$f" > "$out/$name.txt" 2>&1 || rc=$?
    parse_tap pgtap "$name" "$out/$name.txt" "$rc"
    echo "  pgtap/$name: $(counts pgtap "$name")"
    if failed_in pgtap "$name"; then sed 's/^/    /' "$out/$name.txt" | tail -n 150; fi
  done
}

# run_prove SUITE NAME FILE [VAR=VALUE...]: the Perl TAP test FILE
# (PostgreSQL::Test::Cluster) through prove, with the variables given, in
# $work/SUITE_out/NAME; one result per assertion, as SUITE/NAME:<n>.
run_prove() {
  local suite="$1" name="$2" f="$3" dir="$work/${1}_out/$2" rc=0
  shift 3
  mkdir -p "$dir" "$work/tap_out"
  limited env PG_REGRESS="$PG_REGRESS_BIN" TESTDIR="$dir" TESTDATADIR="$dir/data" TESTLOGDIR="$dir/log" \
      PG_TEST_PORT_DIR="${FENCING_PORT_DIR:-$work/tap_out}" with_ssl=no "$@" \
      prove --verbose -I "$PG_PERL_LIB" -I "$FENCING_ROOT/tests/tap" "$f" > "$dir/output.txt" 2>&1 < /dev/null || rc=$?
  parse_tap "$suite" "$name" "$dir/output.txt" "$rc"
  echo "  $suite/$name: $(counts "$suite" "$name")"
  if failed_in "$suite" "$name"; then
    sed 's/^/    /' "$dir/output.txt" | tail -n 150
    echo "    (logs: $dir/tmp_check/log)"
  fi
}

# The TAP files run FENCING_TAP_JOBS (default 2) at a time: most of their
# time is spent waiting (leases running out, crashes and restarts), each has
# clusters of its own, and PostgreSQL::Test::Cluster reserves ports across
# processes (PG_TEST_PORT_DIR). A file's lines are printed when it ends.
suite_tap() {
  local files=() f jobs="${FENCING_TAP_JOBS:-2}" running=0
  # FENCING_TAP_TESTS (file paths or globs) runs only those TAP files.
  while IFS= read -r f; do files+=("$f"); done < <(existing "${FENCING_TAP_TESTS:-tests/tap/*.pl}")
  [ ${#files[@]} -gt 0 ] || return 0
  mkdir -p "$work/tap_out"
  # Every node the TAP files make preloads fencing (PostgreSQL::Test::Cluster
  # appends TEMP_CONFIG at init), as a production server with leases does; a
  # file that checks the module without the preload says so itself.
  printf "shared_preload_libraries = 'fencing'\n" > "$work/tap_out/preload.conf"
  export TEMP_CONFIG="$work/tap_out/preload.conf"
  for f in "${files[@]}"; do
    if [ "$jobs" -le 1 ]; then
      run_prove tap "$(basename "$f" .pl)" "$f"
      continue
    fi
    if [ "$running" -ge "$jobs" ]; then
      wait -n || true
      running=$((running - 1))
    fi
    run_prove tap "$(basename "$f" .pl)" "$f" > "$work/tap_out/.$(basename "$f" .pl).lines" 2>&1 &
    running=$((running + 1))
  done
  wait || true
  unset TEMP_CONFIG
  for f in "${files[@]}"; do
    cat "$work/tap_out/.$(basename "$f" .pl).lines" 2>/dev/null || true
  done
}

suite_clients() {
  local f name dir rc
  for f in tests/clients/*.sh; do
    [ -f "$f" ] && [ -x "$f" ] || continue
    name="$(basename "$f" .sh)"
    dir="$work/clients/$name"
    mkdir -p "$dir"
    fresh_db fencing_clients
    rc=0
    limited env PGDATABASE=fencing_clients FENCING_TMP="$dir" "$f" > "$dir/output.txt" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
      record PASS clients "$name"
    else
      record FAIL clients "$name (exit status $rc)"
      sed 's/^/    /' "$dir/output.txt" | tail -n 80
    fi
    echo "  clients/$name: exit status $rc"
  done
}

# jepsen: the history test under pauses and kills (tests/jepsen/run.sh), one
# result for the run (its checker proves the history; its control run must
# find violations). FENCING_PROFILE picks quick or long.
suite_jepsen() {
  [ -x tests/jepsen/run.sh ] || return 0
  local dir="$work/jepsen" rc=0
  mkdir -p "$dir"
  limited env FENCING_TMP="$dir" tests/jepsen/run.sh > "$dir/output.txt" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    record PASS jepsen "$FENCING_PROFILE"
  else
    record FAIL jepsen "$FENCING_PROFILE (exit status $rc)"
    sed 's/^/    /' "$dir/output.txt" | tail -n 60
  fi
  tail -n 1 "$dir/output.txt" | sed 's/^/  /'
}

# ha: fencing under Patroni (tests/ha/ha.py); FENCING_PROFILE picks quick or
# long, FENCING_HA_SEED fixes the seed. Its own etcd and Patroni nodes, on free
# loopback ports, as this user; all stopped at the end.
suite_ha() {
  [ -f tests/ha/ha.py ] || return 0
  local dir="$work/ha" rc=0
  rm -rf "$dir"
  mkdir -p "$dir"
  limited env PGBIN="$PGBIN" python3 tests/ha/ha.py --dir "$dir/run" --profile "$FENCING_PROFILE" \
      ${FENCING_HA_SEED:+--seed "$FENCING_HA_SEED"} > "$dir/output.txt" 2>&1 || rc=$?
  # ha.py stops what it started; should it have been killed itself, stop its
  # etcd, Patroni and PostgreSQL processes here: the pids it noted, each only
  # while its command line still names this run's directory.
  local pid f
  for pid in $(cat "$dir/run/pids" 2>/dev/null) $(for f in "$dir"/run/node*/data/postmaster.pid; do
                                                    [ -f "$f" ] && head -n 1 "$f"; done); do
    if tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF "$dir/run/"; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  parse_tap ha ha "$dir/output.txt" "$rc"
  grep -E '^(ha (quick|long):|control )' "$dir/output.txt" | sed 's/^/  /' || true
  if failed_in ha; then
    sed 's/^/    /' "$dir/output.txt" | tail -n 150
    echo "    (Patroni, etcd and PostgreSQL logs: $dir/run)"
  fi
}

# run_suite NAME: runs suite_NAME in a subshell (so that an error inside it ends
# only that suite) and prints its counts.
run_suite() {
  local rc=0
  log "suite $1"
  set +e
  ( set -e; "suite_$1" )
  rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    record FAIL "$1" "(suite aborted, exit status $rc)"
  fi
  if [ -n "$(of "$1")" ]; then
    log "suite $1: $(counts "$1")"
  fi
}

# installcheck: `make installcheck` of PGXS, as a user of an installed
# fencing runs it, against the throwaway cluster (pg_regress and the
# isolation specs in databases of their own). One result for the run.
suite_installcheck() {
  local dir="$work/installcheck" rc=0 f
  mkdir -p "$dir"
  rm -rf results tests/isolation/output_iso regression.diffs regression.out
  limited_3x make -s installcheck PG_CONFIG="$PGBIN/pg_config" PGHOST="$PGHOST" PGPORT="$PGPORT" \
      PGUSER="$PGUSER" > "$dir/output.txt" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    record PASS installcheck make
  else
    record FAIL installcheck "make (exit status $rc)"
    sed 's/^/    /' "$dir/output.txt" | tail -n 60
    for f in regression.diffs tests/isolation/output_iso/regression.diffs; do
      if [ -s "$f" ]; then echo "---- $f"; head -n 200 "$f"; fi
    done
  fi
  tail -n 2 "$dir/output.txt" | sed 's/^/  /'
}

# upgrade: updates and major upgrades with fencing in the database.
#   - With FENCING_UPGRADE_DIR (prepared by test.sh as root: builds of the
#     earlier releases from their commits, of the current tree, and a private
#     installation whose fencing files the tests may replace; see
#     prepare_upgrade there): tests/upgrade/update.pl once per earlier
#     release, "upgrade/update_from_<version>:<n>".
#   - With FENCING_UPGRADE_OLD_BIN (the bin directory of another major with
#     fencing; the portability runs of test.sh pass the main run's 15):
#     tests/upgrade/pg_upgrade.pl from that major to this one,
#     "upgrade/pg_upgrade_from_<major>:<n>".
#   - tests/upgrade/changelog.sh, the checks of the release list on made-up
#     histories, "upgrade/changelog_checks", wherever releases are read.
suite_upgrade() {
  local ran=0 label version commit pkg dir rc old_major
  if [ -n "${FENCING_UPGRADE_DIR:-}" ]; then
    ran=1
    dir="$work/upgrade_out/changelog_checks"
    mkdir -p "$dir"
    rc=0
    limited env FENCING_TMP="$dir" bash tests/upgrade/changelog.sh > "$dir/output.txt" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
      record PASS upgrade changelog_checks
    else
      record FAIL upgrade "changelog_checks (exit status $rc)"
      sed 's/^/    /' "$dir/output.txt" | tail -n 40
    fi
    if [ -f "$FENCING_UPGRADE_DIR/releases.txt" ]; then
      while read -r label version commit pkg <&3; do
        [ -n "$label" ] || continue
        run_prove upgrade "$label" tests/upgrade/update.pl \
          FENCING_UPGRADE_INSTALL="$(cat "$FENCING_UPGRADE_DIR/install")" \
          FENCING_UPDATE_FROM_VERSION="$version" FENCING_UPDATE_FROM_COMMIT="$commit" \
          FENCING_UPDATE_FROM_PKG="$pkg" FENCING_CURRENT_PKG="$FENCING_UPGRADE_DIR/packages/current"
      done 3< "$FENCING_UPGRADE_DIR/releases.txt"
    fi
  fi
  if [ -n "${FENCING_UPGRADE_OLD_BIN:-}" ]; then
    ran=1
    old_major="$("$FENCING_UPGRADE_OLD_BIN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
    run_prove upgrade "pg_upgrade_from_$old_major" tests/upgrade/pg_upgrade.pl \
      FENCING_UPGRADE_OLD_BIN="$FENCING_UPGRADE_OLD_BIN"
  fi
  if [ "$ran" -eq 0 ]; then
    record FAIL upgrade "(nothing prepared: run it through tests/scripts/test.sh, which builds the earlier releases)"
  fi
}

# dist, package: the release archive through PGXN's client, the Debian package.
source "$FENCING_ROOT/tests/scripts/packaging.sh"

for suite in ${FENCING_SUITES:-format unit regress isolation pgtap tap clients jepsen ha installcheck dist package upgrade}; do
  run_suite "$suite"
done
