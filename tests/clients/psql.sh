#!/usr/bin/env bash
# The client scenario in psql (psql_client.sql): acquire, fenced write, stale
# write rejected with SQLSTATE 23T01, tokens above 2^53 kept exactly.
# Uses the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE) of the caller.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
psql -X -v ON_ERROR_STOP=1 -f "$here/psql_client.sql"
