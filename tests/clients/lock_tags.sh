#!/usr/bin/env bash
# One definition of the lock-tag numbers: src/pg/lock_tags.hpp defines them,
# the extension scripts name the constant beside every number they write
# (tests/scripts/check_lock_tags.sh), and the build refuses a tree where the
# two disagree before it compiles anything. Checks, on copies of the tree:
#   - the tree as it is passes, and `make` builds;
#   - a header whose resource tag changed fails the build, naming the
#     constant, and nothing is compiled;
#   - a script number that differs from its constant, a script number that
#     names no constant, and a stale number in the docs each fail the check;
# and, on the running server, that fencing.locks shows the module's lock.
set -euo pipefail
root="${FENCING_ROOT:?}"
tmp="${FENCING_TMP:-}"
if [ -z "$tmp" ]; then tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT; fi
mkdir -p "$tmp"
fail=0
# Numbers of fencing's range that no constant has (written as expressions, so
# that this file holds no such number itself).
changed=$((0x7E0A)) other=$((0x7E0C))
ok() { echo "ok - $1"; }
bad() { echo "FAILED - $1"; fail=1; }

# copy NAME: a copy of what the build reads, in $tmp/NAME.
copy() {
  local d="$tmp/$1"
  rm -rf "$d"
  mkdir -p "$d/tests/scripts" "$d/sql" "$d/docs"
  cp -r "$root/src" "$d/"
  rm -f "$d"/src/*/*.o "$d"/src/*/*.bc
  rm -rf "$d"/src/*/.deps
  cp "$root/Makefile" "$root/fencing.control" "$root/README.md" "$d/"
  cp "$root"/sql/fencing.sql "$root"/sql/fencing--*.sql "$d/sql/"
  cp "$root"/docs/*.md "$d/docs/"
  cp "$root/tests/scripts/check_lock_tags.sh" "$d/tests/scripts/"
  echo "$d"
}

# the tree itself
if out="$(sh "$root/tests/scripts/check_lock_tags.sh" "$root" 2>&1)"; then
  ok "the tree's scripts, docs and tests agree with src/pg/lock_tags.hpp"
else
  bad "the tree's scripts, docs and tests agree with src/pg/lock_tags.hpp: $out"
fi

# a header whose number changed: the build fails before compiling
d="$(copy header)"
sed -i 's/kResourceTagKind = 0x7E01/kResourceTagKind = 0x7E0A/' "$d/src/pg/lock_tags.hpp"
grep -q 'kResourceTagKind = 0x7E0A' "$d/src/pg/lock_tags.hpp" || bad "the test could not change the header"
if make -C "$d" -s PG_CONFIG="$(command -v pg_config)" > "$tmp/header_make.txt" 2>&1; then
  bad "make fails when the header's resource tag (now 0x7E0A) differs from the view's"
else
  if grep -q "named kResourceTagKind, but src/pg/lock_tags.hpp defines it as $changed" "$tmp/header_make.txt"; then
    ok "make fails when the header's resource tag differs from the view's, naming the constant"
  else
    bad "make fails naming kResourceTagKind: $(tail -n 5 "$tmp/header_make.txt")"
  fi
  if [ -z "$(find "$d/src" -name '*.o')" ]; then
    ok "nothing was compiled"
  else
    bad "nothing was compiled before the check failed: $(find "$d/src" -name '*.o' | head -n 3)"
  fi
fi

# the unchanged copy builds
d="$(copy same)"
if make -C "$d" -s PG_CONFIG="$(command -v pg_config)" > "$tmp/same_make.txt" 2>&1; then
  ok "make builds a copy of the tree"
else
  bad "make builds a copy of the tree: $(tail -n 5 "$tmp/same_make.txt")"
fi

# expect_check_fails NAME WHAT PATTERN: the check of copy NAME fails, printing PATTERN.
expect_check_fails() {
  local out
  if out="$(sh "$tmp/$1/tests/scripts/check_lock_tags.sh" "$tmp/$1" 2>&1)"; then
    bad "the check fails on $2"
  elif grep -q -- "$3" <<<"$out"; then
    ok "the check fails on $2"
  else
    bad "the check fails on $2 with \"$3\": $out"
  fi
}

d="$(copy number)"
sed -i "s|32257 /\\* kResourceTagKind \\*/|$other /* kResourceTagKind */|" "$d"/sql/fencing--1.0.sql
expect_check_fails number "a script number that differs from its constant" \
  "fencing--1.0.sql:[0-9]*: $other is named kResourceTagKind, but src/pg/lock_tags.hpp defines it as 32257"

d="$(copy unnamed)"
sed -i 's|32257 /\* kResourceTagKind \*/|32257|' "$d"/sql/fencing--1.0.sql
expect_check_fails unnamed "a script number that names no constant" \
  'fencing--1.0.sql:[0-9]*: the lock-tag number 32257 must name its constant'

d="$(copy unknown)"
sed -i 's|32257 /\* kResourceTagKind \*/|32257 /* kResourceKind */|' "$d"/sql/fencing--1.0.sql
expect_check_fails unknown "a script number that names an unknown constant" \
  'the lock-tag number 32257 must name its constant'

d="$(copy stale)"
echo "The resource tag's fourth field is $other." >> "$d/docs/design.md"
expect_check_fails stale "a stale number in the docs" \
  "docs/design.md:[0-9]*: $other is no lock-tag number"

# the view and the module agree on the running server
got="$(psql -XAtq -v ON_ERROR_STOP=1 \
  -c "CREATE EXTENSION IF NOT EXISTS fencing" \
  -c "SELECT fencing.acquire('lock_tags:1') IS NOT NULL" \
  -c "SELECT count(*) FROM fencing.locks WHERE resource = 'lock_tags:1' AND pid = pg_backend_pid() AND granted" \
  -c "SELECT fencing.release('lock_tags:1')")"
if [ "$got" = "$(printf 't\n1\nt')" ]; then
  ok "fencing.locks shows the lock the module holds"
else
  bad "fencing.locks shows the lock the module holds: $got"
fi
exit "$fail"
