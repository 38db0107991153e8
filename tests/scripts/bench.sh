#!/usr/bin/env bash
# bench.sh [full|quick] -- `make bench`: the benchmark suite of tests/bench.
#
# Installs the Debian packages that are missing (as root), builds and installs
# the extension, builds the C++ client tests/bench/fencebench.cpp, starts a
# throwaway cluster (as the unprivileged user; fsync on) and a Redis server on
# a free loopback port (no persistence), runs every benchmark with its
# variants interleaved round by round, and writes
#   tests/bench/results/latest.csv   raw results: suite,variant,param,metric,value,run
#   tests/bench/results/latest.md    medians, ratios, targets MET/MISSED, machine
#   tests/bench/results/*.svg        charts (gnuplot)
# Benchmarks measure ratios; they never fail on a missed target. The run is
# bounded: it stops by itself within FENCING_BENCH_BUDGET seconds (600) of its
# start (the clock starts after a first-time package installation).
#
# `quick` shortens every step (smaller tables, fewer and shorter rounds) for a
# smoke run of about two minutes. See tests/bench/README.md.
#
# FENCING_BENCH_BASE=<git ref> also builds that commit of this repository as an
# extension of its own (fencing_base, in a database of its own on the same
# cluster) and runs its acquire/release cycle in suite E's rounds: what the
# plain cycle costs now against then, in the same run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

profile="${1:-full}"
case "$profile" in
  full|quick) ;;
  *) echo "usage: $0 [full|quick]" >&2; exit 2 ;;
esac

BENCH_PACKAGES=("${BASE_PACKAGES[@]}" redis-server redis-tools libhiredis-dev gnuplot-nox python3)
BUDGET="${FENCING_BENCH_BUDGET:-600}"

# ---- outer shell: packages, then re-run under a hard time limit --------------
if [ -z "${FENCING_BENCH_INNER:-}" ]; then
  ensure_packages "${BENCH_PACKAGES[@]}"
  export FENCING_BENCH_START="$(date +%s)" FENCING_BENCH_INNER=1
  # The inner run watches its own budget and skips what would not fit; the
  # hard limit is the backstop (TERM: partial report, cleanup; KILL 20 s later).
  exec timeout --signal=TERM --kill-after=20 "$BUDGET" bash "${BASH_SOURCE[0]}" "$profile"
fi

START="${FENCING_BENCH_START:-$(date +%s)}"
elapsed() { echo $(( $(date +%s) - START )); }
time_left() { echo $(( BUDGET - $(elapsed) )); }

BENCH_DIR="$FENCING_ROOT/tests/bench"
RESULTS="$BENCH_DIR/results"
mkdir -p "$RESULTS"
CSV="$RESULTS/latest.csv.tmp"
echo "suite,variant,param,metric,value,run" > "$CSV"

work=""
port=""
redis_pid=""
report_done=0
base_src=""
pwork=""
listener_pid=""

# ---- profile ---------------------------------------------------------------
if [ "$profile" = full ]; then
  CYCLE_ROUNDS=5       # A: rounds of the interleaved comparison
  CYCLE_SECS=1.2       # A: seconds per variant and round
  E2E_ROUNDS=5         # C: rounds (each: sync on and off, three variants)
  E2E_SECS=1.5
  BULK_ROUNDS=3        # B: rounds of the bulk UPDATE (protected and unprotected)
  BULK_FULL_ROUNDS=2   # B: of which with all five variants
  BULK_ROWS=1000000    # B: rows of the bulk UPDATE
  SINGLE_ROUNDS=5      # B: rounds of single-row updates (sync on and off, 3 variants)
  SINGLE_SECS=1.2
  GROWTH_LEVELS="100 1000 10000 100000 1000000"
  GROWTH_ROUNDS=2
  GROWTH_SECS=0.6
  CONT_CLIENTS="1 2 4 8 16 32"
  CONT_SECS=0.8
  WIDTH_ROWS=100000
  SCALE_ROWS="1000 10000 100000"   # plus BULK_ROWS from B, plus 10^7 if time allows
  SCALE_ROUNDS=3
  FEAT_ROUNDS=3        # F: rounds of notifications and statistics off/on
  FEAT_SECS=1.0
  FEAT_SKIP_ROWS=200000
  FEAT_LOOP=20000      # F: acquire/release cycles of one backend's loop (CPU per cycle)
  G_ROUNDS=3           # G: rounds of fenced writes against the no-op C trigger
  G_SECS=1.0           # G: seconds per single-row variant and round
  G_ROWS=200000        # G: rows of the bulk DELETE
  G_DEL_PAIRS=3        # G: bulk DELETE pairs (no-op, fencing) per round
  G_INS_ROWS=1000000   # G: rows of the bulk INSERT ... SELECT and COPY
  SUP_SECS=3           # S: seconds per variant and round of the leased cycle
  SUP_SAMPLE_SECS=6    # S: seconds of each sample of the supervisor's CPU
