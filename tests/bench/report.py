#!/usr/bin/env python3
"""report.py RESULTS_DIR -- turns RESULTS_DIR/latest.csv into latest.md and charts.

Called by tests/scripts/bench.sh at the end of `make bench` (and usable on its
own to re-render a CSV). Every figure is a median over the interleaved rounds;
every ratio between variants is paired: the median over rounds of the ratio
within a round (the variants of a round ran back to back, under the same
machine load). Prints each target with MET/MISSED.
Environment (all optional): BENCH_PROFILE, BENCH_WALL_SECONDS, BENCH_BUDGET,
BENCH_PG_VERSION, BENCH_PARTIAL (1 when the time budget cut the run short).
"""
import csv
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

RESULTS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results"))
ROWS = list(csv.DictReader(open(os.path.join(RESULTS, "latest.csv"))))


def values(suite, variant, param, metric):
    out = []
    for r in ROWS:
        if r["suite"] == suite and r["variant"] == variant and r["param"] == param and r["metric"] == metric:
            try:
                out.append(float(r["value"]))
            except ValueError:
                pass
    return out


def med(suite, variant, param, metric):
    v = values(suite, variant, param, metric)
    return statistics.median(v) if v else None


def by_run(suite, variant, param, metric):
    out = {}
    for r in ROWS:
        if r["suite"] == suite and r["variant"] == variant and r["param"] == param and r["metric"] == metric:
            try:
                out[r["run"]] = float(r["value"])
            except ValueError:
                pass
    return out


def paired(suite, num, den, param, metric):
    """Median over rounds of num/den within the round."""
    a, b = by_run(suite, num, param, metric), by_run(suite, den, param, metric)
    rs = [a[k] / b[k] for k in a if k in b and b[k] > 0 and a[k] >= 0]
    return statistics.median(rs) if rs else None


def params(suite):
    """The suite's params in order of appearance, or by number when they are all "name=<number>"."""
    seen = []
    for r in ROWS:
        if r["suite"] == suite and r["param"] not in seen:
            seen.append(r["param"])
    try:
        return sorted(seen, key=lambda p: float(p.split("=", 1)[1]))
    except (IndexError, ValueError):
        return seen


def paired_params(suite, variant, p_num, p_den, metric):
    """Median over rounds of variant's metric at p_num over the same at p_den, within the round."""
    a, b = by_run(suite, variant, p_num, metric), by_run(suite, variant, p_den, metric)
    rs = [a[k] / b[k] for k in a if k in b and b[k] > 0]
    return statistics.median(rs) if rs else None


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt(x, digits=0):
    if x is None:
        return "n/a"
    if digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def fx(x):
    return "n/a" if x is None else f"{x:.2f}x"


def param_value(p):
    return p.split("=", 1)[1] if "=" in p else p


# ------------------------------------------------------------------ targets --
targets = []  # (suite, text, measured, goal, ok or None)


def target(suite, text, measured, goal, ok):
    targets.append((suite, text, measured, goal, ok))


a_fence = med("A", "fence_cycle", "", "ops_per_s")
a_recipe = med("A", "recipe_cycle", "", "ops_per_s")
a_bare = med("A", "bare_cycle", "", "ops_per_s")
def with_cpu(r, c, what="server CPU"):
    """'1.23x' plus the same ratio computed from CPU per operation, when there is one."""
    return fx(r) + ("" if c is None else f" ({what}: {fx(c)})")


r = paired("A", "fence_cycle", "recipe_cycle", "", "ops_per_s")
c = paired("A", "recipe_cycle", "fence_cycle", "", "server_cpu_us")
target("A", "acquire+release cycles: fencing vs hand-rolled recipe", with_cpu(r, c), ">= 3x", None if r is None else r >= 3)
r = paired("A", "fence_cycle", "bare_cycle", "", "ops_per_s")
c = paired("A", "bare_cycle", "fence_cycle", "", "server_cpu_us")
target("A", "acquire+release cycles: fencing vs bare advisory locks", with_cpu(r, c), ">= 0.7x", None if r is None else r >= 0.7)

bulk_param = next(iter(params("B_bulk")), "")
b_unp = med("B_bulk", "unprotected", bulk_param, "seconds")
b_pro = med("B_bulk", "protected", bulk_param, "seconds")
r = paired("B_bulk", "protected", "unprotected", bulk_param, "seconds")
c = paired("B_bulk", "protected", "unprotected", bulk_param, "cpu_seconds")
target("B", f"bulk UPDATE ({param_value(bulk_param) or '?'} rows): time protected / unprotected", with_cpu(r, c, "backend CPU"), "<= 1.05x",
       None if r is None else r <= 1.05)
for sync in ("on", "off"):
    p = f"sync={sync}"
    r = paired("B_single", "protected", "unprotected", p, "ops_per_s")
    c = paired("B_single", "unprotected", "protected", p, "backend_cpu_us")
    target("B", f"single-row UPDATEs, 2 clients, synchronous_commit={sync}: throughput protected / unprotected",
           with_cpu(r, c, "backend CPU"), ">= 0.97x", None if r is None else r >= 0.97)

