#!/usr/bin/env bash
# The releases of fencing, read from CHANGELOG.md, and builds of them from
# their commits, for the update tests (tests/upgrade/update.pl). Sourced by
# test.sh; usable directly as well:
#
#   bash tests/scripts/releases.sh list      the releases: "VERSION COMMIT" each
#   bash tests/scripts/releases.sh check     the CHANGELOG's headings and commits
#
# CHANGELOG.md is the one list of releases. A release's heading is exactly
#
#   ## 1.0 — 2026-12-01 (commit abcdef0)
#
# (version, date, the commit it was made from, 7 to 40 hex digits) and the
# version being prepared, if any, is the first heading:
#
#   ## 1.1 — unreleased
#
# A level-2 heading of any other form is an error, so that a release cannot
# be skipped by a typo.

# releases_parse CHANGELOG: "VERSION COMMIT" per release, newest (first)
# first; "VERSION unreleased" for the unreleased heading. Fails, naming the
# line, on a level-2 heading of another form.
releases_parse() {
  local file="$1" line n=0 bad=0
  local re_rel='^## ([0-9]+(\.[0-9]+)+) — ([0-9]{4}-[0-9]{2}-[0-9]{2}) \(commit ([0-9a-f]{7,40})\)$'
  local re_unrel='^## ([0-9]+(\.[0-9]+)+) — unreleased$'
  [ -r "$file" ] || { echo "$file: not found" >&2; return 1; }
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    case "$line" in '## '*) ;; *) continue ;; esac
    if [[ $line =~ $re_rel ]]; then
      echo "${BASH_REMATCH[1]} ${BASH_REMATCH[4]}"
    elif [[ $line =~ $re_unrel ]]; then
      echo "${BASH_REMATCH[1]} unreleased"
    else
      echo "$file:$n: a release heading is \"## <version> — <yyyy-mm-dd> (commit <hash>)\" or \"## <version> — unreleased\", not \"$line\"" >&2
      bad=1
    fi
  done < "$file"
  return "$bad"
}

# control_version FILE: default_version of a control file (on stdin when FILE is -).
control_version() {
  sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$1" | head -n 1
}

# releases_check ROOT: checks CHANGELOG.md of ROOT against the tree and its
# git history, prints "VERSION COMMIT" per release (newest first, full
# commit hashes). Fails, saying why, when
#   - a heading has another form, a version appears twice, or the unreleased
#     heading is not the first;
#   - the first heading's version is not the control file's default_version;
#   - a release's commit is not in the history, or its control file's
#     default_version is not the release's version.
releases_check() {
  local root="$1" parsed version commit full first="" n=0 bad=0 tree_v at_v
  local -A seen=()
  parsed="$(releases_parse "$root/CHANGELOG.md")" || bad=1
  tree_v="$(control_version "$root/fencing.control")"
  while read -r version commit; do
    [ -n "$version" ] || continue
    n=$((n + 1))
    [ -n "$first" ] || first="$version"
    if [ -n "${seen[$version]:-}" ]; then
      echo "CHANGELOG.md: version $version appears twice" >&2; bad=1
    fi
    seen[$version]=1
    if [ "$commit" = unreleased ]; then
      if [ "$n" -ne 1 ]; then echo "CHANGELOG.md: the unreleased $version is not the first heading" >&2; bad=1; fi
      continue
    fi
    if ! full="$(git -C "$root" rev-parse --verify --quiet "$commit^{commit}")"; then
      echo "CHANGELOG.md: release $version names commit $commit, which is not in the history" >&2; bad=1; continue
    fi
    at_v="$(git -C "$root" show "$full:fencing.control" 2>/dev/null | control_version -)"
    if [ "$at_v" != "$version" ]; then
      echo "CHANGELOG.md: release $version names commit $commit, whose fencing.control has default_version '$at_v'" >&2; bad=1
      continue
    fi
    echo "$version $full"
  done <<<"$parsed"
  if [ -z "$first" ]; then
    echo "CHANGELOG.md: no release heading" >&2; bad=1
  elif [ "$first" != "$tree_v" ]; then
    echo "CHANGELOG.md: the first heading is $first, fencing.control's default_version is $tree_v" >&2; bad=1
  fi
  return "$bad"
}

# release_package SRCDIR PG_CONFIG DEST: installs the build in SRCDIR (built
# already) with its own Makefile into a staging directory and keeps what it
# installed of fencing: DEST/lib (fencing.so) and DEST/extension (the control
# file and the scripts).
release_package() {
  local src="$1" pg_config="$2" dest="$3" stage libdir extdir
  stage="$dest.stage"
  rm -rf "$dest" "$stage"
  make -C "$src" -s install DESTDIR="$stage" PG_CONFIG="$pg_config" >/dev/null
  libdir="$stage$("$pg_config" --pkglibdir)"
  extdir="$stage$("$pg_config" --sharedir)/extension"
  mkdir -p "$dest/lib" "$dest/extension"
  cp -p "$libdir"/fencing.so "$dest/lib/"
  cp -p "$extdir"/fencing.control "$extdir"/fencing--*.sql "$dest/extension/"
  rm -rf "$stage"
}

# release_build ROOT COMMIT PG_CONFIG DEST: the tree of COMMIT (git archive of
# ROOT's history), built against PG_CONFIG in DEST.src and packaged in DEST
# (release_package).
release_build() {
  local root="$1" commit="$2" pg_config="$3" dest="$4" src="$4.src"
  rm -rf "$src"
  mkdir -p "$src"
  git -C "$root" archive --format=tar "$commit" | tar -x -C "$src"
  make -C "$src" -s PG_CONFIG="$pg_config" >/dev/null
  release_package "$src" "$pg_config" "$dest"
}

# releases_worktree_commit ROOT: a commit of the tracked files of ROOT as they
# are now (uncommitted changes included; HEAD when there are none), without
# changing the checkout, its index or its refs.
releases_worktree_commit() {
  local root="$1" c
  c="$(git -C "$root" stash create 2>/dev/null || true)"
  [ -n "$c" ] || c="$(git -C "$root" rev-parse --verify HEAD)"
  echo "$c"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  case "${1:-}" in
    list) releases_check "$root" ;;
    check) releases_check "$root" >/dev/null && echo "ok: CHANGELOG.md names its releases and their commits" ;;
    *) echo "usage: $0 list | check" >&2; exit 2 ;;
  esac
fi
