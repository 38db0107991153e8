#!/usr/bin/env bash
# The client scenario in Python with psycopg2 (Debian's python3-psycopg2, so
# Debian's own python3). Uses the caller's libpq environment (PGHOST, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec /usr/bin/python3 "$here/python_client.py"
