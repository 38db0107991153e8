#!/usr/bin/env bash
# The checks of the release list (tests/scripts/releases.sh), on made-up
# histories: a small git repository with a control file and a CHANGELOG.md.
#   - the headings of CHANGELOG.md of this tree parse;
#   - a release heading names its version and full commit; the unreleased
#     heading is skipped;
#   - each of these is refused: a heading of another form (a hyphen for the
#     dash, a missing commit), a commit not in the history, a commit whose
#     control file has another version, a version twice, an unreleased
#     heading that is not the first, a first heading other than the control
#     file's version.
# Exit status 0 when every check holds.
set -euo pipefail
root="${FENCING_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
source "$root/tests/scripts/releases.sh"
tmp="${FENCING_TMP:-}"
if [ -z "$tmp" ]; then tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT; fi
fail=0
ok() { echo "ok - $1"; }
bad() { echo "FAILED - $1"; fail=1; }

if releases_parse "$root/CHANGELOG.md" > "$tmp/tree.txt" 2> "$tmp/tree.err"; then
  ok "the headings of CHANGELOG.md parse: $(tr '\n' ';' < "$tmp/tree.txt")"
else
  bad "the headings of CHANGELOG.md parse: $(cat "$tmp/tree.err")"
fi

repo="$tmp/repo"
rm -rf "$repo"
mkdir -p "$repo"
g() { git -C "$repo" -c user.name=test -c user.email=test@example.invalid -c commit.gpgsign=false "$@"; }
g init -q
printf "default_version = '1.0'\n" > "$repo/fencing.control"
g add fencing.control
g commit -q -m "1.0"
c10="$(g rev-parse HEAD)"
printf "default_version = '1.1'\n" > "$repo/fencing.control"
g commit -q -am "1.1"
c11="$(g rev-parse HEAD)"
printf "default_version = '1.2'\n" > "$repo/fencing.control"

# changelog NAME TEXT: writes CHANGELOG.md of the made-up repository.
changelog() { printf '# Changelog\n\nSome text.\n\n%s\n' "$1" > "$repo/CHANGELOG.md"; }

changelog "## 1.2 — unreleased

- things

## 1.1 — 2026-12-20 (commit ${c11:0:9})

## 1.0 — 2026-12-01 (commit ${c10:0:7})"
if out="$(releases_check "$repo" 2> "$tmp/err")" && [ "$out" = "$(printf '1.1 %s\n1.0 %s' "$c11" "$c10")" ]; then
  ok "two releases and an unreleased version: the releases with their full commits, newest first"
else
  bad "two releases and an unreleased version: got \"$out\" $(cat "$tmp/err")"
fi

# refused WHAT PATTERN CHANGELOG-TEXT
refused() {
  changelog "$3"
  if releases_check "$repo" > /dev/null 2> "$tmp/err"; then
    bad "refused: $1"
  elif grep -q -- "$2" "$tmp/err"; then
    ok "refused: $1"
  else
    bad "refused: $1, saying \"$2\": $(cat "$tmp/err")"
  fi
}
refused "a hyphen for the dash" 'a release heading is' "## 1.2 — unreleased

## 1.1 - 2026-12-20 (commit ${c11:0:7})"
refused "a release without its commit" 'a release heading is' "## 1.2 — unreleased

## 1.1 — 2026-12-20"
refused "a commit not in the history" 'which is not in the history' "## 1.2 — unreleased

## 1.1 — 2026-12-20 (commit 0123456789abcdef)"
refused "a commit of another version" "whose fencing.control has default_version '1.0'" "## 1.2 — unreleased

## 1.1 — 2026-12-20 (commit ${c10:0:7})"
refused "a version twice" 'version 1.1 appears twice' "## 1.2 — unreleased

## 1.1 — 2026-12-20 (commit ${c11:0:7})

## 1.1 — 2026-12-01 (commit ${c11:0:7})"
refused "an unreleased heading after a release" 'is not the first heading' "## 1.1 — 2026-12-20 (commit ${c11:0:7})

## 1.2 — unreleased"
refused "a first heading other than the control file's version" "the first heading is 1.1, fencing.control's default_version is 1.2" \
  "## 1.1 — 2026-12-20 (commit ${c11:0:7})"
exit "$fail"