for sync, goal in (("off", 2.0), ("on", 1.2)):
    p = f"sync={sync}"
    r = paired("C", "e2e_fencing", "e2e_redis", p, "ops_per_s")
    c = paired("C", "e2e_redis", "e2e_fencing", p, "server_cpu_us")
    target("C", f"end to end, synchronous_commit={sync}: (a) fencing vs (b) Redis throughput", with_cpu(r, c),
           f">= {goal:g}x", None if r is None else r >= goal)
    pa, pb, pc = (med("C", v, p, "p99_us") for v in ("e2e_fencing", "e2e_redis", "e2e_advisory"))
    ok = None if None in (pa, pb, pc) else (pa < pb and pa < pc)
    target("C", f"end to end, synchronous_commit={sync}: p99 of (a) below (b) and (c)",
           f"{fmt(pa)} / {fmt(pb)} / {fmt(pc)} µs", "(a) lowest", ok)

r = paired_params("D_growth", "acquire_lat", "resources=1000000", "resources=1000", "p50_us")
c = paired_params("D_growth", "acquire_lat", "resources=1000000", "resources=1000", "server_cpu_us")
target("D", "acquire p50 at 1,000,000 resources / at 1,000", with_cpu(r, c), "<= 1.2x", None if r is None else r <= 1.2)
d1m = med("D_disk", "fence_state", "resources=1000000", "bytes_per_resource")
target("D", "fence state on disk per resource at 1,000,000 resources",
       "n/a" if d1m is None else f"{d1m:.1f} B", "<= 100 B", None if d1m is None else d1m <= 100)

# Fenced writes against the no-op C trigger (suite G, and suite B's UPDATEs):
# (label, suite, fencing variant, no-op variant, param, CPU metric, wall
# metric, wall is a rate, goal).
WRITES = (
    ("single-row INSERT (prepared, 2 clients)", "G", "fencing", "noop", "single_insert", "backend_cpu_us", "ops_per_s", True, 1.10),
    ("single-row UPDATE (prepared, 2 clients, synchronous_commit=on)", "B_single", "protected", "noop_c_trigger", "sync=on",
     "backend_cpu_us", "ops_per_s", True, 1.10),
    ("single-row DELETE with the transaction's token (fencing.use, DELETE, COMMIT; 2 clients)", "G", "fencing", "noop",
     "single_delete", "backend_cpu_us", "ops_per_s", True, 1.10),
    ("INSERT ... SELECT of new keys", "G", "fencing", "noop", "insert_select", "cpu_seconds", "seconds", False, 1.10),
    ("COPY FROM of new keys", "G", "fencing", "noop", "copy", "cpu_seconds", "seconds", False, 1.10),
    ("DELETE of every row with the transaction's token", "G", "fencing", "noop", "delete", "cpu_seconds", "seconds", False, 1.10),
    ("bulk UPDATE", "B_bulk", "protected", "noop_c_trigger", bulk_param, "cpu_seconds", "seconds", False, 1.02),
)


def write_ratios(suite, num, den, param, cpu, wall, rate):
    """(CPU ratio, wall ratio) of num over den: time per write, higher is costlier."""
    c = paired(suite, num, den, param, cpu)
    t = paired(suite, den, num, param, wall) if rate else paired(suite, num, den, param, wall)
    return c, t


for lbl, suite, num, den, p, cpu, wall, rate, goal in WRITES:
    c, t = write_ratios(suite, num, den, p, cpu, wall, rate)
    if c is None and t is None:
        continue
    target(suite, f"{lbl}: backend CPU fencing / no-op C trigger", f"{fx(c)} (wall: {fx(t)})", f"<= {goal:.2f}x",
           None if c is None else c <= goal)
# The 1.2 goal, from the cycles of both kinds run at the same moments
# (fencebench pair), when the run has them: separate runs of the two moved
# by a fifth from one batch of rounds to the next on the same build.
if values("A_pair", "fencing", "", "ops_per_s"):
    r = paired("A_pair", "fencing", "bare", "", "ops_per_s")
    c = paired("A_pair", "bare", "fencing", "", "backend_cpu_us")
    target("A", "acquire+release cycles: fencing vs bare advisory locks at the same moments, 1.2 goal",
           with_cpu(r, c, "backend CPU"), ">= 0.9x", None if r is None else r >= 0.9)
else:
    r = paired("A", "fence_cycle", "bare_cycle", "", "ops_per_s")
    target("A", "acquire+release cycles: fencing vs bare advisory locks, 1.2 goal", fx(r), ">= 0.9x",
           None if r is None else r >= 0.9)

if values("E", "base_cycle", "", "ops_per_s"):
    r = paired("E", "fence_cycle", "base_cycle", "", "ops_per_s")
    c = paired("E", "base_cycle", "fence_cycle", "", "server_cpu_us")
    target("E", "plain acquire+release cycle, options unused: this build vs the baseline build", with_cpu(r, c),
           ">= 0.97x", None if r is None else r >= 0.97)
r = paired("F_notify", "notify_other", "notify_none", "", "ops_per_s")
c = paired("F_notify", "notify_none", "notify_other", "", "server_cpu_us")
target("F", "acquire+release cycles, notifications enabled for another resource only / none", with_cpu(r, c),
       ">= 0.97x", None if r is None else r >= 0.97)
r = paired("F_stats", "stats_on", "stats_off", "cycle", "ops_per_s")
c = paired("F_stats", "stats_off", "stats_on", "cycle", "server_cpu_us")
target("F", "acquire+release cycles, statistics collected (preloaded) / not", with_cpu(r, c), ">= 0.95x",
       None if r is None else r >= 0.95)

