#!/usr/bin/env bash
# fencing behind PgBouncer in transaction pooling mode: starts Debian's
# pgbouncer on a free loopback port in front of the cluster of the caller's
# libpq environment (PGHOST, PGPORT, PGUSER=postgres, PGDATABASE) with a pool
# of POOL_SIZE server connections, and runs pgbouncer_load.py through it (40
# clients doing BEGIN; acquire_xact; fenced UPDATE; COMMIT).
# Runs as the unprivileged user (pgbouncer refuses root): as root it re-runs
# itself as $FENCING_USER (fencing_run).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ "$(id -u)" -eq 0 ]; then
  exec runuser -u "${FENCING_USER:-fencing_run}" -- bash "$here/pgbouncer.sh" "$@"
fi
POOL_SIZE=3
pgbouncer="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
dir="${FENCING_TMP:-}"
if [ -z "$dir" ]; then dir="$(mktemp -d)"; cleanup_dir=1; else cleanup_dir=0; fi
dir="$dir/pgbouncer"
mkdir -p "$dir"
port="$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

echo "\"${PGUSER:-postgres}\" \"\"" > "$dir/userlist.txt"
cat > "$dir/pgbouncer.ini" <<INI
[databases]
* = host=${PGHOST:-127.0.0.1} port=${PGPORT:-5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = ${PGUSER:-postgres}
pool_mode = transaction
default_pool_size = $POOL_SIZE
min_pool_size = 0
reserve_pool_size = 0
max_db_connections = $POOL_SIZE
max_client_conn = 200
server_reset_query =
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI

"$pgbouncer" "$dir/pgbouncer.ini" >"$dir/stdout.log" 2>&1 &
bouncer=$!
stop() {
  kill "$bouncer" 2>/dev/null || true
  wait "$bouncer" 2>/dev/null || true
  [ "$cleanup_dir" -eq 1 ] && rm -rf "$(dirname "$dir")"
  return 0
}
trap stop EXIT
for _ in $(seq 100); do
  psql -X -q -h 127.0.0.1 -p "$port" -d pgbouncer -c 'SHOW VERSION' >/dev/null 2>&1 && break
  kill -0 "$bouncer" 2>/dev/null || { echo "pgbouncer did not start:"; cat "$dir/stdout.log" "$dir/pgbouncer.log" 2>/dev/null; exit 1; }
  sleep 0.1
done
echo "pgbouncer $("$pgbouncer" --version | head -n 1 | awk '{print $2}') on 127.0.0.1:$port, transaction pooling, pool size $POOL_SIZE"
/usr/bin/python3 "$here/pgbouncer_load.py" "$port" "$POOL_SIZE"
