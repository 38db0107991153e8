#!/usr/bin/env bash
# write_instructions.sh [REF] -- CPU instructions per fenced write, against
# PostgreSQL's floor for any row trigger: the same statements on the same
# table with a no-op C BEFORE ROW trigger (tests/bench/noop_trigger.c),
# counted by valgrind (callgrind) in a single-user backend that preloads
# fencing (shared_preload_libraries, as production runs it). The working
# tree's module, and REF's (a git ref; "none" to skip it) for before/after.
#
# Each figure is the difference between a run of 3N and one of N writes,
# divided by 2N, so that start-up and the table's set-up cancel out (both
# runs set up the same table). Single-row statements are prepared and run
# one transaction each (the DELETE's with fencing.use() first); bulk
# statements write ROWS rows. Tables are protected with protect()'s
# defaults (tombstones on). Instruction counts repeat within about 1% on a
# loaded machine, where CPU time moves by tens of percent.
#
# FENCING_IR_WORKLOADS picks workloads (default: all, in this order):
#   ins1 upd1 del1      single-row INSERT, UPDATE, DELETE statements
#   ins_bulk copy       INSERT ... SELECT, COPY FROM of ROWS new keys
#   del_bulk upd_bulk   DELETE (with the transaction's token), UPDATE of ROWS rows
#   ins_other           INSERT ... SELECT of new keys into a table with
#                       tombstones of other keys (ROWS of them)
#   ins_deleted         INSERT ... SELECT of deleted keys (each has a
#                       tombstone), with a newer token
#   ins_lookup          INSERT ... SELECT of new keys with a token below
#                       the tombstones' of the table (ROWS keys deleted by
#                       one statement): each INSERT looks its key up
#   ins_lookup_rows     the same, the keys deleted by statements of 64 rows
#                       (a row of fencing.tombstones each, no runs)
#   acq                 a session acquire + release cycle (prepared, one
#                       transaction each); the baseline is bare
#                       pg_advisory_lock + pg_advisory_unlock
# FENCING_IR_PROTECT_ARGS: more arguments of protect(), e.g.
# ", tombstones => false" for the cost without tombstones.
# FENCING_IR_N (single-row statements, default 300), FENCING_IR_ROWS (bulk
# rows, default 5000). FENCING_IR_CACHE=1 also simulates the caches
# (slower) and reports first-level instruction cache misses per write: a
# bulk statement's loop hardly fits that cache, so code a row trigger adds
# costs more CPU time than its instructions (the simulated cache is this
# machine's). Needs valgrind; run as root like make bench. Prints
# a Markdown table.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