# ------------------------------------------------------------------ machine --
def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def mem_gib():
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def disk_of(path):
    try:
        out = subprocess.run(["df", "-h", "--output=source,fstype", path], capture_output=True, text=True).stdout
        return " ".join(out.strip().splitlines()[-1].split())
    except Exception:
        return "unknown"


now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
wall = os.environ.get("BENCH_WALL_SECONDS", "?")
partial = os.environ.get("BENCH_PARTIAL", "0") == "1"

# ------------------------------------------------------------------- charts --
charts = []


def gnuplot(name, script, data):
    """Renders RESULTS/name.svg from a gnuplot script; data: {file: text}."""
    if shutil.which("gnuplot") is None:
        return
    with tempfile.TemporaryDirectory() as d:
        for fname, text in data.items():
            with open(os.path.join(d, fname), "w") as f:
                f.write(text)
        out = os.path.join(RESULTS, name + ".svg")
        head = ("set terminal svg size 720,420 dynamic enhanced font 'Helvetica,12' background rgb 'white'\n"
                f"set output '{out}'\nset grid ytics lc rgb '#dddddd'\nset key top left\n")
        p = subprocess.run(["gnuplot"], input=head + script, text=True, cwd=d, capture_output=True)
        if p.returncode == 0 and os.path.exists(out):
            charts.append(name)
        else:
            print(f"gnuplot {name}: {p.stderr.strip()}", file=sys.stderr)


HIST = "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\nset boxwidth 0.9\n"

if a_fence or a_recipe or a_bare:
    data = "".join(f"\"{lbl}\" {v or 0}\n" for lbl, v in
                   (("fencing acquire+release", a_fence), ("recipe: lock+counter+unlock", a_recipe),
                    ("bare advisory lock+unlock", a_bare)))
    gnuplot("cycles", HIST + "set title 'A. Acquire-and-release cycles (2 clients, 10,000 resources)'\n"
            "set ylabel 'cycles/s (median)'\nset yrange [0:*]\nset key off\n"
            "plot 'a.dat' using 2:xtic(1) lc rgb '#3b75af'\n", {"a.dat": data})

if params("C"):
    lines = []
    for v, lbl in (("e2e_fencing", "(a) fencing"), ("e2e_redis", "(b) Redis + PG"), ("e2e_advisory", "(c) advisory + counter")):
        lines.append(f"\"{lbl}\" {med('C', v, 'sync=on', 'ops_per_s') or 0} {med('C', v, 'sync=off', 'ops_per_s') or 0} "
                     f"{med('C', v, 'sync=on', 'p50_us') or 0} {med('C', v, 'sync=off', 'p50_us') or 0} "
                     f"{med('C', v, 'sync=on', 'p99_us') or 0} {med('C', v, 'sync=off', 'p99_us') or 0}\n")
    data = "".join(lines)
    gnuplot("e2e_throughput", HIST + "set title 'C. Lock, fenced write, release (2 clients, 10,000 resources)'\n"
            "set ylabel 'cycles/s (median)'\nset yrange [0:*]\nset key top right\n"
            "plot 'c.dat' using 2:xtic(1) title 'synchronous\\_commit=on' lc rgb '#3b75af', "
            "'' using 3 title 'synchronous\\_commit=off' lc rgb '#ef8636'\n", {"c.dat": data})
    gnuplot("e2e_latency", HIST + "set title 'C. Cycle latency, p50 and p99 (µs, log scale)'\n"
            "set ylabel 'µs'\nset logscale y\n"
            "plot 'c.dat' using 4:xtic(1) title 'p50 on' lc rgb '#9cc3e6', '' using 6 title 'p50 off' lc rgb '#f6c197', "
            "'' using 5 title 'p99 on' lc rgb '#3b75af', '' using 7 title 'p99 off' lc rgb '#ef8636'\n", {"c.dat": data})

if bulk_param:
    order = ("unprotected", "protected", "plpgsql", "recipe", "noop_c_trigger")
    labels = {"unprotected": "unprotected", "protected": "fencing.protect", "plpgsql": "PL/pgSQL trigger",
              "recipe": "WHERE fence\\_token < T", "noop_c_trigger": "no-op C trigger"}
    data = "".join(f"\"{labels[v]}\" {med('B_bulk', v, bulk_param, 'seconds') or 0}\n" for v in order)
    gnuplot("trigger_bulk", HIST + f"set title 'B. UPDATE of {param_value(bulk_param)} rows (median seconds)'\n"
            "set ylabel 'seconds'\nset yrange [0:*]\nset key off\nset xtics rotate by -15\n"
            "plot 'b.dat' using 2:xtic(1) lc rgb '#3b75af'\n", {"b.dat": data})

if params("D_growth"):
    lines = []
    for p in params("D_growth"):
        n = param_value(p)
        lines.append(f"{n} {med('D_growth', 'acquire_lat', p, 'p50_us') or 0} {med('D_growth', 'bare_lat', p, 'p50_us') or 0}\n")
    gnuplot("growth", "set title 'D. Acquisition latency vs resources ever acquired (1 client)'\n"
            "set logscale x\nset xlabel 'distinct resources in fence state'\nset ylabel 'p50 latency (µs)'\n"
            "set yrange [0:*]\nset format x '10^{%L}'\n"
            "plot 'g.dat' using 1:2 with linespoints lw 2 title 'fencing.acquire\\_xact', "
            "'' using 1:3 with linespoints lw 2 title 'pg\\_advisory\\_xact\\_lock (no token)'\n", {"g.dat": "".join(lines)})

