#!/usr/bin/env bash
# demo.sh -- `make demo`: the settlement-batch story, with real processes.
#
# On a throwaway cluster (temp dir, unprivileged OS user, free loopback port)
# two C++ worker processes (tests/demo/worker.cpp, libpq) race to summarise
# settlement batch 7 (40,000 transactions, tests/demo/setup.sql):
#
#   fenced run   worker A takes settlement:7 with fencing.acquire and a 2 s
#                lease, reads the batch, and is frozen with SIGSTOP (a
#                stop-the-world pause) for longer than its lease. The server
#                ends A's lock session when the lease runs out; worker B, waiting
#                in fencing.acquire, gets the lock with a greater token and
#                writes its summary. A is resumed with SIGCONT and writes its
#                stale summary through its separate storage connection: the
#                table, protected by fencing.protect, rejects it (23T01).
#   control run  the same story with a classic timed lock (Redis' SET NX PX)
#                and an unprotected table: A's stale summary silently
#                overwrites B's.
#
# Exit status 0 only if the fenced run kept B's summary and the control run
# showed the overwrite. As root it installs missing Debian packages and runs
# the cluster as the unprivileged user; as a developer with the packages
# installed it runs as oneself (the extension must be installed, or sudo -n
# must be able to install it).
# FENCING_KEEP_WORKDIR=1 keeps the temp dir (it is always kept on failure).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

DEMO_PACKAGES=("${BASE_PACKAGES[@]}" python3)
LEASE_MS=2000     # worker's lease, and the timed lock's TTL in the control run
FREEZE_MS=3500    # A stays frozen at least this long (longer than the lease)
BATCH=7
RESOURCE="settlement:$BATCH"

# Nothing of the caller's libpq environment leaks in.
for v in $(compgen -e); do
  case "$v" in PG*) unset "$v" ;; esac
done

say() { printf '[%s] demo      %s\n' "$(date +%H:%M:%S.%3N)" "$*"; }
title() { printf '\n== %s ==\n' "$*"; }
now_ms() { date +%s%3N; }

# install_extension: builds and installs the extension. A developer without
# root or sudo who installed it before gets a warning and the installed one.
install_extension() {
  if [ "$(id -u)" -eq 0 ]; then build_and_install; return; fi
  if build_and_install 2>/dev/null; then return; fi
  local share
  share="$("$PGBIN/pg_config" --sharedir)/extension"
  if [ -f "$share/fencing.control" ] && cmp -s "$FENCING_ROOT/sql/fencing--1.0.sql" "$share/fencing--1.0.sql"; then
    log "could not install fencing (no sudo): using the installed one, which may be older than this tree"
  else
    log "fencing is not installed: run 'make install' as root first"
    return 1
  fi
}

ensure_packages "${DEMO_PACKAGES[@]}"
ensure_user
install_extension

work="$(make_workdir)"
cluster="$work/cluster"
mkdir -p "$cluster"
[ "$(id -u)" -eq 0 ] && chown "$FENCING_USER" "$cluster"
# The unprivileged user may not be able to read the checkout (a directory
# only root can read): it runs a copy of the cluster script.
cp "$FENCING_ROOT/tests/scripts/cluster.sh" "$work/cluster.sh"
chmod 755 "$work/cluster.sh"
pids=()
ok=0