ref="${1:-main}"
N="${FENCING_IR_N:-300}"
ROWS="${FENCING_IR_ROWS:-5000}"
PROTECT_ARGS="${FENCING_IR_PROTECT_ARGS:-}"
cache_sim=""
[ "${FENCING_IR_CACHE:-0}" = 1 ] && cache_sim="--cache-sim=yes"
WORKLOADS="${FENCING_IR_WORKLOADS:-ins1 upd1 del1 ins_bulk copy del_bulk upd_bulk ins_other ins_deleted ins_lookup ins_lookup_rows acq}"
ensure_packages "${BASE_PACKAGES[@]}" valgrind
ensure_user
work="$(make_workdir)"
[ "${FENCING_IR_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
run="$work/run"
mkdir -p "$run"
[ "$(id -u)" -ne 0 ] || chown "$FENCING_USER" "$run"

log "building the working tree$([ "$ref" = none ] || echo " and $ref")"
make -C "$FENCING_ROOT" -s >/dev/null
new_bin="$(private_tree "$work/pg_new" "$FENCING_ROOT")"
variants="noop new"
if [ "$ref" != none ]; then
  mkdir -p "$work/src_ref"
  git -C "$FENCING_ROOT" archive "$ref" | tar -x -C "$work/src_ref"
  make -C "$work/src_ref" -s >/dev/null
  ref_bin="$(private_tree "$work/pg_ref" "$work/src_ref")"
  refext="$("$ref_bin/pg_config" --sharedir)/extension"
  rm -f "$refext"/fencing--*.sql "$refext"/fencing.control
  cp "$work/src_ref"/sql/fencing--*.sql "$work/src_ref/fencing.control" "$refext/"
  variants="noop ref new"
fi
noop_so="$run/noop_trigger.so"
gcc -O2 -fPIC -shared -I"$("$PGBIN/pg_config" --includedir-server)" "$FENCING_ROOT/tests/bench/noop_trigger.c" -o "$noop_so"
chmod a+r "$noop_so"

single() {  # single BIN DATA < SQL: a single-user backend
  local bin="$1" data="$2"; shift 2
  as_user "$bin/postgres" --single -D "$data" -c log_min_messages=warning "$@" postgres >/dev/null 2>>"$run/single.log"
}
ir() {  # ir BIN DATA SQL: instructions (callgrind Ir) of a backend running SQL
  local bin="$1" data="$2" sql="$3" out
  out="$run/cg.$RANDOM$RANDOM"
  printf '%s\n' "$sql" | as_user valgrind --tool=callgrind $cache_sim --callgrind-out-file="$out" --trace-children=no \
      "$bin/postgres" --single -D "$data" -c log_min_messages=warning -c shared_preload_libraries=fencing \
      postgres >/dev/null 2>>"$run/valgrind.log"
  # Ir, and with the cache simulation I1mr (the events' first and fourth).
  sed -n 's/^summary: //p;s/^totals: //p' "$out" | head -1 | awk -v c="$cache_sim" '{ print (c == "" ? $1 : $1 " " $4) }'
  rm -f "$out"
}

# The table t for variant V (noop: the no-op trigger; else protect()),
# with rows 1..P (token 1) loaded before its trigger.
table() {  # table V P
  printf '%s\n' "CREATE TABLE t (id int PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);" \
    "INSERT INTO t SELECT g, 1, 0 FROM generate_series(1, $2) g;"
  if [ "$1" = noop ]; then
    echo "CREATE TRIGGER a_noop BEFORE INSERT OR UPDATE OR DELETE ON t FOR EACH ROW EXECUTE FUNCTION bench_noop_trigger();"
  else
    echo "SELECT fencing.protect('t'${PROTECT_ARGS});"
  fi
  echo "VACUUM ANALYZE t;" "CHECKPOINT;"
}
# One workload's SQL for variant V and count C (the set-up depends on 3N only).
sql_ins1() { table "$1" 0; echo 'PREPARE s(int) AS INSERT INTO t VALUES ($1, 100, 0);'; seq "$2" | sed 's/.*/EXECUTE s(&);/'; }
sql_upd1() { table "$1" $((3 * N)); echo 'PREPARE s(int) AS UPDATE t SET fence_token = fence_token + 1, v = v + 1 WHERE id = $1;'; seq "$2" | sed 's/.*/EXECUTE s(&);/'; }
sql_del1() {
  table "$1" $((3 * N)); echo 'PREPARE s(int) AS DELETE FROM t WHERE id = $1;'
  seq "$2" | sed 's/.*/BEGIN;\nSELECT fencing.use(1000);\nEXECUTE s(&);\nCOMMIT;/'
}
sql_ins_bulk() { table "$1" 0; echo "INSERT INTO t SELECT g, 100, 0 FROM generate_series(1, $2) g;"; }
sql_copy() { table "$1" 0; echo "COPY t FROM '$run/rows_$2.csv' (FORMAT csv);"; }
sql_del_bulk() { table "$1" $((3 * ROWS)); echo "BEGIN;" "SELECT fencing.use(1000);" "DELETE FROM t WHERE id <= $2;" "COMMIT;"; }
sql_upd_bulk() { table "$1" $((3 * ROWS)); echo "UPDATE t SET fence_token = fence_token + 1, v = v + 1 WHERE id <= $2;"; }
# Keys 1..ROWS deleted (with token 1000) before the measured INSERT.
deleted() { echo "BEGIN;" "SELECT fencing.use(1000);" "DELETE FROM t WHERE id <= $ROWS;" "COMMIT;" "CHECKPOINT;"; }
sql_ins_other() { table "$1" "$ROWS"; deleted; echo "INSERT INTO t SELECT $ROWS + g, 2000, 0 FROM generate_series(1, $2) g;"; }
sql_ins_deleted() { table "$1" $((3 * ROWS)); echo "BEGIN;" "SELECT fencing.use(1000);" "DELETE FROM t WHERE id <= $((3 * ROWS));" "COMMIT;" "CHECKPOINT;"; echo "INSERT INTO t SELECT g, 2000, 0 FROM generate_series(1, $2) g;"; }
sql_ins_lookup() { table "$1" "$ROWS"; deleted; echo "INSERT INTO t SELECT $ROWS + g, 500, 0 FROM generate_series(1, $2) g;"; }
sql_ins_lookup_rows() {
  table "$1" "$ROWS"
  echo "BEGIN;" "SELECT fencing.use(1000);"
  echo "DO \$\$ BEGIN FOR i IN 0..$(( (ROWS - 1) / 64 )) LOOP DELETE FROM t WHERE id > i * 64 AND id <= (i + 1) * 64; END LOOP; END \$\$;"
  echo "COMMIT;" "CHECKPOINT;"
  echo "INSERT INTO t SELECT $ROWS + g, 500, 0 FROM generate_series(1, $2) g;"
}
sql_acq() {
  if [ "$1" = noop ]; then
    echo "PREPARE a AS SELECT pg_advisory_lock(1);" "PREPARE r AS SELECT pg_advisory_unlock(1);"
  else
    echo "PREPARE a AS SELECT fencing.acquire('r1');" "PREPARE r AS SELECT fencing.release('r1');"
  fi
  seq "$2" | sed 's/.*/EXECUTE a;\nEXECUTE r;/'
}
count_of() { case "$1" in ins1|upd1|del1|acq) echo "$N" ;; *) echo "$ROWS" ;; esac; }

