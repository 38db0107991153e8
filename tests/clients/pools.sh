#!/usr/bin/env bash
# What connection pools do to fencing's session-scoped locks, as
# docs/clients.md states: SQLAlchemy's QueuePool and asyncpg's pool
# (pools_client.py), node-postgres's Pool and postgres.js
# (node/pools_client.js). Uses the caller's libpq environment.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/node/install.sh"
rc=0
timeout --kill-after=5 60 /usr/bin/python3 "$here/pools_client.py" || rc=1
timeout --kill-after=5 60 node "$dir/pools_client.js" || rc=1
exit "$rc"