cleanup() {
  local p
  for p in "${pids[@]}"; do
    if kill -0 "$p" 2>/dev/null; then kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; fi
  done
  as_user bash "$work/cluster.sh" stop "$cluster" || true
  if [ "$ok" -eq 1 ] && [ "${FENCING_KEEP_WORKDIR:-0}" != 1 ]; then
    rm -rf "$work"
  else
    echo "(logs kept in $work)" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "compiling the worker (tests/demo/worker.cpp)"
g++ -std=c++17 -O2 -Wall -Wextra -I"$("$PGBIN/pg_config" --includedir)" \
    -o "$work/worker" "$FENCING_ROOT/tests/demo/worker.cpp" -L"$("$PGBIN/pg_config" --libdir)" -lpq

port="$(free_port)"
log "starting a throwaway cluster on 127.0.0.1:$port"
as_user bash "$work/cluster.sh" start "$cluster" "$port"
PSQL=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
"${PSQL[@]}" -d postgres -c 'CREATE DATABASE settlement' >/dev/null
PSQL+=(-d settlement)
q() { "${PSQL[@]}" -At -F '|' -c "$1"; }
log "loading batch $BATCH: 40,000 transactions (tests/demo/setup.sql)"
"${PSQL[@]}" -f "$FENCING_ROOT/tests/demo/setup.sql" >/dev/null
conninfo="host=127.0.0.1 port=$port user=postgres dbname=settlement"

# start_worker NAME MODE TABLE THINK_MS [READY_FILE]: starts a worker in the background,
# its output both on the terminal and in $work/NAME-MODE.log; sets $worker_pid.
start_worker() {
  local name="$1" mode="$2" table="$3" think="$4" ready="${5:-}" args=()
  args=(--think-ms "$think")
  [ -n "$ready" ] && args+=(--ready-file "$ready")
  "$work/worker" --name "$name" --mode "$mode" --conninfo "$conninfo" --batch "$BATCH" --table "$table" \
      --lease-ms "$LEASE_MS" --wait-ms 30000 --log "$work/$name-$mode.log" "${args[@]}" &
  worker_pid=$!
  pids+=("$worker_pid")
}

# run_story MODE TABLE: one replay of the story; sets rc_a and rc_b.
run_story() {
  local mode="$1" table="$2" ready="$work/A-$1.ready" pid_a pid_b stopped t0 i frozen_ms
  rm -f "$ready"
  start_worker A "$mode" "$table" 800 "$ready"
  pid_a=$worker_pid
  say "started worker A (pid $pid_a)"
  for ((i = 0; i < 1000; i++)); do
    [ -e "$ready" ] && break
    kill -0 "$pid_a" 2>/dev/null || { say "worker A ended early"; rc_a=1; rc_b=1; return; }
    sleep 0.02
  done
  kill -STOP "$pid_a"
  stopped=$(now_ms)
  if grep -q 'writing the summary' "$work/A-$mode.log"; then
    say "the pause came too late: worker A was already writing (machine too busy?)"
  fi
  say "SIGSTOP worker A: it freezes before writing, as in a long stop-the-world GC pause"
  q "INSERT INTO demo_transactions (batch_id, merchant, amount_cents) VALUES ($BATCH, 'late-refund', -12345)" >/dev/null
  say "a late refund (-123.45) arrives in batch $BATCH; A has already read the batch"
  start_worker B "$mode" "$table" 200
  pid_b=$worker_pid
  say "started worker B (pid $pid_b): it waits for the lock"
  sleep 0.3
  if [ "$mode" = fenced ]; then
    q "SELECT resource, coalesce(token::text, '-'), granted, application_name, coalesce(to_char(expires_at, 'HH24:MI:SS.MS'), '-')
         FROM fencing.locks WHERE resource = '$RESOURCE' ORDER BY granted DESC" |
    while IFS='|' read -r r tok granted app exp; do
      if [ "$granted" = t ]; then
        say "fencing.locks: $r held by $app, token $tok, lease runs out at $exp"
      else
        say "fencing.locks: $r awaited by $app"
      fi
    done
  else
    q "SELECT name, owner, to_char(expires_at, 'HH24:MI:SS.MS') FROM demo_plain_locks" |
    while IFS='|' read -r r owner exp; do say "demo_plain_locks: $r owned by $owner until $exp"; done
  fi
  rc_b=0
  wait "$pid_b" || rc_b=$?
  t0=$(now_ms)
  if [ $((t0 - stopped)) -lt "$FREEZE_MS" ]; then
    sleep "$(awk -v ms=$((FREEZE_MS - (t0 - stopped))) 'BEGIN { printf "%.3f", ms / 1000 }')"
  fi
  frozen_ms=$(( $(now_ms) - stopped ))
  say "SIGCONT worker A after a pause of $((frozen_ms / 1000)).$(( (frozen_ms % 1000) / 100 )) s (its lease: $((LEASE_MS / 1000)) s)"
  kill -CONT "$pid_a"
  rc_a=0
  wait "$pid_a" || rc_a=$?
  say "worker A exited with status $rc_a, worker B with status $rc_b"
}

correct_total() { q "SELECT count(*) || '|' || sum(amount_cents) FROM demo_transactions WHERE batch_id = $BATCH"; }
final_row() {
  q "SELECT coalesce(written_by, '-'), coalesce(row_count::text, '-'), coalesce(total_cents::text, '-'),
            coalesce(fence_token::text, '(none)'), coalesce(to_char(written_at, 'HH24:MI:SS.MS'), '-')
       FROM $1 WHERE batch_id = $BATCH"
}
# money CENTS: 1234567 -> 12,345.67
money() {
  local c="$1" sign="" whole out=""
  case "$c" in ''|*[!0-9-]*) echo "$c"; return ;; esac
  [ "${c#-}" != "$c" ] && { sign="-"; c="${c#-}"; }
  whole=$((c / 100))
  while [ "$whole" -ge 1000 ]; do out=",$(printf '%03d' $((whole % 1000)))$out"; whole=$((whole / 1000)); done
  printf '%s%s%s.%02d' "$sign" "$whole" "$out" $((c % 100))
}
# token_in LOG: the first fence token a worker's log names.
token_in() { grep -o 'fence token [0-9]*' "$1" | head -n 1 | awk '{print $3}'; }