else
  CYCLE_ROUNDS=3
  CYCLE_SECS=0.8
  E2E_ROUNDS=3
  E2E_SECS=0.8
  BULK_ROUNDS=3
  BULK_FULL_ROUNDS=3
  BULK_ROWS=100000
  SINGLE_ROUNDS=3
  SINGLE_SECS=0.8
  GROWTH_LEVELS="100 1000 10000 100000"
  GROWTH_ROUNDS=3
  GROWTH_SECS=0.5
  CONT_CLIENTS="1 4 16"
  CONT_SECS=0.6
  WIDTH_ROWS=20000
  SCALE_ROWS="1000 10000"
  SCALE_ROUNDS=2
  FEAT_ROUNDS=2
  FEAT_SECS=0.6
  FEAT_SKIP_ROWS=20000
  FEAT_LOOP=5000
  G_ROUNDS=2
  G_SECS=0.5
  G_ROWS=20000
  G_DEL_PAIRS=1
  G_INS_ROWS=20000
  SUP_SECS=1
  SUP_SAMPLE_SECS=2
fi
WARMUP=0.3
SEED=20260101

# ---- cleanup and the final report -------------------------------------------
make_report() {
  [ "$report_done" -eq 1 ] && return 0
  report_done=1
  mv -f "$CSV" "$RESULTS/latest.csv" 2>/dev/null || true
  local pgver
  pgver="$("$PGBIN/postgres" --version 2>/dev/null || echo unknown)"
  log "writing $RESULTS/latest.md and charts"
  BENCH_PROFILE="$profile" BENCH_WALL_SECONDS="$(elapsed)" BENCH_BUDGET="$BUDGET" BENCH_PG_VERSION="$pgver" \
    BENCH_PARTIAL="${1:-0}" python3 "$BENCH_DIR/report.py" "$RESULTS" || log "report failed"
}

cleanup() {
  local rc=$?
  trap - EXIT TERM INT
  if [ -n "$base_src" ] && [ -d "$base_src" ]; then
    make -C "$base_src" -s uninstall PG_CONFIG="$PGBIN/pg_config" >/dev/null 2>&1 || true
  fi
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; fi
  if [ -n "$listener_pid" ]; then kill "$listener_pid" 2>/dev/null || true; fi
  if [ -n "$pwork" ]; then as_user bash "$FENCING_ROOT/tests/scripts/cluster.sh" stop "$pwork" || true; fi
  if [ -n "$work" ] && [ -d "$work" ]; then
    as_user bash "$FENCING_ROOT/tests/scripts/cluster.sh" stop "$work" || true
    rm -rf "$work"
  fi
  exit "$rc"
}
on_term() {
  log "time budget of ${BUDGET}s reached: stopping, reporting what was measured"
  make_report 1 || true
  exit 124
}
trap cleanup EXIT
trap on_term TERM INT

# ---- build -----------------------------------------------------------------
renice -n 5 -p $$ >/dev/null 2>&1 || true
ensure_user
build_and_install
work="$(make_workdir)"
FB="$work/fencebench"
log "building tests/bench/fencebench"
g++ -O2 -std=c++17 -Wall -Wextra -pthread -I"$("$PGBIN/pg_config" --includedir)" \
  -o "$FB" "$BENCH_DIR/fencebench.cpp" -lpq -lhiredis
chmod 755 "$FB"
# The floor of any row trigger, for suites B and G: a no-op C BEFORE ROW
# trigger (tests/bench/noop_trigger.c), loaded by its path.
NOOP_SO="$work/noop_trigger.so"
gcc -O2 -fPIC -shared -I"$("$PGBIN/pg_config" --includedir-server)" -o "$NOOP_SO" "$BENCH_DIR/noop_trigger.c"
chmod 755 "$NOOP_SO"

# The baseline build of suite E (FENCING_BENCH_BASE): the extension and module
# renamed fencing_base, so that both install side by side; each database loads
# only its own.
if [ -n "${FENCING_BENCH_BASE:-}" ]; then
  base_src="$work/base_src"
  mkdir -p "$base_src"
  log "building the baseline $FENCING_BENCH_BASE as extension fencing_base"
  git -C "$FENCING_ROOT" archive "$FENCING_BENCH_BASE" | tar -x -C "$base_src"
  (
    cd "$base_src"
    sed -i -e 's/^EXTENSION *=.*/EXTENSION = fencing_base/' -e 's/^MODULE_big *=.*/MODULE_big = fencing_base/' \
      -e 's|sql/fencing--|sql/fencing_base--|g' -e 's/^DOCS *=.*/DOCS =/' Makefile
    sed "s|\$libdir/fencing'|\$libdir/fencing_base'|" fencing.control > fencing_base.control
    rm fencing.control
    # Copies (the build's own checks read the originals).
    for f in sql/fencing--*.sql; do cp "$f" "sql/fencing_base--${f#sql/fencing--}"; done
    [ ! -f sql/fencing.sql ] || cp sql/fencing.sql sql/fencing_base.sql
  )
  make -C "$base_src" -s PG_CONFIG="$PGBIN/pg_config" >/dev/null
  make -C "$base_src" -s install PG_CONFIG="$PGBIN/pg_config" >/dev/null
fi

# ---- cluster and redis -----------------------------------------------------
port="$(free_port)"
log "starting a throwaway cluster on 127.0.0.1:$port"
as_user bash "$FENCING_ROOT/tests/scripts/cluster.sh" start "$work" "$port" \
  "shared_buffers = 512MB" "max_wal_size = 16GB" "checkpoint_timeout = 1h" \
  "synchronous_commit = on" "autovacuum_naptime = 10s" "max_locks_per_transaction = 1024"
