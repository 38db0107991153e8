#!/usr/bin/env bash
# The client scenario with the Django ORM over psycopg2 (django_client.py;
# Debian's python3-django, settings configured in code). Uses the caller's
# libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec timeout --kill-after=5 60 /usr/bin/python3 "$here/django_client.py"