if params("D_contention"):
    lines = []
    for p in params("D_contention"):
        n = param_value(p)
        lines.append(f"{n} {med('D_contention', 'hot_fencing', p, 'ops_per_s') or 0} "
                     f"{med('D_contention', 'hot_bare', p, 'ops_per_s') or 0} "
                     f"{med('D_contention', 'hot_fencing', p, 'fairness') or 0} "
                     f"{med('D_contention', 'hot_bare', p, 'fairness') or 0}\n")
    gnuplot("contention", "set title 'D. Contention on one resource'\nset logscale x 2\nset xlabel 'clients'\n"
            "set ylabel 'handoffs/s (median)'\nset y2label 'fairness: longest wait / mean wait'\n"
            "set yrange [0:*]\nset y2range [0:*]\nset ytics nomirror\nset y2tics\nset key top right\n"
            "plot 'h.dat' using 1:2 with linespoints lw 2 title 'fencing handoffs/s', "
            "'' using 1:3 with linespoints lw 2 title 'bare advisory handoffs/s', "
            "'' using 1:4 axes x1y2 with linespoints dt 2 title 'fencing fairness', "
            "'' using 1:5 axes x1y2 with linespoints dt 2 title 'bare fairness'\n", {"h.dat": "".join(lines)})


def scaling_rows():
    """(rows, unprotected s, protected s, paired ratio) per table size; suite B's table included."""
    out = []
    for suite, p in [("D_rows", p) for p in params("D_rows")] + ([("B_bulk", bulk_param)] if bulk_param else []):
        if not values(suite, "protected", p, "seconds"):
            continue
        out.append((int(param_value(p)), med(suite, "unprotected", p, "seconds"), med(suite, "protected", p, "seconds"),
                    paired(suite, "protected", "unprotected", p, "seconds"),
                    paired(suite, "protected", "unprotected", p, "cpu_seconds")))
    return sorted(out)


if params("D_width") or params("D_rows"):
    wl = []
    for p in params("D_width"):
        wl.append(f"{param_value(p)} {paired('D_width', 'protected', 'unprotected', p, 'seconds') or 0}\n")
    rl = [f"{n} {r or 0}\n" for n, unp, pro, r, _ in scaling_rows()]
    gnuplot("trigger_scaling", "set multiplot layout 1,2 title 'D. Trigger cost: UPDATE time protected / unprotected'\n"
            "set yrange [0.9:*]\nset key off\nset ylabel 'ratio (median)'\n"
            "set xlabel 'columns'\nset logscale x\nset title 'vs table width'\n"
            "plot 'w.dat' using 1:2 with linespoints lw 2 pt 7, 1.05 dt 2 lc rgb 'red'\n"
            "set xlabel 'rows'\nset format x '10^{%L}'\nset title 'vs row count'\n"
            "plot 'r.dat' using 1:2 with linespoints lw 2 pt 7, 1.05 dt 2 lc rgb 'red'\nunset multiplot\n",
            {"w.dat": "".join(wl), "r.dat": "".join(rl)})

# ----------------------------------------------------------------- markdown --
md = []
w = md.append
w("# fencing benchmark: last run\n")
w(f"Generated by `make bench` ({os.environ.get('BENCH_PROFILE', '?')} profile) on {now}; "
  f"wall time {wall} s (budget {os.environ.get('BENCH_BUDGET', '600')} s)"
  + ("; **cut short by the time budget, some results are missing**" if partial else "") + ".\n")
w("| machine | |\n|---|---|")
w(f"| CPU | {cpu_model()} |")
w(f"| cores (nproc) | {os.cpu_count()} |")
w(f"| memory | {mem_gib()} |")
w(f"| disk | {disk_of(RESULTS)} |")
w(f"| PostgreSQL | {os.environ.get('BENCH_PG_VERSION', 'unknown')} (fsync on; synchronous_commit on unless stated) |")
w(f"| kernel | {os.uname().release} |")
w("")
w("Every comparison runs its variants interleaved (rounds, rotating order); figures are medians over the "
  "rounds; ratios are paired: the median over rounds of the ratio within a round. Raw data: `latest.csv`.\n")

w("## Targets\n")
w("| suite | target | measured | goal | result |\n|---|---|---|---|---|")
for suite, text, measured, goal, ok in targets:
    res = "not measured" if ok is None else ("**MET**" if ok else "**MISSED**")
    w(f"| {suite} | {text} | {measured} | {goal} | {res} |")
w("")