rport="$(free_port)"
log "starting redis-server on 127.0.0.1:$rport"
as_user redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$work/redis.pid" --logfile "$work/redis.log" --dir "$work" >/dev/null
for _ in $(seq 1 50); do
  [ -s "$work/redis.pid" ] && redis-cli -p "$rport" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done
redis_pid="$(cat "$work/redis.pid")"

export PGHOST=127.0.0.1 PGPORT="$port" PGUSER=postgres
unset PGDATABASE PGOPTIONS PGSERVICE PGPASSWORD
q() { local db="$1"; shift; PGOPTIONS="-c client_min_messages=warning" "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"; }
conn() { echo "host=127.0.0.1 port=${2:-$port} user=postgres dbname=$1 application_name=fencebench"; }

# Server processes whose CPU counts with the backends' (fencebench server_cpu_us).
server_pids="$(q postgres -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'"),$redis_pid"

record() { echo "$1,$2,$3,$4,$5,$6" >> "$CSV"; }   # suite variant param metric value run

# fb SUITE PARAM RUN VARIANT ARGS...: one timed fencebench run, its metrics
# recorded under VARIANT (or under $FB_LABEL when set).
fb() {
  local suite="$1" param="$2" run="$3" variant="$4"; shift 4
  local name="${FB_LABEL:-$variant}" out kv
  out="$("$FB" run "$variant" --extra-pids "$server_pids" --warmup "$WARMUP" --seed "$SEED" "$@")" ||
    { log "fencebench $variant failed"; return 0; }
  for kv in $out; do
    case "${kv%%=*}" in
      ops_per_s|p50_us|p99_us|mean_us|max_us|fairness|retries|client_min_ops|client_max_ops|backend_cpu_us|server_cpu_us)
        record "$suite" "$name" "$param" "${kv%%=*}" "${kv#*=}" "$run" ;;
    esac
  done
}

# timed SUITE VARIANT PARAM RUN DB SQL: runs SQL on a fresh connection, records
# its wall time ("seconds") and its backend's on-CPU time ("cpu_seconds").
# TIMED_PORT chooses another cluster.
timed() {
  local suite="$1" variant="$2" param="$3" run="$4" db="$5" sql="$6" out
  out="$("$FB" exec --conninfo "$(conn "$db" "${TIMED_PORT:-}")" "$sql" | tail -1)" || { log "timed $suite/$variant failed"; return 0; }
  record_timed "$suite" "$variant" "$param" "$run" "$out"
}
# record_timed SUITE VARIANT PARAM RUN LINE: a "ms=... cpu_ms=..." line of fencebench exec.
record_timed() {
  local suite="$1" variant="$2" param="$3" run="$4" ms cpu
  ms="$(echo "$5" | sed -n 's/^ms=\([0-9.]*\).*/\1/p')"
  cpu="$(echo "$5" | sed -n 's/.*cpu_ms=\([-0-9.]*\).*/\1/p')"
  record "$suite" "$variant" "$param" seconds "$(awk -v x="$ms" 'BEGIN {printf "%.6f", x / 1000}')" "$run"
  case "$cpu" in -*|"") ;; *) record "$suite" "$variant" "$param" cpu_seconds "$(awk -v x="$cpu" 'BEGIN {printf "%.6f", x / 1000}')" "$run" ;; esac
}

# fb_pair SUITE PARAM RUN WORKLOAD [options...]: fencebench pair (both
# variants interleaved in one run); records each variant's line under its name.
fb_pair() {
  local suite="$1" param="$2" run="$3" workload="$4"; shift 4
  local out line kv name
  out="$("$FB" pair "$workload" --warmup "$WARMUP" "$@")" || { log "fencebench pair $workload failed"; return 0; }
  while read -r line; do
    name="$(echo "$line" | sed -n 's/^variant=\([a-z]*\).*/\1/p')"
    for kv in $line; do
      case "${kv%%=*}" in
        ops_per_s|p50_us|p99_us|mean_us|backend_cpu_us) record "$suite" "$name" "$param" "${kv%%=*}" "${kv#*=}" "$run" ;;
      esac
    done
  done <<< "$out"
}

# order ROUND ITEMS...: the items rotated by ROUND (interleaving without a fixed order).
order() {
  local r="$1"; shift
  local items=("$@") n=$# i
  for ((i = 0; i < n; i++)); do echo "${items[$(( (i + r) % n ))]}"; done
}

# ---- schema ----------------------------------------------------------------
log "creating the bench schema"
q postgres -c "CREATE DATABASE bench"
q bench -c "CREATE FUNCTION bench_noop_trigger() RETURNS trigger AS '$NOOP_SO', 'bench_noop_trigger' LANGUAGE C"
q bench <<'SQL'
CREATE EXTENSION fencing;
CREATE TABLE counters (resource text PRIMARY KEY, token bigint NOT NULL DEFAULT 0);
INSERT INTO counters SELECT 'r' || g, 0 FROM generate_series(1, 10000) g;
-- Fence state of r1..r10000 exists before any measurement (first touch excluded).
DO $$ BEGIN
  FOR b IN 0..9 LOOP
    PERFORM fencing.acquire_xact('r' || g) FROM generate_series(b * 1000 + 1, b * 1000 + 1000) g;
    COMMIT;
  END LOOP;
END $$;
-- Permit 1 of each resource, and the permits of 'hot', exist beforehand too (suite E).
DO $$ BEGIN
  FOR b IN 0..9 LOOP
    PERFORM fencing.acquire_xact('r' || g, permits => 4) FROM generate_series(b * 1000 + 1, b * 1000 + 1000) g;
    COMMIT;
  END LOOP;