# ---- the fenced run ---------------------------------------------------------------
title "Fenced run: fencing.acquire with a $((LEASE_MS / 1000)) s lease; settlement_batches protected by fencing.protect"
run_story fenced settlement_batches
fenced_rc_a=$rc_a fenced_rc_b=$rc_b
IFS='|' read -r fenced_count fenced_sum <<<"$(correct_total)"
IFS='|' read -r f_by f_rows f_total f_token f_at <<<"$(final_row settlement_batches)"
current_token="$(q "SELECT fencing.current('$RESOURCE')")"
token_a="$(token_in "$work/A-fenced.log")"
token_b="$(token_in "$work/B-fenced.log")"

# ---- the control run --------------------------------------------------------------
title "Control run: a timed lock (SET NX PX $LEASE_MS) and an unprotected table, no fencing"
q "DELETE FROM demo_transactions WHERE merchant = 'late-refund'" >/dev/null
say "reset: the late refund is removed again; the same story replays"
run_story plain settlement_batches_unfenced
plain_rc_a=$rc_a plain_rc_b=$rc_b
IFS='|' read -r plain_count plain_sum <<<"$(correct_total)"
IFS='|' read -r p_by p_rows p_total p_token p_at <<<"$(final_row settlement_batches_unfenced)"

# ---- side by side -----------------------------------------------------------------
title "Batch $BATCH after each run (the correct summary: $plain_count transactions, total $(money "$plain_sum"))"
row() { printf '  %-14s %-34s %s\n' "$1" "$2" "$3"; }
row "" "fenced run" "control run (no fencing)"
row "table" "settlement_batches" "settlement_batches_unfenced"
row "written_by" "$f_by" "$p_by"
row "transactions" "$f_rows" "$p_rows"
row "total" "$(money "$f_total")" "$(money "$p_total")"
row "fence_token" "$f_token" "$p_token"
row "written_at" "$f_at" "$p_at"

fenced_ok=1 control_overwrote=1
f_verdict="correct: B's summary kept"
p_verdict="WRONG: A's stale summary overwrote B's"
if ! { [ "$fenced_rc_a" -eq 0 ] && [ "$fenced_rc_b" -eq 0 ] && [ "$f_by" = B ] &&
       [ "$f_rows" = "$fenced_count" ] && [ "$f_total" = "$fenced_sum" ] && [ "$f_token" = "$current_token" ] &&
       [ -n "$token_a" ] && [ "$f_token" = "$token_b" ] && [ "$token_b" -gt "$token_a" ] &&
       grep -q 'SQLSTATE 23T01' "$work/A-fenced.log"; }; then
  fenced_ok=0; f_verdict="UNEXPECTED (see the log above)"
fi
if ! { [ "$plain_rc_a" -eq 0 ] && [ "$plain_rc_b" -eq 0 ] && [ "$p_by" = A ] &&
       [ "$p_rows" != "$plain_count" ] && [ "$p_total" != "$plain_sum" ] &&
       grep -q 'wrote the summary' "$work/B-plain.log"; }; then
  control_overwrote=0; p_verdict="UNEXPECTED: no overwrite (see the log above)"
fi
row "verdict" "$f_verdict" "$p_verdict"
echo
if [ "$fenced_ok" -eq 1 ] && [ "$control_overwrote" -eq 1 ]; then
  echo "Worker B's token $token_b is greater than worker A's $token_a."
  echo "With fencing, the database itself refused the write of the worker whose lease had run out."
  echo "Without it, the same pause silently replaced the correct summary with a stale one."
  ok=1
  exit 0
fi
echo "demo FAILED: fenced run ok: $fenced_ok, control run showed the overwrite: $control_overwrote"
exit 1
