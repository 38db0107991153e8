#!/usr/bin/env bash
# cluster.sh start DIR PORT [conf lines...] | stop DIR
# Runs as the unprivileged user. A throwaway cluster on 127.0.0.1:PORT with a
# superuser "postgres", trust authentication on loopback only.
set -euo pipefail
cmd="$1"; dir="$2"
case "$cmd" in
  start)
    port="$3"; shift 3
    initdb -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1
    {
      echo "listen_addresses = '127.0.0.1'"
      echo "port = $port"
      echo "unix_socket_directories = '$dir'"
      echo "fsync = on"
      echo "max_connections = 200"
      echo "max_locks_per_transaction = 256"
      echo "max_wal_senders = 4"
      echo "wal_level = replica"
      echo "log_min_messages = warning"
      echo "logging_collector = off"
      # leases and lock-delays need the supervisor
      echo "shared_preload_libraries = 'fencing'"
      for line in "$@"; do echo "$line"; done
    } >> "$dir/data/postgresql.conf"
    pg_ctl -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    ;;
  stop)
    [ -d "$dir/data" ] && pg_ctl -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
    ;;
esac