END $$;
CREATE TABLE items_a (id int PRIMARY KEY, fence_token bigint NOT NULL DEFAULT 0, v bigint NOT NULL DEFAULT 0);
CREATE TABLE items_b (LIKE items_a INCLUDING ALL);
CREATE TABLE items_c (LIKE items_a INCLUDING ALL);
INSERT INTO items_a (id) SELECT g FROM generate_series(1, 10000) g;
INSERT INTO items_b (id) SELECT g FROM generate_series(1, 10000) g;
INSERT INTO items_c (id) SELECT g FROM generate_series(1, 10000) g;
SELECT fencing.protect('items_a');
-- The PL/pgSQL trigger that does fencing's check (for suite B).
CREATE FUNCTION plpgsql_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.fence_token IS NULL OR (OLD.fence_token IS NOT NULL AND NEW.fence_token <= OLD.fence_token) THEN
    RAISE EXCEPTION 'stale fence token for relation "%"', TG_TABLE_NAME USING ERRCODE = '23T01';
  END IF;
  RETURN NEW;
END $$;
VACUUM ANALYZE;
SQL

# ======================================================================== A ==
log "A: acquire-and-release cycles, 2 clients, 10,000 resources ($CYCLE_ROUNDS rounds x ${CYCLE_SECS}s)"
for r in $(seq 1 "$CYCLE_ROUNDS"); do
  for v in $(order "$r" fence_cycle recipe_cycle bare_cycle); do
    fb A "" "$r" "$v" --conninfo "$(conn bench)" --clients 2 --resources 10000 --seconds "$CYCLE_SECS"
  done
  # The 1.2 goal's ratio, fencing and bare cycles at the same moments.
  fb_pair A_pair "" "$r" pair_cycle --conninfo "$(conn bench)" --clients 2 --resources 10000 --seed "$SEED" \
    --seconds "$(awk -v s="$CYCLE_SECS" 'BEGIN { print 2 * s }')"
done