if a_fence or a_recipe or a_bare:
    w("## A. Acquire-and-release cycles\n")
    w("2 clients, random resources out of 10,000 (fence state created beforehand), autocommit statements.\n")
    w("| variant | cycles/s | p50 µs | p99 µs | server CPU µs/cycle | fencing / variant, throughput | fencing / variant, server CPU |\n"
      "|---|---:|---:|---:|---:|---:|---:|")
    for v, lbl in (("fence_cycle", "fencing: `acquire($1)`; `release($1)`"),
                   ("recipe_cycle", "recipe: `pg_advisory_lock(hashtext)`; `UPDATE counters ... RETURNING token`; `pg_advisory_unlock`"),
                   ("bare_cycle", "bare: `pg_advisory_lock`; `pg_advisory_unlock` (no token)")):
        ops = med("A", v, "", "ops_per_s")
        w(f"| {lbl} | {fmt(ops)} | {fmt(med('A', v, '', 'p50_us'))} | {fmt(med('A', v, '', 'p99_us'))} | "
          f"{fmt(med('A', v, '', 'server_cpu_us'), 1)} | {fx(paired('A', 'fence_cycle', v, '', 'ops_per_s'))} | "
          f"{fx(paired('A', 'fence_cycle', v, '', 'server_cpu_us'))} |")
    w("\nServer CPU: on-CPU time of the clients' backends plus the WAL writer per cycle (from /proc/PID/schedstat); "
      "it moves much less with the machine's other load than throughput does.")
    w("")
    if values("A_pair", "fencing", "", "ops_per_s"):
        w("The same two cycles at the same moments (`fencebench pair pair_cycle`): each client alternates 32 "
          "`fence_cycle`s and 32 `bare_cycle`s on one connection and reads its backend's CPU time between them. "
          "Cycles/s = clients / mean cycle time of that variant.\n")
        w("| variant | cycles/s | p50 µs | p99 µs | backend CPU µs/cycle | fencing / variant, throughput | "
          "fencing / variant, backend CPU |\n|---|---:|---:|---:|---:|---:|---:|")
        for v, lbl in (("fencing", "fencing: `acquire($1)`; `release($1)`"),
                       ("bare", "bare: `pg_advisory_lock`; `pg_advisory_unlock` (no token)")):
            w(f"| {lbl} | {fmt(med('A_pair', v, '', 'ops_per_s'))} | {fmt(med('A_pair', v, '', 'p50_us'))} | "
              f"{fmt(med('A_pair', v, '', 'p99_us'))} | {fmt(med('A_pair', v, '', 'backend_cpu_us'), 1)} | "
              f"{fx(paired('A_pair', 'fencing', v, '', 'ops_per_s'))} | "
              f"{fx(paired('A_pair', 'fencing', v, '', 'backend_cpu_us'))} |")
        w("")

if values("E", "fence_cycle", "", "ops_per_s"):
    w("## E. Lock options: lock_delay, shared holds, permits\n")
    w("2 clients, random resources out of 10,000 (fence state, and permit 1 of each, created beforehand), autocommit: "
      "`acquire($1, <option>)`; `release($1)`. `baseline` is the plain cycle of the build of FENCING_BENCH_BASE, "
      "installed as its own extension in a database of its own on the same cluster, in the same rounds.\n")
    w("| variant | cycles/s | p50 µs | p99 µs | server CPU µs/cycle | variant / plain, throughput | variant / plain, server CPU |\n"
      "|---|---:|---:|---:|---:|---:|---:|")
    for v, lbl in (("fence_cycle", "plain: `acquire($1)`"), ("base_cycle", "baseline build: `acquire($1)`"),
                   ("delay_cycle", "`acquire($1, lock_delay => '5 s')`"), ("shared_cycle", "`acquire($1, shared => true)`"),
                   ("permit_cycle", "`acquire($1, permits => 4)`")):
        if not values("E", v, "", "ops_per_s"):
            continue
        w(f"| {lbl} | {fmt(med('E', v, '', 'ops_per_s'))} | {fmt(med('E', v, '', 'p50_us'))} | {fmt(med('E', v, '', 'p99_us'))} | "
          f"{fmt(med('E', v, '', 'server_cpu_us'), 1)} | {fx(paired('E', v, 'fence_cycle', '', 'ops_per_s'))} | "
          f"{fx(paired('E', v, 'fence_cycle', '', 'server_cpu_us'))} |")
    w("")
if params("E_contention"):
    w("One resource, 8 clients, each looping acquire; release (`hot_fencing` exclusive, `hot_shared` shared: nobody "
      "waits, `hot_permits` 4 permits). Fairness = longest acquire wait / mean acquire wait.\n")
    w("| clients | variant | cycles/s | p50 wait µs | p99 wait µs | fairness | per-client spread |\n|---:|---|---:|---:|---:|---:|---:|")
    for p in params("E_contention"):
        for v in ("hot_fencing", "hot_shared", "hot_permits"):
            mn, mx = med("E_contention", v, p, "client_min_ops"), med("E_contention", v, p, "client_max_ops")
            spread = "n/a" if mn is None or mx is None else f"{fmt(mn)} / {fmt(mx)}"
            w(f"| {param_value(p)} | {v} | {fmt(med('E_contention', v, p, 'ops_per_s'))} | {fmt(med('E_contention', v, p, 'p50_us'))} | "
              f"{fmt(med('E_contention', v, p, 'p99_us'))} | {fmt(med('E_contention', v, p, 'fairness'), 1)} | {spread} |")
    w("")

