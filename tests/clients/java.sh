#!/usr/bin/env bash
# The client scenario in Java with plain JDBC over pgjdbc (java/FencingClient.java;
# Debian's libpostgresql-jdbc-java and default-jdk-headless): compiled into
# the scratch dir (FENCING_TMP, or a temp dir) and run. Uses the caller's
# libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
jar=/usr/share/java/postgresql.jar
out="${FENCING_TMP:-}"
if [ -z "$out" ]; then out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out/classes"
timeout 120 javac -d "$out/classes" -cp "$jar" "$here/java/FencingClient.java"
timeout --kill-after=5 60 java -cp "$out/classes:$jar" FencingClient
