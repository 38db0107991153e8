#!/usr/bin/env bash
# One version everywhere: the Makefile's EXTVERSION, the control file's
# default_version, the module's fencing.version(), and META.json (which PGXN
# requires to be a three-part semantic version: 1.0 there is 1.0.0). Also
# checks META.json against the required keys of PGXN meta-spec 1.0.0.
set -euo pipefail
root="${FENCING_ROOT:?}"
make_v="$(sed -n 's/^EXTVERSION *= *//p' "$root/Makefile")"
control_v="$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$root/fencing.control")"
module_v="$(psql -XAtq -c "CREATE EXTENSION IF NOT EXISTS fencing" -c "SELECT fencing.version()")"
python3 - "$root/META.json" "$make_v" "$control_v" "$module_v" "$root" <<'PY'
import json, os, re, sys
meta_path, make_v, control_v, module_v, root = sys.argv[1:]
m = json.load(open(meta_path))
errors = []
def semver_of(v):
    return v if v.count('.') == 2 else v + '.0' * (2 - v.count('.'))
for key in ("name", "version", "abstract", "maintainer", "license", "provides", "meta-spec"):
    if key not in m:
        errors.append(f"META.json lacks required key {key!r}")
if m.get("meta-spec", {}).get("version") != "1.0.0":
    errors.append("META.json meta-spec version is not 1.0.0")
semver = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z-.]+)?$")
versions = {"Makefile EXTVERSION": make_v, "fencing.control default_version": control_v,
            "fencing.version()": module_v}
expected = semver_of(make_v)
for name, v in versions.items():
    if v != make_v:
        errors.append(f"{name} is {v!r}, the Makefile says {make_v!r}")
for where, v in [("META.json version", m.get("version")),
                 ("META.json provides.fencing.version", m.get("provides", {}).get("fencing", {}).get("version"))]:
    if not v or not semver.match(v):
        errors.append(f"{where} {v!r} is not a semantic version")
    elif v != expected:
        errors.append(f"{where} is {v!r}, expected {expected!r} (from {make_v!r})")
f = m.get("provides", {}).get("fencing", {}).get("file")
if not f or not os.path.exists(os.path.join(root, f)):
    errors.append(f"META.json provides.fencing.file {f!r} does not exist")
if errors:
    print("\n".join(errors)); sys.exit(1)
print(f"ok: version {make_v} (PGXN {expected}) everywhere")
PY
