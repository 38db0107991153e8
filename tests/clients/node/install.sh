#!/usr/bin/env bash
# Sourced by ../node.sh and ../postgresjs.sh: sets $dir to a directory with
# the client programs and node_modules of the packages pinned in
# package-lock.json (pg, postgres), running `npm ci` when node_modules is
# missing (in place, or in FENCING_TMP when this tree is not writable).
here_node="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$here_node"
if [ ! -d "$dir/node_modules" ] && [ ! -w "$dir" ]; then
  dir="${FENCING_TMP:-$(mktemp -d)}/node"
  mkdir -p "$dir"
  cp "$here_node"/package.json "$here_node"/package-lock.json "$here_node"/*.js "$dir/"
fi
if [ ! -d "$dir/node_modules" ]; then
  # npm's cache goes to $HOME/.npm, or to the scratch dir when HOME is not ours.
  if [ -z "${HOME:-}" ] || [ ! -w "${HOME:-/nonexistent}" ]; then
    export npm_config_cache="${FENCING_TMP:-$dir}/npm-cache"
  fi
  echo "npm ci (pg and postgres, pinned in package-lock.json)"
  (cd "$dir" && timeout 180 npm ci --no-audit --no-fund --loglevel=error)
fi
