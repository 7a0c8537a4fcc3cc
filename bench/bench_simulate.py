"""Benchmark of `fleet simulate`: speed, and the quality of the policies on the same trace and faults.

    python bench/bench_simulate.py [--jobs 10000] [--days 30] [--interval 300] [--load 0.9] [--seed 1]
                                   [--policies fleet,kueue,cheapest,fifo] [--repo .]

Speed: a generated trace of --jobs jobs over --days on the repository's fleet (the example by default),
the loop every --interval seconds of simulated time (target: 30 days, 10,000 jobs, 5 minutes, under 10
minutes on a 2-core machine); wall and CPU seconds per policy, and the `fleet` loop's cycles.
Quality: the same trace (about --load of the fleet's capacity at its pools' max) with the default faults,
every policy side by side: production p99 queue wait, goodput, lost accelerator-hours, cost.
One JSON line per policy (the first names the machine), then the Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.generate import generate
from reconciler.simulate.policies import make
from reconciler.simulate.results import markdown, result
from reconciler.simulate.trace import Trace, load_trace, write_lines
from reconciler.sources import read_worktree


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--interval", type=int, default=300)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="fleet,kueue,cheapest,fifo")
    ap.add_argument("--repo", type=Path, default=Path("."))
    args = ap.parse_args()
    print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                      "load_avg": os.getloadavg()[0]}), flush=True)
    files = read_worktree(args.repo)
    catalog = load_catalog()
    v = check({p: b for p, b in files.items() if not p.startswith("jobs/")}, catalog)
    t0, c0 = time.perf_counter(), time.process_time()
    text = write_lines(generate(v, args.jobs, args.days, args.seed, args.load))
    trace = load_trace("generated.jsonl", text.encode(), files, catalog)
    assert isinstance(trace, Trace), trace[:5]
    print(json.dumps({"generate_and_load_s": round(time.perf_counter() - t0, 2),
                      "cpu_s": round(time.process_time() - c0, 2), "jobs": len(trace.jobs)}), flush=True)
    results = []
    for name in args.policies.split(","):
        t0, c0 = time.perf_counter(), time.process_time()
        sim = Engine(trace, FaultModel(), args.seed, args.days, args.interval)
        policy = make(name, sim)
        sim.run(policy)
        r = result(sim, name, args.days, args.seed)
        results.append(r)
        d = r.doc
        print(json.dumps({"policy": name, "wall_s": round(time.perf_counter() - t0, 1),
                          "cpu_s": round(time.process_time() - c0, 1), "cycles": getattr(policy, "cycles", None),
                          "production_p99_wait_min": d["queue_wait_minutes"].get("production", {}).get("p99"),
                          "goodput": d["goodput"], "allocation": d["allocation"],
                          "lost_accelerator_hours": d["lost_accelerator_hours"], "cost_usd": d["cost_usd"],
                          "completed": d["jobs"]["completed"], "migrations": d["migrations"],
                          "preemptions": d["preemptions"], "faults": d["faults"]}), flush=True)
    print(markdown(results, f"generated: {args.jobs} jobs, {args.days:g} days, load {args.load}, seed {args.seed}"))


if __name__ == "__main__":
    main()
