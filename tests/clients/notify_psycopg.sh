#!/usr/bin/env bash
# Listening for lock events in Python with psycopg 3 (notify_psycopg_client.py;
# Debian's python3-psycopg). Uses the caller's libpq environment (PGHOST,
# PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec timeout --kill-after=5 60 /usr/bin/python3 "$here/notify_psycopg_client.py"
