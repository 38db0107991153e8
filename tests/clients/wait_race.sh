#!/usr/bin/env bash
# A wait that times out at the very moment the holder releases must not leave
# the lock with the waiter (the lock manager may already have granted it).
# Forces the race by stopping the waiting backend past its wait, releasing
# the lock while it is stopped, then resuming it.
set -euo pipefail
: "${PGHOST:?}" "${PGPORT:?}"
export PGUSER="${PGUSER:-postgres}" PGDATABASE="${PGDATABASE:-postgres}"
psql -XAtq -c "CREATE EXTENSION IF NOT EXISTS fencing"
tmp="$(mktemp -d "${FENCING_TMP:-/tmp}/wait_race.XXXXXX")"
trap 'exec 3>&- 4>&- 2>/dev/null; kill -CONT "${bpid:-0}" 2>/dev/null || true; wait || true; rm -rf "$tmp"' EXIT
mkfifo "$tmp/a" "$tmp/b"
psql -XAt -v ON_ERROR_STOP=0 < "$tmp/a" > "$tmp/a.out" 2>&1 & exec 3>"$tmp/a"
psql -XAt -v ON_ERROR_STOP=0 < "$tmp/b" > "$tmp/b.out" 2>&1 & exec 4>"$tmp/b"
fail() { echo "FAIL: $*"; echo "== A:"; cat "$tmp/a.out"; echo "== B:"; cat "$tmp/b.out"; exit 1; }
wait_for() { local f="$1" pat="$2" i; for i in $(seq 1 100); do grep -q "$pat" "$f" && return 0; sleep 0.1; done; fail "timed out waiting for '$pat' in $f"; }

echo "SELECT 'A|' || pg_backend_pid() || '|' || fencing.acquire('race:x');" >&3
echo "SELECT 'B|' || pg_backend_pid();" >&4
wait_for "$tmp/a.out" '^A|'; wait_for "$tmp/b.out" '^B|'
bpid="$(grep '^B|' "$tmp/b.out" | cut -d'|' -f2)"
told="$(grep '^A|' "$tmp/a.out" | cut -d'|' -f3)"
echo "SELECT 'B got ' || fencing.acquire('race:x', wait => '1s');" >&4
for i in $(seq 1 50); do   # B is waiting on the lock
  [ "$(psql -XAtc "SELECT count(*) FROM fencing.locks WHERE resource = 'race:x' AND NOT granted")" = 1 ] && break
  sleep 0.1
done
kill -STOP "$bpid"; sleep 1.5              # B's wait expires while it is stopped
echo "SELECT 'A released ' || fencing.release('race:x');" >&3
wait_for "$tmp/a.out" '^A released'         # the lock manager hands the lock to B
kill -CONT "$bpid"
wait_for "$tmp/b.out" 'could not acquire fencing lock'
sleep 0.3
held="$(psql -XAtc "SELECT count(*) FROM fencing.locks WHERE resource = 'race:x'")"
[ "$held" = 0 ] || fail "B's failed acquire left the lock held ($held rows in fencing.locks)"
c="$(psql -XAtc "SELECT fencing.try_acquire_xact('race:x') IS NOT NULL")"
[ "$c" = t ] || fail "another session cannot take the resource"
echo "SELECT 'B again|' || fencing.acquire('race:x');" >&4
wait_for "$tmp/b.out" '^B again|'
tnew="$(grep '^B again|' "$tmp/b.out" | cut -d'|' -f2)"
[ "$(psql -XAtc "SELECT $tnew > $told")" = t ] || fail "B's next token $tnew is not greater than A's $told"
state="$(psql -XAt -v ON_ERROR_STOP=0 -c "\\set VERBOSITY sqlstate" -c "SELECT fencing.validate('race:x', $told)" 2>&1 | tail -1 || true)"
[ "$state" = "ERROR:  23T01" ] || fail "A's released token still validates: $state"
echo "SELECT fencing.release('race:x');" >&4
echo "ok: a timed-out wait leaves no lock; next token $tnew > $told; A's token is stale"