if params("C"):
    w("## C. Lock, fenced write, release: end to end\n")
    w("2 clients, 10,000 resources. (a) `UPDATE items_a SET fence_token = fencing.acquire_xact($1), v = $2 WHERE id = $3` "
      "(one autocommit statement; the table is protected); (b) Redis `SET lock NX PX`, `INCR`, PostgreSQL "
      "`UPDATE ... WHERE id = $3 AND fence_token < $2`, Lua compare-and-delete; (c) `pg_advisory_lock(hashtext)`, "
      "counter table, `UPDATE ... AND fence_token < $2`, `pg_advisory_unlock`.\n")
    w("| synchronous_commit | variant | cycles/s | p50 µs | p99 µs | server CPU µs/cycle | (a) / variant (throughput) |\n"
      "|---|---|---:|---:|---:|---:|---:|")
    for sync in ("on", "off"):
        p = f"sync={sync}"
        for v, lbl in (("e2e_fencing", "(a) fencing"), ("e2e_redis", "(b) Redis + PostgreSQL"), ("e2e_advisory", "(c) advisory lock + counter")):
            ops = med("C", v, p, "ops_per_s")
            w(f"| {sync} | {lbl} | {fmt(ops)} | {fmt(med('C', v, p, 'p50_us'))} | {fmt(med('C', v, p, 'p99_us'))} | "
              f"{fmt(med('C', v, p, 'server_cpu_us'), 1)} | {fx(paired('C', 'e2e_fencing', v, p, 'ops_per_s'))} |")
    w("\nServer CPU: backends + WAL writer + redis-server.")
    w("")

if bulk_param:
    w(f"## B. Enforcement trigger\n")
    w(f"Bulk: `UPDATE bulk SET fence_token = T, v = v + 1` over {param_value(bulk_param)} rows (int primary key, "
      "VACUUM before every run, same table for every variant: the variants switch its trigger). "
      "`no-op C trigger` is `tests/bench/noop_trigger.c`, a C BEFORE ROW trigger that returns the row: the floor of any row trigger.\n")
    w("| variant | median s | / unprotected | backend CPU s | CPU / unprotected | runs (s) |\n|---|---:|---:|---:|---:|---|")
    for v, lbl in (("unprotected", "unprotected"), ("protected", "fencing.protect"), ("plpgsql", "PL/pgSQL trigger, same check"),
                   ("recipe", "recipe: `... WHERE fence_token < T`"), ("noop_c_trigger", "no-op C trigger")):
        m = med("B_bulk", v, bulk_param, "seconds")
        runs = ", ".join(f"{x:.2f}" for x in values("B_bulk", v, bulk_param, "seconds"))
        w(f"| {lbl} | {fmt(m, 2)} | {fx(paired('B_bulk', v, 'unprotected', bulk_param, 'seconds'))} | "
          f"{fmt(med('B_bulk', v, bulk_param, 'cpu_seconds'), 2)} | {fx(paired('B_bulk', v, 'unprotected', bulk_param, 'cpu_seconds'))} | {runs} |")
    w("")
if params("B_single"):
    w("Single-row: the pgbench `-M prepared -c 2` workload (run by fencebench, so that CPU is measured too): "
      "`UPDATE single SET fence_token = fence_token + 1, v = v + 1 WHERE id = $1`, random id out of 100,000.\n")
    w("| synchronous_commit | variant | updates/s | / unprotected | p50 µs | p99 µs | backend CPU µs/update | CPU / unprotected |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|")
    for p in params("B_single"):
        for v, lbl in (("unprotected", "unprotected"), ("protected", "fencing.protect"), ("noop_c_trigger", "no-op C trigger")):
            if not values("B_single", v, p, "ops_per_s"):
                continue
            w(f"| {param_value(p)} | {lbl} | {fmt(med('B_single', v, p, 'ops_per_s'))} | "
              f"{fx(paired('B_single', v, 'unprotected', p, 'ops_per_s'))} | {fmt(med('B_single', v, p, 'p50_us'))} | "
              f"{fmt(med('B_single', v, p, 'p99_us'))} | {fmt(med('B_single', v, p, 'backend_cpu_us'), 1)} | "
              f"{fx(paired('B_single', v, 'unprotected', p, 'backend_cpu_us'))} |")
    w("")

if params("G"):
    w("## G. Fenced writes against a no-op C trigger\n")
    w("Each write on a table protected with `fencing.protect()`'s defaults (tombstones on) against the same statements "
      "on a table of the same shape with a no-op C BEFORE ROW trigger (`tests/bench/noop_trigger.c`), the two variants "
      "at the same moments. Single-row statements: 2 clients, prepared, autocommit (the DELETE: `BEGIN`, "
      "`SELECT fencing.use(T)`, the DELETE, `COMMIT`), each client alternating 32 statements of each variant on one "
      "connection (`fencebench pair`), its backend's CPU read between them; "
      f"bulk statements: one statement of {fmt(med('G', 'info', '', 'insert_rows'))} rows (`INSERT ... SELECT`, "
      f"`COPY`) or {fmt(med('G', 'info', '', 'rows'))} rows (the DELETE) on each of two tables created afresh "
      "together (the DELETE's loaded before their triggers), the two statements right after each other on one "
      "connection, the first rotating. "
      "Backend CPU per write (µs, single-row) or per statement (s, bulk); ratios are paired medians over the rounds "
      "(the DELETE's over its pairs, several in each round). "
      "The UPDATE lines come from suite B, acquire+release from suite A.\n")
    w("| write | no-op C trigger: backend CPU | fencing: backend CPU | CPU fencing / no-op | wall time fencing / no-op |\n"
      "|---|---:|---:|---:|---:|")
    for lbl, suite, num, den, p, cpu, wall, rate, goal in WRITES:
        c, t = write_ratios(suite, num, den, p, cpu, wall, rate)
        if c is None and t is None:
            continue
        digits = 1 if cpu == "backend_cpu_us" else 3
        unit = " µs" if cpu == "backend_cpu_us" else " s"
        a, b = med(suite, den, p, cpu), med(suite, num, p, cpu)
        w(f"| {lbl} | {fmt(a, digits)}{unit if a is not None else ''} | {fmt(b, digits)}{unit if b is not None else ''} | "
          f"{fx(c)} | {fx(t)} |")
    c = paired("A", "fence_cycle", "bare_cycle", "", "server_cpu_us")
    t = paired("A", "bare_cycle", "fence_cycle", "", "ops_per_s")
    w(f"| acquire + release cycle, against bare advisory locks (server CPU, and time, per cycle) | "
      f"{fmt(med('A', 'bare_cycle', '', 'server_cpu_us'), 1)} µs | {fmt(med('A', 'fence_cycle', '', 'server_cpu_us'), 1)} µs | "
      f"{fx(c)} | {fx(t)} |")
    w(f"\nThe bulk UPDATE writes {param_value(bulk_param) or 'n/a'} rows (suite B).")
    w("")

