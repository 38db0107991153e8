#!/usr/bin/env bash
# The reference is tested: every function, view, table, sequence and type of
# the installed extension is named in docs/reference.md, every SQLSTATE the
# C++ code raises by name and every one the SQL raises is in its error table,
# and every relative link of README.md and docs/*.md points at a file.
set -euo pipefail
root="${FENCING_ROOT:?}"
ref="$root/docs/reference.md"
fail=0
psql -XAtq -c "CREATE EXTENSION IF NOT EXISTS fencing" >/dev/null
while IFS= read -r name; do
  if grep -q "fencing\.$name\b\|\`$name\`\|$name(" "$ref"; then :; else
    echo "FAILED - docs/reference.md does not name fencing.$name"; fail=1
  fi
done < <(psql -XAtq -c "
  SELECT DISTINCT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'fencing'
  UNION SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'fencing' AND c.relkind IN ('r', 'v', 'S')
  UNION SELECT t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
         WHERE n.nspname = 'fencing' AND t.typtype = 'd'")
# SQLSTATEs: ERRCODE_* names used in src/ mapped through PostgreSQL's errcodes.txt,
# plus literal ERRCODE = '.....' in the install and update scripts.
errcodes="$(pg_config --sharedir)/errcodes.txt"
if [ -r "$errcodes" ]; then
  for macro in $(grep -rhoE 'ERRCODE_[A-Z_]+' "$root/src" | sort -u); do
    case "$macro" in ERRCODE_FENCING_STALE_TOKEN) code=23T01 ;; ERRCODE_FENCING_PERMIT_COUNT) code=55T01 ;;
      ERRCODE_INTERNAL_ERROR|ERRCODE_OUT_OF_MEMORY|ERRCODE_DATA_CORRUPTED|ERRCODE_WARNING) continue ;;
      *) code="$(awk -v m="$macro" '$3 == m { print $1 }' "$errcodes")" ;; esac
    [ -n "$code" ] || continue
    grep -q "\`$code\`" "$ref" || { echo "FAILED - SQLSTATE $code ($macro) is not in the error table"; fail=1; }
  done
fi
for code in $(grep -ohE "ERRCODE = '[0-9A-Z]{5}'" "$root"/sql/fencing.sql "$root"/sql/fencing--*.sql | sed -E "s/.*'([0-9A-Z]{5})'/\1/" | sort -u); do
  grep -q "\`$code\`" "$ref" || { echo "FAILED - SQLSTATE $code (an install or update script) is not in the error table"; fail=1; }
done
# Relative links.
for f in "$root/README.md" "$root"/docs/*.md; do
  [ "$(basename "$f")" = fencing.md ] && continue   # the README's copy that make install puts in the doc directory
  for link in $(grep -oE '\]\([^)#: ]+' "$f" | sed 's/^](//'); do
    [ -e "$(dirname "$f")/$link" ] || { echo "FAILED - $(basename "$f") links to missing $link"; fail=1; }
  done
done
[ "$fail" -eq 0 ] && echo "ok - the reference names every object and SQLSTATE; every link resolves"
exit "$fail"