# ======================================================================== G ==
# Fenced INSERTs and DELETEs against PostgreSQL's floor for a row trigger:
# the same statements on the same tables, protected with protect()'s
# defaults (tombstones on) or with the no-op C trigger, by backend CPU and
# wall time. Single-row statements from 2 clients (prepared; a DELETE in a
# transaction of its own after fencing.use()), on two tables at once
# (fencebench pair: the variants alternate every few statements within one
# run, so that both see the same moments of a machine whose speed moves);
# bulk INSERT ... SELECT, COPY
# FROM and a DELETE of G_ROWS rows with the transaction's token (G_DEL_PAIRS
# times per round, for it is short), each variant's right after the
# other's, on tables created afresh (emptying one by SQL would leave the
# server's summary of its tombstones at the last DELETE's token, above the
# INSERTs'). (Single-row and bulk UPDATEs
# against the no-op trigger: suite B.) Right after suite A, so that a run
# cut short by its budget on a loaded machine still has it.
log "G: fenced INSERT and DELETE vs a no-op C trigger ($G_ROUNDS rounds; $G_INS_ROWS-row bulk INSERT and COPY, $G_ROWS-row DELETE)"
g_per_run=$(( 2 * 30000 ))   # ids a single_delete run may use (2 clients)
q bench <<SQL
CREATE TABLE single_ins (id bigserial PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
CREATE TABLE single_ins_noop (id bigserial PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
CREATE TABLE single_del (id bigint PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
CREATE TABLE single_del_noop (id bigint PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
INSERT INTO single_del SELECT g, 1, 0 FROM generate_series(0, $(( G_ROUNDS * g_per_run ))) g;
INSERT INTO single_del_noop SELECT g, 1, 0 FROM generate_series(0, $(( G_ROUNDS * g_per_run ))) g;
CREATE TABLE gbulk (id int PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
VACUUM ANALYZE single_del, single_del_noop;
SQL
seq 1 "$G_INS_ROWS" | sed 's/.*/&,1000000,0/' > "$work/g_rows.csv"
chmod 644 "$work/g_rows.csv"
g_trigger() {  # g_trigger TABLE noop|fencing: the table's trigger for that variant
  q bench -c "SELECT fencing.unprotect('$1')" -c "DROP TRIGGER IF EXISTS a_noop ON $1" >/dev/null
  if [ "$2" = fencing ]; then q bench -c "SELECT fencing.protect('$1')" >/dev/null
  else q bench -c "CREATE TRIGGER a_noop BEFORE INSERT OR UPDATE OR DELETE ON $1 FOR EACH ROW EXECUTE FUNCTION bench_noop_trigger()"; fi
}
# g_pair [ROWS]: gbulk (protected) and gbulk_noop (the no-op trigger)
# created again (new tables, as a user's would be: the server knows nothing
# of their tombstones), empty or loaded with ROWS rows before the trigger.
g_pair() {
  q bench -c "DROP TABLE IF EXISTS gbulk, gbulk_noop" \
    -c "CREATE TABLE gbulk (id int PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL)" \
    -c "CREATE TABLE gbulk_noop (id int PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL)" >/dev/null
  [ -z "${1:-}" ] || q bench -c "INSERT INTO gbulk SELECT g, 1, 0 FROM generate_series(1, $1) g" \
    -c "INSERT INTO gbulk_noop SELECT g, 1, 0 FROM generate_series(1, $1) g"
  g_trigger gbulk fencing
  g_trigger gbulk_noop noop
  q bench -c "VACUUM ANALYZE gbulk" -c "VACUUM ANALYZE gbulk_noop" -c "VACUUM fencing.tombstones" -c "CHECKPOINT"
}
# timed_pair PARAM RUN ORDER SQL: SQL on gbulk_noop and on gbulk (TABLE in
# SQL names the table), one right after the other on one connection, the
# first by ORDER (rotating); recorded as timed does.
timed_pair() {
  local param="$1" run="$2" sql="$4" v out line vs=() ts=()
  for v in $(order "$3" noop fencing); do
    vs+=("$v")
    ts+=("${sql//TABLE/$([ "$v" = noop ] && echo gbulk_noop || echo gbulk)}")
  done
  out="$("$FB" exec --conninfo "$(conn bench)" "${ts[0]}" "${ts[1]}")" || { log "timed pair $param failed"; return 0; }
  v=0
  while read -r line; do
    [ "$v" -lt 2 ] && record_timed G "${vs[$v]}" "$param" "$run" "$line"
    v=$((v + 1))
  done <<< "$out"
}
g_trigger single_ins fencing
g_trigger single_ins_noop noop
g_trigger single_del fencing
g_trigger single_del_noop noop
record G info "" rows "$G_ROWS" 1
record G info "" insert_rows "$G_INS_ROWS" 1
g_offset=0
for r in $(seq 1 "$G_ROUNDS"); do
  secs="$(awk -v s="$G_SECS" 'BEGIN { print 2 * s }')"
  fb_pair G single_insert "$r" pair_insert --conninfo "$(conn bench)" --clients 2 --seconds "$secs"
  fb_pair G single_delete "$r" pair_delete --conninfo "$(conn bench)" --clients 2 --seconds "$secs" --offset "$g_offset"
  g_offset=$(( g_offset + g_per_run ))
  # Bulk statements in pairs on two tables loaded alike, back to back on one
  # connection (the first rotating); the DELETE, a fifth of a second,
  # G_DEL_PAIRS times per round.
  g_pair
  timed_pair insert_select "$r" "$r" "INSERT INTO TABLE SELECT g, 1000000, 0 FROM generate_series(1, $G_INS_ROWS) g"
  g_pair
  timed_pair copy "$r" "$((r + 1))" "COPY TABLE FROM '$work/g_rows.csv' (FORMAT csv)"
  for k in $(seq 1 "$G_DEL_PAIRS"); do
    g_pair "$G_ROWS"
    timed_pair delete "$r.$k" "$((r + k))" "BEGIN; SELECT fencing.use(2000000); DELETE FROM TABLE; COMMIT"
  done
done
q bench -c "DROP TABLE single_ins, single_ins_noop, single_del, single_del_noop, gbulk, gbulk_noop"

# ======================================================================== E ==
# The lock options of 1.1: what the plain cycle costs (against the baseline
# build when FENCING_BENCH_BASE is set), and what each option adds when used.
e_variants="fence_cycle delay_cycle shared_cycle permit_cycle"
if [ -n "$base_src" ]; then
  q postgres -c "CREATE DATABASE bench_base"
  q bench_base -c "CREATE EXTENSION fencing_base" -c "DO \$\$ BEGIN
      FOR b IN 0..9 LOOP
        PERFORM fencing.acquire_xact('r' || g) FROM generate_series(b * 1000 + 1, b * 1000 + 1000) g;
        COMMIT;
      END LOOP; END \$\$" -c "VACUUM ANALYZE"
  e_variants="$e_variants base_cycle"
fi
log "E: lock options: cycles with and without them, 2 clients, 10,000 resources ($CYCLE_ROUNDS rounds x ${CYCLE_SECS}s)"
for r in $(seq 1 "$CYCLE_ROUNDS"); do
  for v in $(order "$r" $e_variants); do
    if [ "$v" = base_cycle ]; then
      FB_LABEL=base_cycle fb E "" "$r" fence_cycle --conninfo "$(conn bench_base)" --clients 2 --resources 10000 --seconds "$CYCLE_SECS"
    else
      fb E "" "$r" "$v" --conninfo "$(conn bench)" --clients 2 --resources 10000 --seconds "$CYCLE_SECS"
    fi
  done
done
log "E: one resource, 8 clients: exclusive, shared, 4 permits"
for r in 1 2; do
  for v in $(order "$r" hot_fencing hot_shared hot_permits); do
    fb E_contention "clients=8" "$r" "$v" --conninfo "$(conn bench)" --clients 8 --seconds "$CONT_SECS"
  done
done
# Notifications and statistics, off and on. Off must cost nothing: suite A's
# fence/bare ratio is measured with both off (this cluster does not preload
# fencing, no resource notifies); here, cycles with notifications enabled for
# another resource only, and on a second cluster that preloads fencing (the
# statistics count), each against plain cycles in the same rounds. On: every
# grant and release notifying (no listener, and a listener reading), waits
# counted under contention, skipped stale rows counted per table.
log "F: notifications and statistics off and on ($FEAT_ROUNDS rounds x ${FEAT_SECS}s)"
notify_mode() {   # notify_mode none|other|all: this cluster's bench database's settings
  q bench -c "SELECT fencing.set_notify(NULL, false), fencing.set_notify('zz:other', false)" >/dev/null
  case "$1" in
    other) q bench -c "SELECT fencing.set_notify('zz:other')" >/dev/null ;;
    all) q bench -c "SELECT fencing.set_notify(NULL)" >/dev/null ;;
  esac
}
listener_start() {  # a session that LISTENs and reads what arrives, every 50 ms
  ( printf 'LISTEN fencing;\n'; while :; do printf 'SELECT 1;\n'; sleep 0.05; done ) |
    PGOPTIONS="" "$PGBIN/psql" -X -q -d bench >/dev/null 2>&1 &
  listener_pid=$!
  sleep 0.2
}
listener_stop() { kill "$listener_pid" 2>/dev/null || true; wait "$listener_pid" 2>/dev/null || true; listener_pid=""; }
LOOP_SQL="DO \$\$ BEGIN FOR i IN 1..$FEAT_LOOP LOOP PERFORM fencing.acquire('r1'); PERFORM fencing.release('r1'); END LOOP; END \$\$"
for r in $(seq 1 "$FEAT_ROUNDS"); do
  for v in $(order "$r" none other); do   # one backend's loop: its CPU per cycle, little moved by other load
    notify_mode "$v"
    timed F_notify "loop_$v" "cycles=$FEAT_LOOP" "$r" bench "$LOOP_SQL"
  done
  for v in $(order "$r" none other all all_listen); do
    case "$v" in none) notify_mode none ;; other) notify_mode other ;; all|all_listen) notify_mode all ;; esac
    [ "$v" = all_listen ] && listener_start
    FB_LABEL="notify_$v" fb F_notify "" "$r" fence_cycle --conninfo "$(conn bench)" --clients 2 --resources 10000 \
      --seconds "$FEAT_SECS"
    [ "$v" = all_listen ] && listener_stop
  done
