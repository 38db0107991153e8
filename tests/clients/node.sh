#!/usr/bin/env bash
# The client scenario in Node.js with node-postgres (node/client.js), the pg
# package pinned in node/package-lock.json. Installs it with `npm ci` when
# node_modules is missing (in place, or in FENCING_TMP when this tree is not
# writable). Uses the caller's libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$here/node"
if [ ! -d "$dir/node_modules" ] && [ ! -w "$dir" ]; then
  dir="${FENCING_TMP:-$(mktemp -d)}/node"
  mkdir -p "$dir"
  cp "$here/node/package.json" "$here/node/package-lock.json" "$here/node/client.js" "$dir/"
fi
if [ ! -d "$dir/node_modules" ]; then
  # npm's cache goes to $HOME/.npm, or to the scratch dir when HOME is not ours.
  if [ -z "${HOME:-}" ] || [ ! -w "${HOME:-/nonexistent}" ]; then
    export npm_config_cache="${FENCING_TMP:-$dir}/npm-cache"
  fi
  echo "npm ci (pg, pinned in package-lock.json)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
exec node "$dir/client.js"
