#!/usr/bin/env bash
# The client scenario in Python with asyncpg (asyncpg_client.py; Debian's
# python3-asyncpg). Uses the caller's libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec timeout --kill-after=5 60 /usr/bin/python3 "$here/asyncpg_client.py"