for c in "$ROWS" $((3 * ROWS)); do seq "$c" | sed 's/.*/&,100,0/' > "$run/rows_$c.csv"; done
chmod a+r "$run"/rows_*.csv
setup="CREATE EXTENSION fencing;
CREATE FUNCTION bench_noop_trigger() RETURNS trigger AS '$noop_so', 'bench_noop_trigger' LANGUAGE C;
SELECT fencing.acquire('r1'); SELECT fencing.release('r1');
CHECKPOINT;"
bin_of() { case "$1" in ref) echo "$ref_bin" ;; *) echo "$new_bin" ;; esac; }
for v in $variants; do
  as_user "$(bin_of "$v")/initdb" -D "$run/data_$v" -U postgres --auth=trust --no-sync -E UTF8 --locale=C >/dev/null
  printf '%s\n' "$setup" | single "$(bin_of "$v")" "$run/data_$v"
done
clean='DROP TABLE IF EXISTS t;
VACUUM fencing.tombstones;
CHECKPOINT;'

log "counting instructions (valgrind): $WORKLOADS"
declare -A per i1
for w in $WORKLOADS; do
  n="$(count_of "$w")"
  for v in $variants; do
    bin="$(bin_of "$v")" data="$run/data_$v"
    printf '%s\n' "$clean" | single "$bin" "$data"
    a="$(ir "$bin" "$data" "$("sql_$w" "$v" "$n")")"
    printf '%s\n' "$clean" | single "$bin" "$data"
    b="$(ir "$bin" "$data" "$("sql_$w" "$v" $((3 * n)))")"
    per[$w.$v]="$(awk -v a="${a%% *}" -v b="${b%% *}" -v n="$n" 'BEGIN { printf "%.0f", (b - a) / (2 * n) }')"
    if [ -n "$cache_sim" ]; then
      i1[$w.$v]="$(awk -v a="${a##* }" -v b="${b##* }" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / (2 * n) }')"
      log "  $w $v: ${per[$w.$v]} instructions, ${i1[$w.$v]} instruction cache misses"
    else
      log "  $w $v: ${per[$w.$v]}"
    fi
  done
done

label() {
  case "$1" in
    ins1) echo "single-row INSERT (prepared, one transaction each)" ;;
    upd1) echo "single-row UPDATE (prepared, one transaction each)" ;;
    del1) echo "single-row DELETE with the transaction's token (fencing.use, then the prepared DELETE)" ;;
    ins_bulk) echo "INSERT ... SELECT of new keys, per row" ;;
    copy) echo "COPY FROM of new keys, per row" ;;
    del_bulk) echo "DELETE of many rows with the transaction's token, per row" ;;
    upd_bulk) echo "bulk UPDATE, per row" ;;
    ins_other) echo "INSERT ... SELECT of new keys into a table with tombstones of other keys, per row" ;;
    ins_deleted) echo "INSERT ... SELECT of deleted keys with a newer token, per row" ;;
    ins_lookup) echo "INSERT ... SELECT of new keys with a token below the table's tombstones (each looks its key up), per row" ;;
    ins_lookup_rows) echo "the same, the tombstones recorded by DELETEs of 64 rows (no runs), per row" ;;
    acq) echo "acquire + release cycle (the baseline column: bare advisory locks)" ;;
  esac
}
rel() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }'; }
if [ "$ref" != none ]; then
  echo "| write (N=$N statements, ROWS=$ROWS rows) | no-op C trigger | $ref | / no-op | this tree | / no-op |"
  echo "|---|---:|---:|---:|---:|---:|"
  for w in $WORKLOADS; do
    echo "| $(label "$w") | ${per[$w.noop]} | ${per[$w.ref]} | $(rel "${per[$w.ref]}" "${per[$w.noop]}") | ${per[$w.new]} | $(rel "${per[$w.new]}" "${per[$w.noop]}") |"
  done
else
  echo "| write (N=$N statements, ROWS=$ROWS rows) | no-op C trigger | this tree | / no-op |"
  echo "|---|---:|---:|---:|"
  for w in $WORKLOADS; do
    echo "| $(label "$w") | ${per[$w.noop]} | ${per[$w.new]} | $(rel "${per[$w.new]}" "${per[$w.noop]}") |"
  done
fi
if [ -n "$cache_sim" ]; then
  echo
  echo "First-level instruction cache misses per write (simulated):"
  echo
  echo "| write | no-op C trigger |$([ "$ref" = none ] || echo " $ref |") this tree |"
  echo "|---|---:|$([ "$ref" = none ] || echo "---:|")---:|"
  for w in $WORKLOADS; do
    echo "| $(label "$w") | ${i1[$w.noop]} |$([ "$ref" = none ] || echo " ${i1[$w.ref]} |") ${i1[$w.new]} |"
  done
fi