if params("D_growth") or params("D_contention") or params("D_width"):
    w("## D. How cost grows\n")
if params("D_growth"):
    w("Acquisition latency (`SELECT fencing.acquire_xact($1)`, autocommit, 1 client, random existing resources) against "
      "the number of resources in the fence state (one database per size, `r1` .. `rN`, the sizes measured interleaved), "
      "next to `pg_advisory_xact_lock(hashtext($1))` in the same rounds.\n")
    w("| resources | fencing p50 µs | fencing p99 µs | fencing server CPU µs | bare p50 µs | fencing / bare p50 | fence state bytes/resource |\n"
      "|---:|---:|---:|---:|---:|---:|---:|")
    for p in params("D_growth"):
        fp, bp = med("D_growth", "acquire_lat", p, "p50_us"), med("D_growth", "bare_lat", p, "p50_us")
        w(f"| {fmt(float(param_value(p)))} | {fmt(fp, 1)} | {fmt(med('D_growth', 'acquire_lat', p, 'p99_us'))} | "
          f"{fmt(med('D_growth', 'acquire_lat', p, 'server_cpu_us'), 1)} | {fmt(bp, 1)} | "
          f"{fx(paired('D_growth', 'acquire_lat', 'bare_lat', p, 'p50_us'))} | {fmt(med('D_disk', 'fence_state', p, 'bytes_per_resource'), 1)} |")
    w("")
if params("D_contention"):
    w("Contention: every client loops `fencing.acquire('hot')`; `fencing.release('hot')` (bare: `pg_advisory_lock`/"
      "`unlock`). Handoffs/s = cycles/s; fairness = longest acquire wait / mean acquire wait; "
      "per-client spread = fewest / most cycles of one client.\n")
    w("| clients | fencing handoffs/s | fencing fairness | fencing p99 wait µs | bare handoffs/s | bare fairness | fencing per-client spread |\n"
      "|---:|---:|---:|---:|---:|---:|---:|")
    for p in params("D_contention"):
        mn, mx = med("D_contention", "hot_fencing", p, "client_min_ops"), med("D_contention", "hot_fencing", p, "client_max_ops")
        spread = "n/a" if mn is None or mx is None else f"{fmt(mn)} / {fmt(mx)}"
        w(f"| {param_value(p)} | {fmt(med('D_contention', 'hot_fencing', p, 'ops_per_s'))} | "
          f"{fmt(med('D_contention', 'hot_fencing', p, 'fairness'), 1)} | {fmt(med('D_contention', 'hot_fencing', p, 'p99_us'))} | "
          f"{fmt(med('D_contention', 'hot_bare', p, 'ops_per_s'))} | {fmt(med('D_contention', 'hot_bare', p, 'fairness'), 1)} | {spread} |")
    w("")
if params("D_width"):
    w("Trigger cost against table width (`UPDATE wN SET fence_token = T`, int columns, VACUUM before every run):\n")
    w("| columns | unprotected s | protected s | protected / unprotected | CPU protected / unprotected |\n|---:|---:|---:|---:|---:|")
    for p in params("D_width"):
        u, pr = med("D_width", "unprotected", p, "seconds"), med("D_width", "protected", p, "seconds")
        w(f"| {param_value(p)} | {fmt(u, 3)} | {fmt(pr, 3)} | {fx(paired('D_width', 'protected', 'unprotected', p, 'seconds'))} | "
          f"{fx(paired('D_width', 'protected', 'unprotected', p, 'cpu_seconds'))} |")
    w("")
rows_ = scaling_rows()
if rows_:
    w("Trigger cost against row count (`UPDATE sN SET fence_token = T, v = v + 1`; the largest size below 10^7 is suite B's table):\n")
    w("| rows | unprotected s | protected s | protected / unprotected | CPU protected / unprotected | trigger µs per row |\n"
      "|---:|---:|---:|---:|---:|---:|")
    for n, u, pr, r, c in rows_:
        per_row = None if u is None or r is None else (r - 1) * u / n * 1e6
        w(f"| {n:,} | {fmt(u, 3)} | {fmt(pr, 3)} | {fx(r)} | {fx(c)} | {fmt(per_row, 2)} |")
    w("")

