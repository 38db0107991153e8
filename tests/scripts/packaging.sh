#!/usr/bin/env bash
# The ways fencing reaches a server other than `make install` from a
# checkout: the release archive (`make dist`, installed with PGXN's client)
# and the Debian package (debian/, built with dpkg-buildpackage). Sourced by
# test.sh (packaging_prepare, as root, while the checkout and its history
# are at hand) and by suites.sh (the suites "package" and "dist", as the
# unprivileged user).
#
#   packaging_prepare DIR   `make dist` of the working tree's tracked files
#                           (uncommitted changes included, untracked files
#                           not), out of tree, into DIR: DIR/fencing-<v>.zip;
#                           "dist/make_dist" passes or fails
#   suite_dist              the archive's name and META.json (PGXN
#                           meta-spec 1.0.0, the control file's version);
#                           the archive holds sql/fencing.sql, not the
#                           install script built from it; `pgxn install` of
#                           the zip into a private copy of PostgreSQL (its
#                           install script is the archive's sql/fencing.sql),
#                           then CREATE EXTENSION on a throwaway cluster of
#                           that copy
#   suite_package           the archive unpacked is a clean checkout:
#                           dpkg-buildpackage -b there builds
#                           postgresql-<major>-fencing, whose files (exactly
#                           the expected ones, version of the control file)
#                           are installed into a private copy of PostgreSQL;
#                           `make installcheck`, out of tree, against a
#                           throwaway cluster of that copy, one result per
#                           pg_regress test and isolation spec
#
# The results are "PASS|FAIL dist/<name>" and "PASS|FAIL package/<name>".

