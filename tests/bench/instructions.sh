#!/usr/bin/env bash
# instructions.sh [REF] -- CPU instructions per acquire/release cycle and per
# protected row write, counted by valgrind (callgrind) in a single-user
# PostgreSQL backend: the working tree's module against REF's (default main).
#
# On a shared machine, throughput and even CPU time move by tens of percent
# from one run to the next; instruction counts do not. A cost that "nothing
# measurable" claims is absent must be absent here too. Each figure is the
# difference between a loop of 3N and one of N iterations, divided by 2N, so
# that start-up and the loop's own set-up cancel out.
#
# Variants: REF's module; this tree's with notifications and statistics off;
# with notifications enabled for another resource only; with fencing
# preloaded (statistics counting); and, for the cost when on, with the
# resource's notifications enabled (each cycle queues two notifications;
# the DO block is one transaction, so at most 10,000 are queued). The row
# write is an UPDATE of every row of a protected table (accepted), and of a
# protected on_stale => 'skip' table whose rows are all stale (each skipped
# row counted when statistics are on).
#
# Needs valgrind (Debian package). Run as root (like make bench) or as a user
# who may install into a private copy of PostgreSQL; takes a few minutes.
# Prints a Markdown table.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"

ref="${1:-main}"
N="${FENCING_IR_N:-1000}"
ROWS="${FENCING_IR_ROWS:-5000}"
ensure_packages "${BASE_PACKAGES[@]}" valgrind
ensure_user
work="$(make_workdir)"
[ "${FENCING_IR_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

log "building $ref and the working tree"
mkdir -p "$work/src_ref"
git -C "$FENCING_ROOT" archive "$ref" | tar -x -C "$work/src_ref"
make -C "$work/src_ref" -s >/dev/null
make -C "$FENCING_ROOT" -s >/dev/null
ref_bin="$(private_tree "$work/pg_ref" "$work/src_ref")"
new_bin="$(private_tree "$work/pg_new" "$FENCING_ROOT")"
# The reference tree gets only the reference's own SQL files.
refext="$("$ref_bin/pg_config" --sharedir)/extension"
rm -f "$refext"/fencing--*.sql "$refext"/fencing.control
cp "$work/src_ref"/sql/fencing--*.sql "$work/src_ref/fencing.control" "$refext/"
# Not chown -R over $work: the private trees share their files with the system's.
run="$work/run"
mkdir -p "$run"
[ "$(id -u)" -ne 0 ] || chown "$FENCING_USER" "$run"

# single BIN DATA [postgres options...] < SQL: a single-user backend.
single() {
  local bin="$1" data="$2"; shift 2
  as_user "$bin/postgres" --single -D "$data" -c log_min_messages=warning "$@" postgres >/dev/null 2>>"$run/single.log"
}
# ir BIN DATA SQL [postgres options...]: instructions (callgrind Ir) of a backend running SQL.
ir() {
  local bin="$1" data="$2" sql="$3" out; shift 3
  out="$run/cg.$RANDOM$RANDOM"
  printf '%s\n' "$sql" | as_user valgrind --tool=callgrind --callgrind-out-file="$out" --trace-children=no \
      "$bin/postgres" --single -D "$data" -c log_min_messages=warning "$@" postgres >/dev/null 2>>"$run/valgrind.log"
  sed -n 's/^summary: //p;s/^totals: //p' "$out" | head -1
}
loop() { echo "DO \$\$ BEGIN FOR i IN 1..$1 LOOP PERFORM fencing.acquire('r1'); PERFORM fencing.release('r1'); END LOOP; END \$\$;"; }
per() {  # per BIN DATA MAKE_SQL COUNT [options...]: Ir per unit, from COUNT and 3 COUNT
  local bin="$1" data="$2" mk="$3" n="$4"; shift 4
  local a b
  a="$(ir "$bin" "$data" "$($mk "$n")" "$@")"
  b="$(ir "$bin" "$data" "$($mk $((3 * n)))" "$@")"
  awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.0f", (b - a) / (2 * n) }'
}
# A fresh table each time (the same set-up for N and 3N), then N or 3N rows updated.
table() {  # table NAME TOKEN ON_STALE
  printf '%s\n' "DROP TABLE IF EXISTS $1;" "CREATE TABLE $1 (id int PRIMARY KEY, fence_token bigint NOT NULL);" \
    "INSERT INTO $1 SELECT g, $2 FROM generate_series(1, $((3 * ROWS))) g;" \
    "SELECT fencing.protect('$1', on_stale => '$3');" "CHECKPOINT;"
}
upd() { table t 1 error; echo "UPDATE t SET fence_token = fence_token + 1 WHERE id <= $1;"; }
skip() { table s 1000 skip; echo "UPDATE s SET fence_token = 1 WHERE id <= $1;"; }

setup='CREATE EXTENSION fencing;
SELECT fencing.acquire('"'r1'"'); SELECT fencing.release('"'r1'"');
CHECKPOINT;'
for v in ref new; do
  bin="$([ "$v" = ref ] && echo "$ref_bin" || echo "$new_bin")"
  as_user "$bin/initdb" -D "$run/data_$v" -U postgres --auth=trust --no-sync -E UTF8 --locale=C >/dev/null
  printf '%s\n' "$setup" | single "$bin" "$run/data_$v"
done

log "counting instructions (valgrind; a few minutes)"
declare -A cyc row skp
cyc[ref]="$(per "$ref_bin" "$run/data_ref" loop "$N")"
row[ref]="$(per "$ref_bin" "$run/data_ref" upd "$ROWS")"
skp[ref]="$(per "$ref_bin" "$run/data_ref" skip "$ROWS")"
cyc[off]="$(per "$new_bin" "$run/data_new" loop "$N")"
row[off]="$(per "$new_bin" "$run/data_new" upd "$ROWS")"
skp[off]="$(per "$new_bin" "$run/data_new" skip "$ROWS")"
echo "SELECT fencing.set_notify('other');" | single "$new_bin" "$run/data_new"
cyc[other]="$(per "$new_bin" "$run/data_new" loop "$N")"
echo "SELECT fencing.set_notify('other', false);" | single "$new_bin" "$run/data_new"
cyc[stats]="$(per "$new_bin" "$run/data_new" loop "$N" -c shared_preload_libraries=fencing)"
row[stats]="$(per "$new_bin" "$run/data_new" upd "$ROWS" -c shared_preload_libraries=fencing)"
skp[stats]="$(per "$new_bin" "$run/data_new" skip "$ROWS" -c shared_preload_libraries=fencing)"
echo "SELECT fencing.set_notify('r1');" | single "$new_bin" "$run/data_new"
cyc[notify]="$(per "$new_bin" "$run/data_new" loop "$N")"

rel() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3fx", a / b; else print "n/a" }'; }
echo "| variant | instructions per acquire/release cycle | / $ref | per accepted protected row | / $ref | per skipped stale row | / $ref |"
echo "|---|---:|---:|---:|---:|---:|---:|"
echo "| $ref | ${cyc[ref]} | 1.000x | ${row[ref]} | 1.000x | ${skp[ref]} | 1.000x |"
echo "| this tree, notifications and statistics off | ${cyc[off]} | $(rel "${cyc[off]}" "${cyc[ref]}") | ${row[off]} | $(rel "${row[off]}" "${row[ref]}") | ${skp[off]} | $(rel "${skp[off]}" "${skp[ref]}") |"
echo "| notifications enabled for another resource | ${cyc[other]} | $(rel "${cyc[other]}" "${cyc[ref]}") | | | | |"
echo "| statistics on (preloaded) | ${cyc[stats]} | $(rel "${cyc[stats]}" "${cyc[ref]}") | ${row[stats]} | $(rel "${row[stats]}" "${row[ref]}") | ${skp[stats]} | $(rel "${skp[stats]}" "${skp[ref]}") |"
echo "| notifications enabled for this resource (two per cycle) | ${cyc[notify]} | $(rel "${cyc[notify]}" "${cyc[ref]}") | | | | |"
