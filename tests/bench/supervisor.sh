#!/usr/bin/env bash
# supervisor.sh CONNINFO RESULTS_DIR: what the supervisor costs (make bench).
#
#  1. Its CPU while 100 sessions hold 100 leased locks each (10,000 leased
#     holds, leases of an hour, so none ends): the supervisor samples every
#     leased backend every 125 ms. Measured from /proc/PID/stat over 10 s
#     (SAMPLE_SECS), as a share of one core, against the same time with no
#     lease held.
#  2. acquire + release with a lease, against the same cycle without one
#     and against bare advisory locks, 2 pgbench clients, 3 rotated rounds of
#     5 s each (CYCLE_SECS), medians: ratios in the same run (not timed tests).
# Writes RESULTS_DIR/supervisor.md and prints it.
set -euo pipefail
conn="$1"
results="$2"
PGBENCH="${PGBENCH:-$(dirname "$(command -v psql)")/pgbench}"
q() { psql -X -q -At -d "$conn" "$@"; }

sup_pid="$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'fencing supervisor'")"
[ -n "$sup_pid" ] || { echo "no fencing supervisor (is fencing in shared_preload_libraries?)" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz="$(getconf CLK_TCK)"
cpu_share() {  # cpu_share SECONDS: the supervisor's CPU over SECONDS, in % of one core
  local a b
  a="$(ticks "$sup_pid")"; sleep "$1"; b="$(ticks "$sup_pid")"
  awk -v a="$a" -v b="$b" -v hz="$hz" -v s="$1" 'BEGIN { printf "%.2f", 100 * (b - a) / hz / s }'
}

SAMPLE_SECS="${SAMPLE_SECS:-10}"
idle_cpu="$(cpu_share "$SAMPLE_SECS")"
holders=()
for s in $(seq 1 100); do
  { echo "SELECT count(fencing.acquire('sup:$s:' || g, lease => '1 h')) FROM generate_series(1, 100) g;"; sleep 40; } |
    psql -X -q -At -d "$conn" >/dev/null 2>&1 &
  holders+=($!)
done
for _ in $(seq 1 600); do
  n="$(q -c "SELECT count(*) FROM fencing.locks WHERE resource LIKE 'sup:%' AND granted")"
  [ "$n" -ge 10000 ] && break
  sleep 0.1
done
held="$n"
busy_cpu="$(cpu_share "$SAMPLE_SECS")"
kill "${holders[@]}" 2>/dev/null || true
wait 2>/dev/null || true

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
printf '%s\n' '\set r random(1, 10000)' "SELECT fencing.acquire('cyc:' || :r, lease => '30 s');" "SELECT fencing.release('cyc:' || :r);" > "$dir/lease.sql"
printf '%s\n' '\set r random(1, 10000)' "SELECT fencing.acquire('cyc:' || :r);" "SELECT fencing.release('cyc:' || :r);" > "$dir/plain.sql"
printf '%s\n' '\set r random(1, 10000)' 'SELECT pg_advisory_lock(:r);' 'SELECT pg_advisory_unlock(:r);' > "$dir/bare.sql"
tps() { "$PGBENCH" -n -c 2 -j 2 -T "${CYCLE_SECS:-5}" -f "$dir/$1.sql" -d "$conn" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -n 1; }
declare -A runs=()
for r in 1 2 3; do
  case "$r" in 1) order="lease plain bare" ;; 2) order="plain bare lease" ;; *) order="bare lease plain" ;; esac
  for v in $order; do runs[$v]+="$(tps "$v") "; done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
lease_tps="$(echo "${runs[lease]}" | median)"
plain_tps="$(echo "${runs[plain]}" | median)"
bare_tps="$(echo "${runs[bare]}" | median)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

mkdir -p "$results"
{
  echo "# The supervisor's cost"
  echo
  echo "Measured by \`tests/bench/supervisor.sh\` (part of \`make bench\`) on $(date -u +%Y-%m-%d), $(nproc) cores."
  echo
  echo "| what | value |"
  echo "|---|---|"
  echo "| supervisor CPU, no lease held ($SAMPLE_SECS s) | ${idle_cpu}% of one core |"
  echo "| supervisor CPU, $held leased holds in 100 sessions ($SAMPLE_SECS s) | ${busy_cpu}% of one core |"
  echo "| acquire + release with a lease, cycles/s (median of 3) | $lease_tps |"
  echo "| acquire + release without a lease | $plain_tps |"
  echo "| bare advisory lock + unlock | $bare_tps |"
  echo "| leased / plain | $(ratio "$lease_tps" "$plain_tps")x |"
  echo "| leased / bare advisory | $(ratio "$lease_tps" "$bare_tps")x |"
} > "$results/supervisor.md"
cat "$results/supervisor.md"