# packaging_prepare DIR (test.sh, as root): the release archive in DIR.
packaging_prepare() {
  local dir="$1" rev pg_config="${SYS_PGBIN:-$PGBIN}/pg_config"
  rm -rf "$dir"
  mkdir -p "$dir/build"
  rev="$(releases_worktree_commit "$FENCING_ROOT")"
  if make -s -C "$dir/build" -f "$FENCING_ROOT/Makefile" dist DIST_REV="$rev" PG_CONFIG="$pg_config" \
      > "$dir/make_dist.log" 2>&1 && mv "$dir"/build/*.zip "$dir/"; then
    echo "PASS dist/make_dist" >> "$results"
  else
    echo "FAIL dist/make_dist (make dist failed: $dir/make_dist.log)" >> "$results"
    sed 's/^/  /' "$dir/make_dist.log" >&2
  fi
  rm -rf "$dir/build"
  [ "$(id -u)" -eq 0 ] && chown -R "$FENCING_USER" "$dir"
  return 0
}

# packaging_zip: the release archive packaging_prepare made (none: fails).
packaging_zip() {
  local z
  z="$(existing "$work/packaging/fencing-*.zip" | head -n 1)"
  [ -n "$z" ] || { record FAIL "$1" "(no release archive: run it through tests/scripts/test.sh, which runs make dist)"; return 1; }
  echo "$z"
}

# packaging_pg_tree DEST: a private copy of the PostgreSQL installation of
# PGBIN without any fencing file (binaries, share, headers), in DEST, as
# private_tree makes it. Prints the copy's bin directory.
packaging_pg_tree() {
  local dest="$1" bindir prefix sharedir incdir d bin
  bindir="$(cd "$PGBIN" && pwd -P)"
  sharedir="$("$PGBIN/pg_config" --sharedir)"
  incdir="$("$PGBIN/pg_config" --includedir)"
  prefix="$(dirname "$bindir")"
  mkdir -p "$dest"
  for d in "$prefix" "$sharedir" "$incdir" "$("$PGBIN/pg_config" --docdir)"; do
    [ -d "$d" ] || continue
    mkdir -p "$dest$(dirname "$d")"
    # Hard links where allowed (root); else a copy, never over a partial
    # tree of links (writing through a link would change the original).
    cp -al "$d" "$dest$(dirname "$d")/" 2>/dev/null ||
      { rm -rf "${dest:?}$d"; cp -a "$d" "$dest$(dirname "$d")/"; }
  done
  bin="$dest$bindir"
  rm -f "$("$bin/pg_config" --pkglibdir)"/fencing.so "$("$bin/pg_config" --sharedir)"/extension/fencing[.-]* \
        "$("$bin/pg_config" --docdir)"/extension/fencing.md*
  echo "$bin"
}

# packaging_cluster DIR BIN: a throwaway cluster of BIN's PostgreSQL in DIR
# (tests/scripts/cluster.sh); prints its port. packaging_cluster_stop DIR BIN.
packaging_cluster() {
  local port
  port="$(free_port)"
  mkdir -p "$1"
  PATH="$2:$PATH" bash "$FENCING_ROOT/tests/scripts/cluster.sh" start "$1" "$port" >&2 || {
    tail -n 20 "$1/initdb.log" "$1/server.log" >&2 2>/dev/null; return 1; }
  echo "$port"
}
packaging_cluster_stop() { PATH="$2:$PATH" bash "$FENCING_ROOT/tests/scripts/cluster.sh" stop "$1"; }

# suite_dist: the release archive, and PGXN's client installing it.
suite_dist() {
  local zip dir="$work/dist" name version bin port rc=0 v
  zip="$(packaging_zip dist)" || return 0
  rm -rf "$dir"
  mkdir -p "$dir"
  version="$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" fencing.control)"
  if python3 - "$zip" "$version" > "$dir/meta.txt" 2>&1 <<'PY'
import json, re, sys, zipfile
path, control_v = sys.argv[1], sys.argv[2]
semver = control_v if control_v.count(".") == 2 else control_v + ".0" * (2 - control_v.count("."))
errors = []
name = path.rsplit("/", 1)[-1]
if name != f"fencing-{semver}.zip":
    errors.append(f"the archive is {name}, not fencing-{semver}.zip")
z = zipfile.ZipFile(path)
names = z.namelist()
top = {n.split("/", 1)[0] for n in names}
if top != {f"fencing-{semver}"}:
    errors.append(f"the archive's files are not all under fencing-{semver}/: {sorted(top)[:5]}")
prefix = f"fencing-{semver}/"
try:
    m = json.loads(z.read(prefix + "META.json"))
except KeyError:
    m = {}
    errors.append("no META.json at the top of the archive")
# PGXN meta-spec 1.0.0: required keys and their forms.
for key in ("name", "version", "abstract", "maintainer", "license", "provides", "meta-spec"):
    if key not in m:
        errors.append(f"META.json lacks the required key {key!r}")
re_semver = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+)?$")
if m.get("name") != "fencing":
    errors.append(f"META.json name is {m.get('name')!r}")
if m.get("version") != semver:
    errors.append(f"META.json version is {m.get('version')!r}, the control file's {control_v!r} is {semver!r}")
if not isinstance(m.get("maintainer"), (str, list)) or not m.get("maintainer"):
    errors.append("META.json maintainer is neither a string nor a non-empty list")
licenses = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd", "gfdl_1_2",
            "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1",
            "openssl", "perl_5", "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
            "restricted", "unrestricted", "unknown"}
lic = m.get("license")
if not ((isinstance(lic, str) and lic in licenses) or isinstance(lic, dict)
        or (isinstance(lic, list) and lic and all(l in licenses for l in lic))):
    errors.append(f"META.json license {lic!r} is not one of meta-spec's")
if (m.get("meta-spec") or {}).get("version") != "1.0.0":
    errors.append("META.json meta-spec version is not 1.0.0")
for ext, p in (m.get("provides") or {}).items():
    if not isinstance(p, dict) or not re_semver.match(str(p.get("version", ""))) or "file" not in p:
        errors.append(f"META.json provides.{ext} needs a file and a semantic version")
        continue
    if p["version"] != semver:
        errors.append(f"META.json provides.{ext}.version is {p['version']!r}, not {semver!r}")
    if prefix + p["file"] not in names:
        errors.append(f"META.json provides.{ext}.file {p['file']!r} is not in the archive")
    if "docfile" in p and prefix + p["docfile"] not in names:
        errors.append(f"META.json provides.{ext}.docfile {p['docfile']!r} is not in the archive")
if "fencing" not in (m.get("provides") or {}):
    errors.append("META.json provides no extension fencing")
for f in ("Makefile", "fencing.control", "debian/control.in", "debian/pgversions", "sql/fencing.sql"):
    if prefix + f not in names:
        errors.append(f"the archive lacks {f}")
# The install script of the version is made by the build from sql/fencing.sql:
# the archive holds the source, as a checkout does, not a copy that could differ.
if prefix + f"sql/fencing--{control_v}.sql" in names:
    errors.append(f"the archive holds sql/fencing--{control_v}.sql, which the build makes from sql/fencing.sql")
if m.get("release_status", "stable") not in ("stable", "testing", "unstable"):
    errors.append(f"META.json release_status {m.get('release_status')!r} is not stable, testing or unstable")
if errors:
    print("\n".join(errors)); sys.exit(1)
print(f"ok: {name}, META.json {semver} (control file {control_v})")
PY
  then
    record PASS dist meta
  else
    record FAIL dist "meta ($(head -n 1 "$dir/meta.txt"))"
    sed 's/^/    /' "$dir/meta.txt"
  fi
  # pgxn install: unpacks the archive, runs make and make install with the
  # pg_config given; the private copy is this user's own (no sudo).
  bin="$(packaging_pg_tree "$dir/pg")"
  # pgxn checks that it may write pg_config --libdir (the client libraries'
  # directory, which the copy leaves out) before it installs anything.
  mkdir -p "$("$bin/pg_config" --libdir)"
  if limited env HOME="$dir" pgxn install --nosudo --make make --pg_config "$bin/pg_config" "$zip" \
      > "$dir/pgxn_install.txt" 2>&1 && [ -f "$("$bin/pg_config" --pkglibdir)/fencing.so" ]; then
    record PASS dist pgxn_install
  else
    record FAIL dist "pgxn_install (see $dir/pgxn_install.txt)"
    tail -n 40 "$dir/pgxn_install.txt" | sed 's/^/    /'
    return 0
  fi
  # The install script of the version, made from the archive's sql/fencing.sql.
  if unzip -p "$zip" "$(basename "$zip" .zip)/sql/fencing.sql" |
      cmp -s - "$("$bin/pg_config" --sharedir)/extension/fencing--$version.sql"; then
    record PASS dist install_script
  else
    record FAIL dist "install_script (fencing--$version.sql installed by pgxn is not the archive's sql/fencing.sql)"
  fi
  port="$(packaging_cluster "$dir/cluster" "$bin")" || { record FAIL dist "create_extension (the cluster did not start)"; return 0; }
  v="$("$bin/psql" -XAtq -v ON_ERROR_STOP=1 -h "$dir/cluster" -p "$port" -U postgres -d postgres \
        -c 'CREATE EXTENSION fencing' -c 'SELECT fencing.version()' \
        -c "SELECT fencing.acquire('dist:check') > 0" 2>&1)" || rc=$?
  packaging_cluster_stop "$dir/cluster" "$bin"
  if [ "$rc" -eq 0 ] && [ "$v" = "$(printf '%s\nt' "$version")" ]; then
    record PASS dist create_extension
  else
    record FAIL dist "create_extension (got: $(echo "$v" | tr '\n' ' '))"
  fi
}

# suite_package: the Debian package, built from the release archive.
suite_package() {
  local zip dir="$work/package" src major version pkg deb bin port rc=0 f rel t tests=() out
  zip="$(packaging_zip package)" || return 0
  rm -rf "$dir"
  mkdir -p "$dir/build"
  (cd "$dir/build" && unzip -q "$zip")
  src="$(existing "$dir/build/fencing-*")"
  major="$("$PGBIN/pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')"
  version="$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$src/fencing.control")"
  pkg="postgresql-$major-fencing"
  # The package's version (debian/changelog) is the control file's, plus a
  # Debian revision.
  if (cd "$src" && dpkg-parsechangelog -S Version) > "$dir/changelog_version.txt" 2>&1 &&
     [ "$(sed -E 's/-[^-]*$//' "$dir/changelog_version.txt")" = "$version" ]; then
    record PASS package version
  else
    record FAIL package "version (debian/changelog: $(cat "$dir/changelog_version.txt"), fencing.control: $version)"
  fi
  # debian/control is debian/control.in for the majors of debian/pgversions
  # this machine has (pg_buildext checkcontrol, as the build itself runs it).
  if (cd "$src" && pg_buildext checkcontrol) > "$dir/checkcontrol.txt" 2>&1; then
    record PASS package checkcontrol
  else
    record FAIL package "checkcontrol ($(tail -n 1 "$dir/checkcontrol.txt"))"
  fi
  # The build's own test step (pg_virtualenv) is left out: installcheck runs
  # below, against the package's files installed into a private copy.
  if (cd "$src" && limited env DEB_BUILD_OPTIONS=nocheck DEB_BUILD_PROFILES=nocheck \
        dpkg-buildpackage -b -us -uc) > "$dir/build.txt" 2>&1; then
    record PASS package dpkg_buildpackage
  else
    record FAIL package "dpkg_buildpackage (see $dir/build.txt)"
    tail -n 40 "$dir/build.txt" | sed 's/^/    /'
    return 0
  fi
  deb="$(existing "$dir/build/${pkg}_*.deb")"
  if [ -z "$deb" ]; then
    record FAIL package "deb (no $pkg package: $(ls "$dir/build"/*.deb 2>/dev/null | xargs -n1 basename | tr '\n' ' '))"
    return 0
  fi
  rm -rf "$dir/root"
  dpkg-deb -x "$deb" "$dir/root"
  # Exactly these files (the Debian docs of the package aside).
  {
    echo "usr/lib/postgresql/$major/lib/fencing.so"
    echo "usr/share/postgresql/$major/extension/fencing.control"
    # the released scripts, and the install script the build makes from
    # sql/fencing.sql (the archive holds its source only)
    for f in "$src"/sql/fencing--*.sql "fencing--$version.sql"; do
      echo "usr/share/postgresql/$major/extension/$(basename "$f")"
    done
    echo "usr/share/doc/postgresql-doc-$major/extension/fencing.md.gz"
  } | LC_ALL=C sort > "$dir/expected_files.txt"
  (cd "$dir/root" && find . -type f | sed 's#^\./##' | grep -v "^usr/share/doc/$pkg/" | LC_ALL=C sort) > "$dir/files.txt"
  if diff -u "$dir/expected_files.txt" "$dir/files.txt" > "$dir/files.diff"; then
    record PASS package contents
  else
    record FAIL package "contents (see $dir/files.diff)"
    sed 's/^/    /' "$dir/files.diff"
  fi
  if [ "$(dpkg-deb -f "$deb" Depends | grep -c "postgresql-$major")" -eq 1 ]; then
    record PASS package depends
  else
    record FAIL package "depends ($(dpkg-deb -f "$deb" Depends))"
  fi
  # Installed as dpkg would, into a private copy of PostgreSQL.
  bin="$(packaging_pg_tree "$dir/pg")"
  cp "$dir/root/usr/lib/postgresql/$major/lib/"* "$("$bin/pg_config" --pkglibdir)/"
  cp "$dir/root/usr/share/postgresql/$major/extension/"* "$("$bin/pg_config" --sharedir)/extension/"
  port="$(packaging_cluster "$dir/cluster" "$bin")" || { record FAIL package "installcheck (the cluster did not start)"; return 0; }
  # installcheck of the unpacked source, out of tree (as pg_buildext runs it).
  mkdir -p "$dir/check"
  while IFS= read -r f; do
    case "$(basename "$f")" in fencing--* | fencing.sql) continue ;; esac
    tests+=("$(basename "$f" .sql)")
  done < <(existing "$src/sql/*.sql")
  while IFS= read -r f; do tests+=("$(basename "$f" .spec)"); done < <(existing "$src/tests/isolation/specs/*.spec")
  out="$dir/installcheck.txt"
  limited_3x make -C "$dir/check" -f "$src/Makefile" VPATH="$src" installcheck PG_CONFIG="$bin/pg_config" \
      PGHOST="$dir/cluster" PGPORT="$port" PGUSER=postgres > "$out" 2>&1 || rc=$?
  packaging_cluster_stop "$dir/cluster" "$bin"
  parse_regress package/installcheck "$out" "${tests[@]}"
  if [ "$rc" -ne 0 ] && ! failed_in package/installcheck; then
    record FAIL package "installcheck (make installcheck exit status $rc)"
  fi
  if failed_in package; then
    tail -n 40 "$out" | sed 's/^/    /'
    for f in "$dir/check/regression.diffs" "$dir/check/output_iso/regression.diffs"; do
      if [ -s "$f" ]; then echo "---- $f"; head -n 200 "$f"; fi
    done
  fi
}

# install_doc runs before the suites, as root (tests/scripts/install_doc.sh):
# nothing to do here when FENCING_SUITES names it.
suite_install_doc() { :; }

# packaging_majors DIR MAJOR... (test.sh, as root, after the portability
# runs): the Debian packages of 15 and of the other majors at once, as a
# machine with their server headers builds them. Debian 12 has only 15's
# headers, so the build runs in a mount namespace of its own (unshare) whose
# /usr/lib/postgresql, /usr/share/postgresql and /usr/include/postgresql
# also hold the other majors' trees fetched for the portability runs
# (tests/scripts/pgversions.sh; nothing of the machine changes), with
# PG_SUPPORTED_VERSIONS naming them: `pg_buildext updatecontrol`, then
# dpkg-buildpackage -b (without its test step: those majors' servers do not
# run outside their trees). For each major: "pgNN/package/deb" (the package
# was built) and "pgNN/package/contents" (its module, control file and
# every script, the module built for that major).
packaging_majors() {
  local dir="$1" zip src m bin majors="" deb ok syms version
  shift
  zip="$(ls "$work"/packaging/fencing-*.zip 2>/dev/null | head -n 1)"
  [ -n "$zip" ] || { echo "FAIL package/majors (no release archive)" >> "$results"; return 0; }
  for m in "$@"; do
    if bin="$(pgv_fetch "$m" 2>/dev/null)"; then majors="$majors $m"; else
      echo "FAIL pg$m/package/deb (PostgreSQL $m could not be fetched)" >> "$results"; fi
  done
  [ -n "$majors" ] || return 0
  rm -rf "$dir"
  mkdir -p "$dir/build" "$dir/ns"
  (cd "$dir/build" && unzip -q "$zip")
  src="$(ls -d "$dir"/build/fencing-*)"
  version="$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$src/fencing.control")"
  cat > "$dir/ns.sh" <<'NS'
set -eu
dir="$1" src="$2" cache="$3"
shift 3
for d in /usr/lib/postgresql /usr/share/postgresql /usr/include/postgresql; do
  mkdir -p "$dir/ns$d"
  cp -al "$d/." "$dir/ns$d/" 2>/dev/null || cp -a "$d/." "$dir/ns$d/"
  for m in "$@"; do
    cp -al "$cache/pg$m$d/$m" "$dir/ns$d/" 2>/dev/null || cp -a "$cache/pg$m$d/$m" "$dir/ns$d/"
  done
  mount --bind "$dir/ns$d" "$d"
done
export PG_SUPPORTED_VERSIONS="$(/usr/share/postgresql-common/supported-versions | tr '\n' ' ') $*"
cd "$src"
pg_buildext updatecontrol
DEB_BUILD_OPTIONS=nocheck DEB_BUILD_PROFILES=nocheck dpkg-buildpackage -b -us -uc
NS
  log "package: building the Debian packages of 15 and$majors"
  if ! timeout 1800 unshare --mount --propagation private bash "$dir/ns.sh" "$dir" "$src" "$PGV_CACHE" $majors \
      > "$dir/build.txt" 2>&1; then
    tail -n 30 "$dir/build.txt" >&2
  fi
  for m in $majors; do
    deb="$(ls "$dir"/build/postgresql-"$m"-fencing_*.deb 2>/dev/null | head -n 1)"
    if [ -z "$deb" ]; then
      echo "FAIL pg$m/package/deb (not built: $dir/build.txt)" >> "$results"
      continue
    fi
    echo "PASS pg$m/package/deb" >> "$results"
    rm -rf "$dir/root$m"
    dpkg-deb -x "$deb" "$dir/root$m"
    ok=1
    for f in "usr/lib/postgresql/$m/lib/fencing.so" "usr/share/postgresql/$m/extension/fencing.control" \
             $({ cd "$src/sql" && ls fencing--*.sql; echo "fencing--$version.sql"; } | sed "s#^#usr/share/postgresql/$m/extension/#"); do
      [ -f "$dir/root$m/$f" ] || { ok=0; echo "  pg$m: $f is missing" >&2; }
    done
    syms="$(nm -D "$dir/root$m/usr/lib/postgresql/$m/lib/fencing.so" 2>/dev/null || true)"
    if ! grep -q ' T fencing_acquire$' <<<"$syms"; then
      ok=0; echo "  pg$m: the module exports no fencing_acquire" >&2
    fi
    if [ "$ok" -eq 1 ] && [[ "$(dpkg-deb -f "$deb" Depends)" == *"postgresql-$m "* ]]; then
      echo "PASS pg$m/package/contents" >> "$results"
    else
      echo "FAIL pg$m/package/contents (see $dir/build.txt)" >> "$results"
    fi
  done
}
