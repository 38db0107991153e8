#!/usr/bin/env bash
# The client scenario in Go with pgx v4 (go/main.go; Debian's golang-go and
# golang-github-jackc-pgx-v4-dev). No module proxy: built in GOPATH mode
# against Debian's /usr/share/gocode, with the build cache in the scratch dir
# (FENCING_TMP, or a temp dir). Uses the caller's libpq environment.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${FENCING_TMP:-}"
if [ -z "$out" ]; then out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
export GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE="$out/go-cache" GOTMPDIR="$out" HOME="${HOME:-$out}"
export GOFLAGS= GOTOOLCHAIN=local
(cd "$here/go" && timeout 180 go build -o "$out/go_client" .)
timeout --kill-after=5 60 "$out/go_client"
