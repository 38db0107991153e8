#!/usr/bin/env bash
# The postgres_exporter custom-queries sample of docs/operations.md (the YAML
# block of its Monitoring section) is tested: it parses, every query runs
# against a database with fencing (statistics collected or not), and every
# metric names a column the query returns, with a usage postgres_exporter
# knows. Uses the caller's libpq environment (PGHOST, PGPORT, ...).
set -euo pipefail
root="${FENCING_ROOT:?}"
exec timeout --kill-after=5 60 /usr/bin/python3 - "$root/docs/operations.md" <<'PY'
import re, sys
import psycopg, yaml

doc = open(sys.argv[1]).read()
section = doc[doc.index("## Monitoring"):]
m = re.search(r"```yaml\n(.*?)```", section, re.S)
if not m:
    print("FAILED - no YAML block in the Monitoring section"); sys.exit(1)
queries = yaml.safe_load(m.group(1))
usages = {"LABEL", "COUNTER", "GAUGE", "DISCARD", "HISTOGRAM", "MAPPEDMETRIC", "DURATION"}
failures = 0
with psycopg.connect("", autocommit=True) as conn:
    conn.execute("SET client_min_messages = warning")
    conn.execute("CREATE EXTENSION IF NOT EXISTS fencing")
    conn.execute("CREATE TABLE IF NOT EXISTS exporter_t (id int PRIMARY KEY, fence_token bigint)")
    conn.execute("SELECT fencing.protect('exporter_t')")
    for name, q in queries.items():
        cur = conn.execute(q["query"])
        cols = [d.name for d in cur.description]
        rows = cur.fetchall()
        for metric in q["metrics"]:
            (col, spec), = metric.items()
            ok = col in cols and spec.get("usage") in usages and spec.get("description")
            print(("ok - " if ok else "FAILED - ") + f"{name}.{col} ({spec.get('usage')})")
            failures += not ok
        print(f"ok - {name}: {len(rows)} row(s), columns {', '.join(cols)}")
        if not rows:
            print(f"FAILED - {name} returned no row"); failures += 1
sys.exit(1 if failures else 0)
PY
