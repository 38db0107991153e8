#!/usr/bin/env bash
# tests/jepsen/run.sh -- the Jepsen-style history test (see README.md here).
#
# Environment:
#   PGHOST, PGPORT, PGUSER   the cluster; PGUSER must be a superuser (postgres)
#   FENCING_PROFILE          quick (default; ~1 minute) or long (~10-14 minutes)
#   FENCING_TMP              where to build and keep the histories (default: a
#                            new temp dir, removed after a pass unless JEPSEN_KEEP=1)
#   JEPSEN_SEED              seed of the workers' and the nemesis's choices
#   JEPSEN_ARGS              extra options of the real run (e.g. "--backend-pause-every-ms 0")
#
# Builds the harness, then runs, in two databases it creates (fencing_jepsen
# and fencing_jepsen_control, dropped again after a pass, like the role
# jepsen_worker):
#   1. the real run: strict protection and validate()-guarded appends; it
#      must find zero violations with enough accepted writes;
#   2. the control run: trigger removed (fencing.unprotect), no validate()
#      guard; it must find violations (up to 3 attempts), showing the checker
#      can fail;
#   3. the checker again on the real run's database with one committed log
#      row deleted and one forged: it must report them.
# Exit 0 only when all three hold. The last line printed is the one-line summary.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
profile="${FENCING_PROFILE:-quick}"
case "$profile" in quick|long) ;; *) echo "jepsen: FENCING_PROFILE must be quick or long" >&2; exit 2 ;; esac
: "${PGHOST:?PGHOST must be set}" "${PGPORT:?PGPORT must be set}"
export PGUSER="${PGUSER:-postgres}"
seed="${JEPSEN_SEED:-$(date +%s%N)}"

cleanup_dir=""
if [ -n "${FENCING_TMP:-}" ]; then
  out="$FENCING_TMP/jepsen"
else
  out="$(mktemp -d /tmp/fencing-jepsen.XXXXXX)"
  [ "${JEPSEN_KEEP:-0}" = 1 ] || cleanup_dir="$out"
fi
mkdir -p "$out"

pg_config_bin="$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)"
if ! make -s -C "$here" BUILD="$out" PG_CONFIG="$pg_config_bin" > "$out/build.log" 2>&1; then
  cat "$out/build.log"
  echo "jepsen $profile: FAIL (the harness did not build)"
  exit 1
fi

psql_admin() { PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
fresh_db() {
  psql_admin -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >/dev/null
}

if [ "$profile" = long ]; then real_limit=1000; else real_limit=150; fi

# ---- 1. the real run
fresh_db fencing_jepsen
rc_real=0
timeout --kill-after=20 "$real_limit" "$out/jepsen" run --profile "$profile" --mode real --db fencing_jepsen \
    --dir "$out/real" --seed "$seed" ${JEPSEN_ARGS:-} > "$out/real.txt" 2> "$out/real.err" || rc_real=$?
cat "$out/real.err" "$out/real.txt"
real_line="$(grep '^jepsen real' "$out/real.txt" | tail -n 1)"

# ---- 2. the control run (quick settings, frequent pauses)
rc_control=0
control_line=""
for attempt in 1 2 3; do
  fresh_db fencing_jepsen_control
  rc_control=0
  timeout --kill-after=20 120 "$out/jepsen" run --profile quick --mode control --db fencing_jepsen_control \
      --dir "$out/control$attempt" --seed "$((seed + attempt))" --min-accepted 100 --min-seconds 12 \
      --max-seconds 20 --pause-every-ms 1500 > "$out/control$attempt.txt" 2> "$out/control$attempt.err" || rc_control=$?
  control_line="$(grep '^jepsen control' "$out/control$attempt.txt" | tail -n 1)"
  echo "$control_line"
  [ "$rc_control" -eq 1 ] && break
  echo "jepsen: control attempt $attempt found no violations (exit status $rc_control)" >&2
  sed -n '1,20p' "$out/control$attempt.err" >&2
done

# ---- 3. the checker on a tampered database: one committed log row deleted,
# one forged; it must see both (phantom, commit-gap).
tamper_ok=0
tamper_line=""
if [ "$rc_real" -eq 0 ]; then
  rm -rf "$out/tamper" && cp -r "$out/real" "$out/tamper"
  PGOPTIONS="-c client_min_messages=warning" psql -X -q -v ON_ERROR_STOP=1 -d fencing_jepsen \
      -c "DELETE FROM jepsen_log WHERE resource = 1 AND val = 2" \
      -c "INSERT INTO jepsen_log (resource, token, val, worker, opid, form) VALUES (2, 1, 1, 'w99.1', 1, 'update')" \
      > "$out/tamper.err" 2>&1
  rc_tamper=0
  "$out/jepsen" check --mode real --db fencing_jepsen --dir "$out/tamper" > "$out/tamper.txt" 2>> "$out/tamper.err" || rc_tamper=$?
  tamper_line="$(grep '^jepsen real' "$out/tamper.txt" | tail -n 1)"
  if [ "$rc_tamper" -eq 1 ] && grep -q 'phantom' <<<"$tamper_line" && grep -q 'commit-gap' <<<"$tamper_line"; then
    tamper_ok=1
  else
    echo "jepsen: the checker missed a tampered database (exit status $rc_tamper): $tamper_line" >&2
  fi
fi

field() { sed -n "s/.* \([0-9][0-9]*\) $1.*/\1/p" <<<"$2" | head -n 1; }
status=PASS
[ "$rc_real" -eq 0 ] || status=FAIL
[ "$rc_control" -eq 1 ] || status=FAIL
[ "$tamper_ok" -eq 1 ] || status=FAIL

if [ "$status" = PASS ]; then
  psql_admin -c "DROP DATABASE IF EXISTS fencing_jepsen WITH (FORCE)" \
             -c "DROP DATABASE IF EXISTS fencing_jepsen_control WITH (FORCE)" \
             -c "DROP ROLE IF EXISTS jepsen_worker" >/dev/null 2>&1 || true
  [ -n "$cleanup_dir" ] && rm -rf "$cleanup_dir"
else
  echo "jepsen: histories, database dumps and violations kept in $out" >&2
fi

why=""
[ "$rc_real" -eq 0 ] || why=" (real run: exit status $rc_real$( [ "$rc_real" -eq 1 ] && echo ', violations' )$( [ "$rc_real" -eq 3 ] && echo ', too few accepted writes' ))"
[ "$rc_control" -eq 1 ] || why="$why (control run found no violation: exit status $rc_control)"
[ "$rc_real" -ne 0 ] || [ "$tamper_ok" -eq 1 ] || why="$why (the checker missed a tampered database)"
echo "jepsen $profile: $status$why: real run $(field 'operations' "$real_line") operations, $(field 'guarded writes' "$real_line") guarded writes, $(field 'accepted' "$real_line") accepted, $(field 'rejected 23T01' "$real_line") rejected 23T01, $(field 'pauses' "$real_line") pauses, $(field 'kills' "$real_line") kills, $(field 'backend terminations' "$real_line") backend terminations, $(field 'backend pauses' "$real_line") backend pauses, $(field 'violations' "$real_line") violations; control run (no trigger, no validate) $(field 'violations' "$control_line") violations; tampered database $( [ -n "$tamper_line" ] && echo "$(field 'violations' "$tamper_line") violations" || echo "not checked")"
[ "$status" = PASS ]
