#!/usr/bin/env bash
# The client scenario with the SQLAlchemy ORM over psycopg2
# (sqlalchemy_client.py; Debian's python3-sqlalchemy). Uses the caller's
# libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec timeout --kill-after=5 60 /usr/bin/python3 "$here/sqlalchemy_client.py"
