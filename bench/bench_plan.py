"""Benchmark: planning time as the queue grows (target: 10,000 jobs on 200 clusters / 1,000 pools in < 1 s
of planning, and the whole `fleet plan` command in < 5 s).

    python bench/bench_plan.py [--jobs 1000 5000 10000 20000 50000] [--repeat 3] [--cli-at 10000]

Fleets come from bench/generate.py (seeded). For each size: load + validate once, then the best of
--repeat runs of `plan()` alone; at --cli-at jobs also the whole `fleet plan --format json` as a subprocess
(reading files, validating, planning, writing JSON). With --stages, that command's stages in this process,
one after the other, the collector paused as the CLI pauses it: read, load (parse and build), validate, change
(plan and price), json (CPU s each, `stage_cpu_s`). One JSON line per size; the first line names the machine.
Each time comes with its CPU time (`*_cpu_s`: the machine is shared, so wall time alone says little).
`plan_for_loop_cpu_s`: the best of --repeat `plan(for_people=False)`, as the reconcile loop plans (no pending
job's expected start or measured reasons).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate, write

from reconciler.catalog import load_catalog
from reconciler.gcpause import paused_gc
from reconciler.load import load
from reconciler.pipeline import change, check, plan
from reconciler.sources import read_worktree
from reconciler.validate import validate

T = TypeVar("T")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, nargs="+", default=[1000, 5000, 10_000, 20_000, 50_000])
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--teams", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli-at", type=int, default=10_000)
    ap.add_argument("--stages", action="store_true", help="at --cli-at jobs, also time the command's stages")
    a = ap.parse_args()
    print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()}))
    for jobs in a.jobs:
        out = Path(__file__).resolve().parent / "out" / f"fleet-{jobs}"
        write(out, generate(a.clusters, a.pools, a.teams, jobs, seed=7))
        v = check(read_worktree(out), load_catalog())
        assert v.ok, v.errors[:3]
        best = best_cpu = float("inf")
        for _ in range(a.repeat):
            t, c = time.perf_counter(), time.process_time()
            result = plan(v)
            best = min(best, time.perf_counter() - t)
            best_cpu = min(best_cpu, time.process_time() - c)
        lean = float("inf")
        for _ in range(a.repeat):   # as the reconcile loop plans: no pending job's expected start or reasons
            c = time.process_time()
            plan(v, for_people=False)
            lean = min(lean, time.process_time() - c)
        row = {"jobs": jobs, "pools": len(v.pools), "placed": len(result.placements),
               "pending": len(result.pending), "plan_s": round(best, 3), "plan_cpu_s": round(best_cpu, 3),
               "plan_for_loop_cpu_s": round(lean, 3)}
        if jobs == a.cli_at:
            t, c = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([sys.executable, "-m", "reconciler", "plan", "--repo", str(out), "--format", "json"],
                           check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            row["cli_s"] = round(time.perf_counter() - t, 3)
            row["cli_cpu_s"] = round(after.ru_utime + after.ru_stime - c.ru_utime - c.ru_stime, 3)
        if jobs == a.cli_at and a.stages:
            row["stage_cpu_s"] = stages(out)
        print(json.dumps(row), flush=True)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def stages(repo: Path) -> dict[str, float]:
    """CPU seconds of each stage of `fleet plan --format json` on `repo`, in this process."""
    spent: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], T]) -> T:
        c = _cpu()
        result = fn()
        spent[name] = round(_cpu() - c, 3)
        return result

    with paused_gc():
        files = timed("read", lambda: read_worktree(repo))
        loaded = timed("load", lambda: load(files))
        v = timed("validate", lambda: validate(loaded, load_catalog()))
        c = timed("change", lambda: change(v, None))
        timed("json", lambda: c.head.plan.to_json(None))
    return spent


if __name__ == "__main__":
    main()
