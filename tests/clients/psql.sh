#!/usr/bin/env bash
# The client scenario in psql (psql_client.sql): acquire, fenced write, stale
# write rejected with SQLSTATE 23T01 (with DETAIL and HINT), acquire_xact,
# use(), tokens above 2^53 kept exactly; then a leased lock whose silent
# holder the server disconnects with the FATAL error naming the lease.
# Uses the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE) of the caller.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="${FENCING_TMP:-}"
if [ -z "$tmp" ]; then tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT; fi
mkdir -p "$tmp"
fail=0
timeout 60 psql -X -v ON_ERROR_STOP=1 -f "$here/psql_client.sql" 2> "$tmp/psql_stderr.txt" || fail=1
cat "$tmp/psql_stderr.txt"
if grep -q 'ERROR:  23T01: stale fence token for relation "psql_ledger"' "$tmp/psql_stderr.txt" &&
   grep -q '^DETAIL:  Incoming token' "$tmp/psql_stderr.txt" && grep -q '^HINT:  ' "$tmp/psql_stderr.txt"; then
  echo "ok - the stale write's error shows SQLSTATE 23T01, DETAIL and HINT"
else
  echo "FAILED - the stale write's error shows SQLSTATE 23T01, DETAIL and HINT"; fail=1
fi

# Lease expiry: psql holds a leased lock, stays silent 2.5 s, and its next
# statement finds the connection ended (psql exits with status 2).
rc=0
timeout 30 psql -X -q -v ON_ERROR_STOP=1 > "$tmp/lease.txt" 2>&1 <<'SQL' || rc=$?
SELECT fencing.acquire('clients:psql', lease => '1 s') AS t5 \gset
\! sleep 2.5
SELECT 'still connected';
SQL
if [ "$rc" -eq 2 ] && grep -q 'FATAL:  terminating connection because its fencing lease of 1000 ms expired' "$tmp/lease.txt"; then
  echo "ok - the expired lease ended psql's connection (exit status 2, the FATAL error names the lease)"
else
  echo "FAILED - the expired lease ended psql's connection (exit status $rc)"; cat "$tmp/lease.txt"; fail=1
fi
out="$(psql -XAtq -c "SELECT fencing.acquire('clients:psql')" -c "SELECT fencing.release('clients:psql')")"
t6="${out%%$'\n'*}"
[ -n "$t6" ] && echo "ok - reconnected: acquired again ($t6)" || { echo "FAILED - acquired again"; fail=1; }
[ "$fail" -eq 0 ] && echo "psql: all checks passed"
exit "$fail"
