#!/usr/bin/env bash
# The client scenario in Python with psycopg2 (python_client.py; Debian's
# python3-psycopg2, so Debian's own python3). Uses the caller's libpq
# environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec timeout --kill-after=5 60 /usr/bin/python3 "$here/python_client.py"