done
notify_mode none

# Statistics: a second cluster, restarted before each variant with or without
# fencing in shared_preload_libraries, so that both variants run on the same
# cluster and data, each just after a restart.
pport="$(free_port)"
pwork="$work/preloaded"
mkdir -p "$pwork" && chown "$FENCING_USER" "$pwork" 2>/dev/null || true
log "F: a second cluster on 127.0.0.1:$pport, restarted with and without the preload"
as_user bash "$FENCING_ROOT/tests/scripts/cluster.sh" start "$pwork" "$pport" \
  "shared_buffers = 512MB" "max_wal_size = 16GB" "checkpoint_timeout = 1h" \
  "synchronous_commit = on" "autovacuum = off" "max_locks_per_transaction = 1024"
qp() { local db="$1"; shift; PGPORT="$pport" q "$db" "$@"; }
preload() {   # preload on|off: restart the second cluster with or without fencing preloaded
  if [ "$1" = on ]; then qp postgres -c "ALTER SYSTEM SET shared_preload_libraries = 'fencing'"
  else qp postgres -c "ALTER SYSTEM RESET shared_preload_libraries"; fi
  as_user "$PGBIN/pg_ctl" -D "$pwork/data" -l "$pwork/server.log" -w -t 60 -m fast restart >/dev/null
  pservers="$(qp postgres -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")"
}
qp postgres -c "CREATE DATABASE bench"
qp bench <<SQL
CREATE EXTENSION fencing;
DO \$\$ BEGIN
  FOR b IN 0..9 LOOP
    PERFORM fencing.acquire_xact('r' || g) FROM generate_series(b * 1000 + 1, b * 1000 + 1000) g;
    COMMIT;
  END LOOP;
