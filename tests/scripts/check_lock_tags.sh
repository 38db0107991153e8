#!/bin/sh
# check_lock_tags.sh [ROOT] -- the lock-tag numbers have one definition.
#
# The fourth field of fencing's advisory lock tags (what pg_locks shows as
# objsubid) is defined once, in src/pg/lock_tags.hpp:
#
#   inline constexpr uint16 kResourceTagKind = 0x7E01;
#
# SQL cannot include that header, so every place an extension script
# (sql/fencing.sql, the source of the install script, and
# sql/fencing--*.sql, the released scripts) writes such
# a number names the constant right after it, in a comment:
#
#   WHERE l.locktype = 'advisory' AND l.objsubid = 32257 /* kResourceTagKind */
#
# The build (every `make`, before anything is compiled) runs this check and
# fails when
#   - a named number differs from the header's value, or names a constant the
#     header does not define;
#   - an extension script writes a number of fencing's range (0x7E00 to
#     0x7EFF, 32256 to 32511) without naming its constant;
#   - the scripts name none of the constants (the view no longer checked);
#   - the docs or tests (README.md, docs/*.md, sql/*.sql, expected/*.out,
#     tests/**/*.{sql,spec,out,pl,pm,sh}) write a number of that range that is
#     no constant's value (a stale number).
# POSIX sh and awk only: it runs wherever PGXS builds.
set -eu
root="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
header="$root/src/pg/lock_tags.hpp"

[ -r "$header" ] || { echo "check_lock_tags: $header not found" >&2; exit 1; }

# "name value" per constant, the value in decimal.
defs="$(awk '
  match($0, /constexpr[ \t]+uint16[ \t]+k[A-Za-z]+TagKind[ \t]*=[ \t]*(0[xX][0-9A-Fa-f]+|[0-9]+)/) {
    s = substr($0, RSTART, RLENGTH)
    sub(/^constexpr[ \t]+uint16[ \t]+/, "", s)
    name = s; sub(/[ \t]*=.*/, "", name)
    v = s; sub(/^[^=]*=[ \t]*/, "", v)
    if (v ~ /^0[xX]/) {
      n = 0; hex = tolower(substr(v, 3))
      for (i = 1; i <= length(hex); i++) n = n * 16 + index("0123456789abcdef", substr(hex, i, 1)) - 1
    } else n = v + 0
    print name, n
  }' "$header")"
[ -n "$defs" ] || { echo "check_lock_tags: no k...TagKind constants found in $header" >&2; exit 1; }

scripts="$(ls "$root"/sql/fencing.sql "$root"/sql/fencing--*.sql 2>/dev/null || true)"
[ -n "$scripts" ] || { echo "check_lock_tags: no sql/fencing.sql or sql/fencing--*.sql in $root" >&2; exit 1; }

# shellcheck disable=SC2086
printf '%s\n' "$defs" | awk -v root="$root/" '
  FNR == NR { value[$1] = $2; is_value[$2] = 1; next }
  FNR == 1 {
    file = FILENAME
    if (index(file, root) == 1) file = substr(file, length(root) + 1)
    script = (file ~ /^sql\/fencing(--.*)?\.sql$/)
  }
  {
    line = $0
    # Named numbers: N /* kName */
    rest = line
    while (match(rest, /[0-9]+[ \t]*\/\*[ \t]*k[A-Za-z]+TagKind[ \t]*\*\//)) {
      s = substr(rest, RSTART, RLENGTH)
      n = s; sub(/[^0-9].*/, "", n)
      name = s; sub(/^[0-9]+[ \t]*\/\*[ \t]*/, "", name); sub(/[ \t]*\*\/$/, "", name)
      if (!(name in value)) {
        printf "%s:%d: %s names %s, which src/pg/lock_tags.hpp does not define\n", file, FNR, n, name; bad = 1
      } else if (n + 0 != value[name]) {
        printf "%s:%d: %s is named %s, but src/pg/lock_tags.hpp defines it as %d\n", file, FNR, n, name, value[name]; bad = 1
      }
      if (script) named++
      rest = substr(rest, RSTART + RLENGTH)
    }
    # Any other number of the range.
    rest = line
    gsub(/[0-9]+[ \t]*\/\*[ \t]*k[A-Za-z]+TagKind[ \t]*\*\//, "", rest)
    while (match(rest, /[0-9]+/)) {
      n = substr(rest, RSTART, RLENGTH)
      rest = substr(rest, RSTART + RLENGTH)
      if (length(n) != 5 || n + 0 < 32256 || n + 0 > 32511) continue
      if (script) {
        printf "%s:%d: the lock-tag number %s must name its constant: %s /* k...TagKind */\n", file, FNR, n, n; bad = 1
      } else if (!(n in is_value)) {
        printf "%s:%d: %s is no lock-tag number of src/pg/lock_tags.hpp (a stale number?)\n", file, FNR, n; bad = 1
      }
    }
  }
  END {
    if (!named) { print "sql/fencing.sql and sql/fencing--*.sql name no lock-tag constant (/* kResourceTagKind */ in the fencing.locks view)"; bad = 1 }
    exit bad
  }
' - $scripts \
  $(ls "$root"/README.md "$root"/docs/*.md "$root"/sql/*.sql "$root"/expected/*.out 2>/dev/null | grep -v -e '/sql/fencing--' -e '/sql/fencing\.sql$') \
  $(find "$root/tests" -type f \( -name '*.sql' -o -name '*.spec' -o -name '*.out' -o -name '*.pl' -o -name '*.pm' -o -name '*.sh' \) \
      -not -name check_lock_tags.sh -not -path '*/node_modules/*' -not -path '*/results/*' -not -path '*/output_iso/*' -not -path '*/tmp_check/*' 2>/dev/null) ||
  { echo "check_lock_tags: the lock-tag numbers disagree with src/pg/lock_tags.hpp (see above)" >&2; exit 1; }