if values("F_notify", "notify_none", "", "ops_per_s") or params("F_stats"):
    w("## F. Notifications and statistics, off and on\n")
    w("Acquire-and-release cycles as in A (2 clients, 10,000 resources), in interleaved rounds. Notifications: "
      "none enabled; enabled for another resource only (the check every grant makes); enabled for the whole "
      "database, without a listener and with one reading every 50 ms (each cycle's two statements each commit a "
      "notification). Statistics: a second cluster, restarted before every run with or without fencing in "
      "`shared_preload_libraries`.\n")
    w("| variant | cycles/s | / none | p50 µs | p99 µs | server CPU µs/cycle | CPU / none |\n|---|---:|---:|---:|---:|---:|---:|")
    for v, lbl in (("notify_none", "no notifications"), ("notify_other", "enabled for another resource"),
                   ("notify_all", "enabled for every resource, no listener"),
                   ("notify_all_listen", "enabled for every resource, a listener")):
        w(f"| {lbl} | {fmt(med('F_notify', v, '', 'ops_per_s'))} | {fx(paired('F_notify', v, 'notify_none', '', 'ops_per_s'))} | "
          f"{fmt(med('F_notify', v, '', 'p50_us'))} | {fmt(med('F_notify', v, '', 'p99_us'))} | "
          f"{fmt(med('F_notify', v, '', 'server_cpu_us'), 1)} | {fx(paired('F_notify', v, 'notify_none', '', 'server_cpu_us'))} |")
    lp = next((p for p in params("F_notify") if p.startswith("cycles=")), None)
    if lp:
        n = float(param_value(lp))
        cpu = {v: med("F_notify", f"loop_{v}", lp, "cpu_seconds") for v in ("none", "other")}
        w(f"\nOne backend's loop of {fmt(n)} `acquire`/`release` cycles (`DO` block, one transaction), its own CPU per "
          f"cycle: no notifications {fmt(None if cpu['none'] is None else cpu['none'] / n * 1e6, 2)} µs, enabled for "
          f"another resource {fmt(None if cpu['other'] is None else cpu['other'] / n * 1e6, 2)} µs "
          f"(paired ratio {fx(paired('F_notify', 'loop_other', 'loop_none', lp, 'cpu_seconds'))}).")
    w("")
    w("| statistics | what | not preloaded | preloaded | preloaded / not |\n|---|---|---:|---:|---:|")
    w(f"| cycles | cycles/s | {fmt(med('F_stats', 'stats_off', 'cycle', 'ops_per_s'))} | "
      f"{fmt(med('F_stats', 'stats_on', 'cycle', 'ops_per_s'))} | {fx(paired('F_stats', 'stats_on', 'stats_off', 'cycle', 'ops_per_s'))} |")
    w(f"| cycles | server CPU µs/cycle | {fmt(med('F_stats', 'stats_off', 'cycle', 'server_cpu_us'), 1)} | "
      f"{fmt(med('F_stats', 'stats_on', 'cycle', 'server_cpu_us'), 1)} | "
      f"{fx(paired('F_stats', 'stats_on', 'stats_off', 'cycle', 'server_cpu_us'))} |")
    w(f"| contention, 4 clients on one resource (every acquisition waits) | handoffs/s | "
      f"{fmt(med('F_stats', 'stats_off', 'contention', 'ops_per_s'))} | {fmt(med('F_stats', 'stats_on', 'contention', 'ops_per_s'))} | "
      f"{fx(paired('F_stats', 'stats_on', 'stats_off', 'contention', 'ops_per_s'))} |")
    sp = next((p for p in params("F_stats") if p.startswith("skipped_rows=")), None)
    if sp:
        w(f"| UPDATE of {fmt(float(param_value(sp)))} rows, every row skipped as stale (counted per row) | seconds | "
          f"{fmt(med('F_stats', 'stats_off', sp, 'seconds'), 3)} | {fmt(med('F_stats', 'stats_on', sp, 'seconds'), 3)} | "
          f"{fx(paired('F_stats', 'stats_on', 'stats_off', sp, 'seconds'))} |")
    lp = next((p for p in params("F_stats") if p.startswith("cycles=")), None)
    if lp:
        n = float(param_value(lp))
        a, b = med("F_stats", "stats_off", lp, "cpu_seconds"), med("F_stats", "stats_on", lp, "cpu_seconds")
        w(f"| one backend's loop of {fmt(n)} cycles | backend CPU µs per cycle | {fmt(None if a is None else a / n * 1e6, 2)} | "
          f"{fmt(None if b is None else b / n * 1e6, 2)} | {fx(paired('F_stats', 'stats_on', 'stats_off', lp, 'cpu_seconds'))} |")
    if med("F_stats", "counted", "", "grants") is not None:
        w("\nThe second cluster, restarted with the preload at the end, counted "
          f"{fmt(med('F_stats', 'counted', '', 'grants'))} grant(s) in `fencing.stats` (one expected).")
    w("")

if charts:
    w("## Charts\n")
    for c in charts:
        w(f"![{c}]({c}.svg)\n")

with open(os.path.join(RESULTS, "latest.md"), "w") as f:
    f.write("\n".join(md) + "\n")

print("Targets:")
for suite, text, measured, goal, ok in targets:
    res = "NOT MEASURED" if ok is None else ("MET" if ok else "MISSED")
    print(f"  {res:12} {suite:6} {text}: {measured} (goal {goal})")
print(f"Report: {os.path.join(RESULTS, 'latest.md')}")