END \$\$;
-- Rows that every UPDATE of the bench skips as stale (on_stale => 'skip').
CREATE TABLE skipped (id int PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
INSERT INTO skipped SELECT g, 1000, 0 FROM generate_series(1, $FEAT_SKIP_ROWS) g;
SELECT fencing.protect('skipped', on_stale => 'skip');
VACUUM ANALYZE;
SQL
for r in $(seq 1 "$FEAT_ROUNDS"); do
  for v in $(order "$r" stats_off stats_on); do
    preload "$([ "$v" = stats_on ] && echo on || echo off)"
    [ "$v" != stats_on ] || [ "$(qp bench -c 'SELECT collecting FROM fencing.stats')" = t ] ||
      log "F: the preloaded cluster does not collect statistics"
    WARMUP=1 server_pids="$pservers" FB_LABEL="$v" fb F_stats cycle "$r" fence_cycle --conninfo "$(conn bench "$pport")" \
      --clients 2 --resources 10000 --seconds "$FEAT_SECS"
    WARMUP=0.5 server_pids="$pservers" FB_LABEL="$v" fb F_stats contention "$r" hot_fencing \
      --conninfo "$(conn bench "$pport")" --clients 4 --seconds "$FEAT_SECS"
    qp bench -c "VACUUM skipped"
    TIMED_PORT="$pport" timed F_stats "$v" "skipped_rows=$FEAT_SKIP_ROWS" "$r" bench "UPDATE skipped SET fence_token = 1, v = v + 1"
    TIMED_PORT="$pport" timed F_stats "$v" "cycles=$FEAT_LOOP" "$r" bench "$LOOP_SQL"
  done
done
preload on
qp bench -c "SELECT fencing.acquire('counted'), fencing.release('counted')" >/dev/null
record F_stats counted "" grants "$(qp bench -c 'SELECT grants FROM fencing.stats')" 1
as_user bash "$FENCING_ROOT/tests/scripts/cluster.sh" stop "$pwork" || true
pwork=""

# ======================================================================== C ==
log "C: lock, fenced write, release; sync on/off ($E2E_ROUNDS rounds x ${E2E_SECS}s)"
q bench -c "VACUUM ANALYZE items_a, items_b, items_c, counters"
for r in $(seq 1 "$E2E_ROUNDS"); do
  for sync in on off; do
    for v in $(order "$r" e2e_fencing e2e_redis e2e_advisory); do
      fb C "sync=$sync" "$r" "$v" --conninfo "$(conn bench)" --clients 2 --resources 10000 \
        --seconds "$E2E_SECS" --sync "$sync" --redis-port "$rport"
    done
  done
done

# ======================================================================== B ==
# One table, the variants switch its trigger; all run the same statement
# (the recipe adds its WHERE clause). T grows with every run, so every row is
# always accepted.
log "B: bulk UPDATE of $BULK_ROWS rows ($BULK_ROUNDS rounds; 5 variants in $BULK_FULL_ROUNDS of them)"
q bench <<SQL
CREATE TABLE bulk (id int PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
INSERT INTO bulk SELECT g, 1, 0 FROM generate_series(1, $BULK_ROWS) g;
VACUUM ANALYZE bulk;
UPDATE bulk SET fence_token = 2, v = v + 1;   -- reach the steady state: 2x pages, half free
VACUUM bulk;
SQL
T=10
bulk_setup() {  # bulk_setup VARIANT: the table's triggers for that variant
  q bench -c "SELECT fencing.unprotect('bulk')" -c "DROP TRIGGER IF EXISTS a_plpgsql ON bulk" \
    -c "DROP TRIGGER IF EXISTS a_noop ON bulk" >/dev/null
  case "$1" in
    protected) q bench -c "SELECT fencing.protect('bulk')" >/dev/null ;;
    plpgsql) q bench -c "CREATE TRIGGER a_plpgsql BEFORE UPDATE ON bulk FOR EACH ROW EXECUTE FUNCTION plpgsql_fence()" ;;
    noop_c_trigger) q bench -c "CREATE TRIGGER a_noop BEFORE UPDATE ON bulk FOR EACH ROW EXECUTE FUNCTION bench_noop_trigger()" ;;
  esac
}
for r in $(seq 1 "$BULK_ROUNDS"); do
  variants="unprotected protected plpgsql recipe noop_c_trigger"
  [ "$r" -le "$BULK_FULL_ROUNDS" ] || variants="unprotected protected"
  for v in $(order "$r" $variants); do
    bulk_setup "$v"
    q bench -c "VACUUM bulk"
    T=$((T + 1))
    where=""; [ "$v" = recipe ] && where=" WHERE fence_token < $T"
    timed B_bulk "$v" "rows=$BULK_ROWS" "$r" bench "UPDATE bulk SET fence_token = $T, v = v + 1$where"
  done
done
bulk_setup unprotected

log "B: single-row updates, prepared, 2 clients, 100,000 rows ($SINGLE_ROUNDS rounds x ${SINGLE_SECS}s)"
# The pgbench -M prepared -c 2 workload, run by fencebench (variant
# single_update) so that the backends' CPU per update is measured too.
q bench <<'SQL'
CREATE TABLE single (id int PRIMARY KEY, fence_token bigint NOT NULL, v bigint NOT NULL);
INSERT INTO single SELECT g, 1, 0 FROM generate_series(1, 100000) g;
VACUUM ANALYZE single;
SQL
for r in $(seq 1 "$SINGLE_ROUNDS"); do
  for sync in on off; do
    for v in $(order "$r" unprotected protected noop_c_trigger); do
      q bench -c "SELECT fencing.unprotect('single')" -c "DROP TRIGGER IF EXISTS a_noop ON single" >/dev/null
      case "$v" in
        protected) q bench -c "SELECT fencing.protect('single')" >/dev/null ;;
        noop_c_trigger) q bench -c "CREATE TRIGGER a_noop BEFORE UPDATE ON single FOR EACH ROW EXECUTE FUNCTION bench_noop_trigger()" ;;
      esac
      FB_LABEL="$v" fb B_single "sync=$sync" "$r" single_update --conninfo "$(conn bench)" --clients 2 \
        --resources 100000 --seconds "$SINGLE_SECS" --sync "$sync"
    done
  done
done
q bench -c "SELECT fencing.unprotect('single')" -c "DROP TRIGGER IF EXISTS a_noop ON single" >/dev/null

# ======================================================================== D ==
log "D: contention on one resource (clients: $CONT_CLIENTS)"
for c in $CONT_CLIENTS; do
  for r in 1 2; do
    for v in $(order "$r" hot_fencing hot_bare); do
      fb D_contention "clients=$c" "$r" "$v" --conninfo "$(conn bench)" --clients "$c" --seconds "$CONT_SECS"
    done
  done
done

log "D: trigger cost vs table width (3, 10, 30, 100 columns; $WIDTH_ROWS rows)"
for w in 3 10 30 100; do
  cols=""; for i in $(seq 3 "$w"); do cols="$cols, c$i int NOT NULL DEFAULT $i"; done
  q bench -c "CREATE TABLE w$w (id int PRIMARY KEY, fence_token bigint NOT NULL$cols)" \
    -c "INSERT INTO w$w (id, fence_token) SELECT g, 1 FROM generate_series(1, $WIDTH_ROWS) g" \
    -c "VACUUM ANALYZE w$w" -c "UPDATE w$w SET fence_token = 2" -c "VACUUM w$w"
