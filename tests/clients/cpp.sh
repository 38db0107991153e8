#!/usr/bin/env bash
# The client scenario in C++ with libpq (cpp_client.cpp): compiles it into a
# scratch dir (FENCING_TMP, or a temp dir) and runs it. Uses the caller's
# libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pg_config="${PG_CONFIG:-$(command -v pg_config || echo /usr/lib/postgresql/15/bin/pg_config)}"
out="${FENCING_TMP:-}"
if [ -z "$out" ]; then out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
g++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$("$pg_config" --includedir)" \
    -o "$out/cpp_client" "$here/cpp_client.cpp" -L"$("$pg_config" --libdir)" -lpq
timeout --kill-after=5 60 "$out/cpp_client"
