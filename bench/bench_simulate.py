"""Benchmark of `fleet simulate`: every policy on the same traces and faults, over several seeds, with spreads.

    python bench/bench_simulate.py [--jobs 10000] [--days 30] [--interval 300] [--load 0.9]
                                   [--seeds 1,2,3] [--policies fleet,fifo,cheapest,kueue,kueue-multikueue]
                                   [--restart-minutes 10] [--trace FILE] [--repo .]

Per seed: a generated trace of --jobs jobs over --days on the repository's fleet (seeded by the seed; or
--trace FILE, the same trace for every seed, e.g. an Alibaba import), the default fault model seeded by the
seed, and every policy on it, the loop every --interval seconds of simulated time. One JSON line per run
(wall and CPU seconds, the load average, the figures), then per metric a table: each policy's mean and
its range (min-max) over the seeds. Bigger is better for jobs and accelerator-hours completed and goodput;
smaller for waits, lost work, dollars per kept accelerator-hour and violations.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.generate import generate
from reconciler.simulate.policies import make
from reconciler.simulate.results import result
from reconciler.simulate.trace import Trace, load_trace, write_lines
from reconciler.sources import read_worktree

METRICS: list[tuple[str, Callable[[dict[str, Any]], float], str]] = [
    ("jobs completed", lambda d: d["jobs"]["completed"], "{:,.0f}"),
    ("accelerator-hours completed", lambda d: d["accelerator_hours_completed"], "{:,.0f}"),
    ("production queue wait p99 (min)", lambda d: d["queue_wait_minutes"].get("production", {}).get("p99", 0.0),
     "{:,.0f}"),
    ("critical queue wait p99 (min)", lambda d: d["queue_wait_minutes"].get("critical", {}).get("p99", 0.0),
     "{:,.0f}"),
    ("goodput", lambda d: d["goodput"], "{:.3f}"),
    ("allocation", lambda d: d["allocation"], "{:.3f}"),
    ("$ per kept accelerator-hour", lambda d: d["usd_per_kept_accelerator_hour"], "{:,.2f}"),
    ("lost accelerator-hours (incl. restarts)", lambda d: d["lost_accelerator_hours"], "{:,.0f}"),
    ("lost per accelerator-hour run", lambda d: d["_lost_per_run"], "{:.4f}"),
    ("cost ($)", lambda d: d["cost_usd"], "{:,.0f}"),
    ("preemptions", lambda d: d["preemptions"], "{:,.0f}"),
    ("violations: quota accelerator-hours", lambda d: d["violations"]["quota_accelerator_hours"], "{:,.0f}"),
    ("violations: budget team-hours", lambda d: d["violations"]["budget_hours"], "{:,.1f}"),
]


def tables(docs: dict[str, list[dict[str, Any]]], seeds: list[int]) -> str:
    names = list(docs)
    lines = [f"Mean over seeds {', '.join(map(str, seeds))} [min-max]; stdev in the JSON lines.", "",
             "| metric | " + " | ".join(f"`{n}`" for n in names) + " |", "|---|" + "---:|" * len(names)]
    for label, get, fmt in METRICS:
        cells = []
        for n in names:
            xs = [float(get(d)) for d in docs[n]]
            cells.append(f"{fmt.format(statistics.fmean(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--interval", type=int, default=300)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--policies", default="fleet,fifo,cheapest,kueue,kueue-multikueue")
    ap.add_argument("--restart-minutes", type=float, default=None)
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--repo", type=Path, default=Path("."))
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    policies = args.policies.split(",")
    print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                      "load_avg": os.getloadavg()}), flush=True)
    files = read_worktree(args.repo)
    catalog = load_catalog()
    v = check({p: b for p, b in files.items() if not p.startswith("jobs/")}, catalog)
    faults = FaultModel()
    if args.restart_minutes is not None:
        faults = FaultModel(restart_minutes=args.restart_minutes)
    docs: dict[str, list[dict[str, Any]]] = {n: [] for n in policies}
    for seed in seeds:
        t0, c0 = time.perf_counter(), time.process_time()
        text = (args.trace.read_text() if args.trace is not None
                else write_lines(generate(v, args.jobs, args.days, seed, args.load)))
        trace = load_trace(str(args.trace or "generated.jsonl"), text.encode(), files, catalog)
        assert isinstance(trace, Trace), trace[:5]
        print(json.dumps({"seed": seed, "generate_and_load_s": round(time.perf_counter() - t0, 2),
                          "cpu_s": round(time.process_time() - c0, 2), "jobs": len(trace.jobs)}), flush=True)
        for name in policies:
            t0, c0 = time.perf_counter(), time.process_time()
            sim = Engine(trace, faults, seed, args.days, args.interval)
            policy = make(name, sim)
            sim.run(policy)
            d = dict(result(sim, name, args.days, seed).doc)
            d["_lost_per_run"] = round(sim.c.lost_acc_h / sim.c.busy_acc_h, 4) if sim.c.busy_acc_h else 0.0
            docs[name].append(d)
            print(json.dumps({"policy": name, "seed": seed, "wall_s": round(time.perf_counter() - t0, 1),
                              "cpu_s": round(time.process_time() - c0, 1), "load_avg": os.getloadavg()[0],
                              "cycles": getattr(policy, "cycles", None),
                              "lost_by": {k: round(x, 1) for k, x in sorted(sim.c.lost_by.items())}, **d}),
                  flush=True)
    size = (f"trace {args.trace}" if args.trace is not None
            else f"generated: {args.jobs} jobs, {args.days:g} days, load {args.load}")
    print(f"\n{size}, interval {args.interval} s, restart {faults.restart_minutes:g} min\n")
    print(tables(docs, seeds))


if __name__ == "__main__":
    main()