done
for r in $(seq 1 "$SCALE_ROUNDS"); do
  for w in 3 10 30 100; do
    for v in $(order "$r" unprotected protected); do
      if [ "$v" = protected ]; then q bench -c "SELECT fencing.protect('w$w')" >/dev/null
      else q bench -c "SELECT fencing.unprotect('w$w')" >/dev/null; fi
      q bench -c "VACUUM w$w"
      T=$((T + 1))
      timed D_width "$v" "cols=$w" "$r" bench "UPDATE w$w SET fence_token = $T"
    done
  done
done
q bench -c "DROP TABLE w3, w10, w30, w100"

scale_rows() {  # scale_rows N ROUNDS: protected vs unprotected bulk UPDATE of an N-row table
  local n="$1" rounds="$2" r v
  q bench -c "CREATE TABLE s$n (id int NOT NULL, fence_token bigint NOT NULL, v bigint NOT NULL)" \
    -c "INSERT INTO s$n SELECT g, 1, 0 FROM generate_series(1, $n) g" \
    -c "ALTER TABLE s$n ADD PRIMARY KEY (id)" \
    -c "VACUUM ANALYZE s$n" -c "UPDATE s$n SET fence_token = 2, v = v + 1" -c "VACUUM s$n"
  for r in $(seq 1 "$rounds"); do
    for v in $(order "$r" unprotected protected); do
      if [ "$v" = protected ]; then q bench -c "SELECT fencing.protect('s$n')" >/dev/null
      else q bench -c "SELECT fencing.unprotect('s$n')" >/dev/null; fi
      q bench -c "VACUUM s$n"
      T=$((T + 1))
      timed D_rows "$v" "rows=$n" "$r" bench "UPDATE s$n SET fence_token = $T, v = v + 1"
    done
  done
  q bench -c "DROP TABLE s$n"
}
log "D: trigger cost vs row count ($SCALE_ROWS; $BULK_ROWS from B)"
for n in $SCALE_ROWS; do scale_rows "$n" "$SCALE_ROUNDS"; done

log "D: acquisition latency vs resources ever acquired ($GROWTH_LEVELS)"
# One database per size, each with its own fence state of N resources (bulk
# acquisitions, 1,000 per transaction), so that the sizes can be measured
# interleaved, round by round, like every other comparison.
for level in $GROWTH_LEVELS; do
  q postgres -c "CREATE DATABASE growth_$level"
  q "growth_$level" -c "CREATE EXTENSION fencing"
  for ((from = 0; from < level; from += 100000)); do
    upto=$(( from + 100000 < level ? from + 100000 : level ))
    q "growth_$level" -c "DO \$\$ BEGIN
      FOR b IN 0..$(( (upto - from + 999) / 1000 - 1 )) LOOP
        PERFORM fencing.acquire_xact('r' || g)
           FROM generate_series($from + b * 1000 + 1, least($from + b * 1000 + 1000, $upto)) g;
        COMMIT;
      END LOOP; END \$\$"
  done
  q "growth_$level" -c "VACUUM ANALYZE fencing.fence_state"
  size="$(q "growth_$level" -c "SELECT pg_total_relation_size('fencing.fence_state')::float8 / count(*) FROM fencing.fence_state")"
  record D_disk fence_state "resources=$level" bytes_per_resource "$size" 1
done
levels=($GROWTH_LEVELS)
for r in $(seq 1 "$GROWTH_ROUNDS"); do
  for level in $(order "$r" "${levels[@]}"); do
    for v in $(order "$r" acquire_lat bare_lat); do
      fb D_growth "resources=$level" "$r" "$v" --conninfo "$(conn "growth_$level")" --clients 1 \
        --resources "$level" --seconds "$GROWTH_SECS"
    done
  done
done

# ======================================================================== S ==
log "S: the supervisor: its CPU with 10,000 leased holds; cycles with a lease"
CYCLE_SECS="$SUP_SECS" SAMPLE_SECS="$SUP_SAMPLE_SECS" bash "$BENCH_DIR/supervisor.sh" "$(conn bench)" "$RESULTS" || log "the supervisor benchmark failed"

# 10^7 rows last, only when it fits what is left of the budget: estimated
# from the 10^6 runs of B.
if [ "$profile" = full ]; then
  per_run="$(awk -F, '$1=="B_bulk" && $4=="seconds" && ($2=="unprotected" || $2=="protected") {s+=$5; n++} END {if (n) printf "%d", s/n + 1; else print 999}' "$CSV")"
  # One round (unprotected and protected), the warm-up UPDATE, the load and
  # the VACUUMs: about 38 times a 10^6-row run (measured: 184 s when a 10^6
  # run took 4.6 s); then the report.
  need=$(( per_run * 38 + 15 ))
  if [ "$(time_left)" -gt "$need" ]; then
    log "D: trigger cost at 10,000,000 rows (about ${need}s)"
    scale_rows 10000000 1
  else
    log "D: skipping 10,000,000 rows (needs about ${need}s, $(time_left)s left)"
  fi
fi

log "all benchmarks done in $(elapsed)s"
make_report 0
