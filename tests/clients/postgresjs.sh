#!/usr/bin/env bash
# The client scenario in Node.js with postgres.js (node/postgresjs_client.js),
# the postgres package pinned in node/package-lock.json (installed by
# node/install.sh). Uses the caller's libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/node/install.sh"
exec timeout --kill-after=5 60 node "$dir/postgresjs_client.js"
