#!/usr/bin/env bash
# Every SQL example of README.md and docs/*.md runs as shown: each ```sql
# block, taken from the files themselves, runs in psql (as the superuser of
# the test cluster, `\set VERBOSITY verbose`), the blocks of one file in
# order, in a fresh database "app" (the name the docs use) that has the
# extension unless the file's examples create it themselves. A block passes
# when every error it raises has a SQLSTATE that the block itself names (a
# doc that shows an error names its code: "-- ... (SQLSTATE 23T01)"), when
# a block that shows an error ("-- ERROR:") raises one, and when every
# SQLSTATE a comment says is raised ("-- refused: 23T01", a comment with
# "raises" or "ERROR") is. A line "..."
# stands for elided statements and is left out.
#
# What a block needs but does not show comes from a one-line comment right
# before it, `<!-- sql-example setup: SQL -->`, run first in the same
# session; `cron.schedule` (pg_cron, not installed here) is a stand-in that
# runs its command once, so the scheduled statement is checked too. Roles an
# example creates are dropped before its file runs.
set -euo pipefail
root="${FENCING_ROOT:?}"
tmp="${FENCING_TMP:-}"
if [ -z "$tmp" ]; then tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT; fi
mkdir -p "$tmp"
python3 - "$root" "$tmp" <<'PY'
import glob, os, re, subprocess, sys
root, tmp = sys.argv[1], sys.argv[2]
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
env = dict(os.environ, PGDATABASE="app")
def psql(db, *args, input=None):
    return subprocess.run(["psql", "-X", "-d", db, *args], input=input, capture_output=True, text=True,
                          timeout=120, env=env)
CRON = """CREATE SCHEMA IF NOT EXISTS cron;
CREATE OR REPLACE FUNCTION cron.schedule(job text, sched text, command text) RETURNS bigint
LANGUAGE plpgsql AS $f$ BEGIN EXECUTE command; RETURN 1; END $f$;"""
fail = ran = 0
for path in files:
    rel = os.path.relpath(path, root)
    lines = open(path).read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```sql":
            start = i + 1
            setup = ""
            j = i - 1
            m = re.match(r"^<!-- sql-example setup: (.*) -->$", lines[j].strip()) if j >= 0 else None
            if m:
                setup = m.group(1)
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                if lines[i].strip() != "...":
                    body.append(lines[i])
                i += 1
            blocks.append((start, setup, "\n".join(body)))
        i += 1
    if not blocks:
        continue
    r = psql("postgres", "-q", "-c", "DROP DATABASE IF EXISTS app WITH (FORCE)", "-c", "CREATE DATABASE app")
    if r.returncode != 0:
        print(f"FAILED - {rel}: the database app could not be made: {r.stderr.strip()}")
        fail = 1
        continue
    # Roles the examples create are the cluster's: gone before each file.
    for role in sorted({n for b in blocks for n in re.findall(r"(?i)\bCREATE ROLE (\w+)", b[2])}):
        psql("postgres", "-q", "-c", f'DROP ROLE IF EXISTS "{role}"')
    if not any(re.search(r"(?im)^\s*CREATE EXTENSION fencing\b", b[2]) for b in blocks):
        psql("app", "-q", "-c", "CREATE EXTENSION fencing")
    for start, setup, body in blocks:
        ran += 1
        script = "\\set VERBOSITY verbose\n" + CRON + "\n" + (setup + "\n" if setup else "") + body + "\n"
        r = psql("app", "-v", "ON_ERROR_STOP=0", "-f", "-", input=script)
        errors = re.findall(r"ERROR:  ([0-9A-Z]{5}): (.*)", r.stderr)
        named = set(re.findall(r"\b([0-9A-Z]{5})\b", body))
        bad = [(c, m) for c, m in errors if c not in named]
        shows_error = re.search(r"(?m)^\s*-- ERROR:", body) is not None
        # A comment that says a statement is refused, raises or fails with a
        # SQLSTATE ("-- refused: 23T01", "-- ERROR: ... (42501)") is a promise.
        promised = set()
        for c in re.findall(r"--(.*)$", body, re.M):
            if re.search(r"\b(refused|raises|ERROR)\b", c):
                promised |= {x for x in re.findall(r"\b([0-9A-Z]{5})\b", c) if re.search(r"[0-9]", x)}
        missing = sorted(promised - {c for c, _ in errors})
        where = f"{rel}:{start}"
        if bad:
            print(f"FAILED - {where}: {bad[0][0]} {bad[0][1]} (the example does not name {bad[0][0]})")
            fail = 1
        elif missing:
            print(f"FAILED - {where}: the example says {missing[0]} is raised, but it was not")
            fail = 1
        elif shows_error and not errors:
            print(f"FAILED - {where}: the example shows an error, but none was raised")
            fail = 1
        elif r.returncode != 0:
            print(f"FAILED - {where}: psql exit status {r.returncode}: {r.stderr.strip()[:300]}")
            fail = 1
        else:
            print(f"ok - {where}" + (f" (raised {', '.join(sorted({c for c, _ in errors}))}, as shown)" if errors else ""))
psql("postgres", "-q", "-c", "DROP DATABASE IF EXISTS app WITH (FORCE)")
if ran == 0:
    print("FAILED - no SQL example found"); fail = 1
print(f"{ran} SQL examples")
sys.exit(fail)
PY
