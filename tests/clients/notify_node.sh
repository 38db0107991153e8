#!/usr/bin/env bash
# Listening for lock events in Node.js with node-postgres (node/notify_client.js,
# the pg package pinned in node/package-lock.json). Uses the caller's libpq
# environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/node/install.sh"
exec timeout --kill-after=5 60 node "$dir/notify_client.js"
