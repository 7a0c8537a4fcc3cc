"""Benchmark: read + load + validate a generated fleet (target: 10,000 jobs and 1,000 pools in < 3 s).

    python bench/bench_validate.py [--jobs 10000 --pools 1000 --clusters 200 --repeat 3]

Generates the fleet with bench/generate.py into bench/out/, then times, best of --repeat runs:
read (the work tree into memory), load (parse + models), validate (cross-document rules), and the whole
`fleet validate` command as a subprocess. Prints one JSON line per size, plus the machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate, write

from reconciler.catalog import load_catalog
from reconciler.load import load
from reconciler.sources import read_worktree
from reconciler.validate import validate


def best_of(n: int, fn):  # type: ignore[no-untyped-def]
    best, result = float("inf"), None
    for _ in range(n):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, nargs="+", default=[10_000])
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--teams", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    catalog = load_catalog()
    print(json.dumps({"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                      "python": platform.python_version()}))
    for jobs in a.jobs:
        out = Path(__file__).resolve().parent / "out" / f"fleet-{jobs}"
        write(out, generate(a.clusters, a.pools, a.teams, jobs, seed=7))
        t_read, files = best_of(a.repeat, lambda out=out: read_worktree(out))
        t_load, loaded = best_of(a.repeat, lambda files=files: load(files))
        t_validate, result = best_of(a.repeat, lambda loaded=loaded: validate(loaded, catalog))
        assert result.ok, result.errors[:5]
        t_cli, _ = best_of(a.repeat, lambda out=out: subprocess.run(
            [sys.executable, "-m", "reconciler", "validate", "--repo", str(out)], check=True, capture_output=True))
        print(json.dumps({"jobs": jobs, "pools": len(result.pools), "clusters": len(loaded.clusters),
                          "read_s": round(t_read, 3), "load_s": round(t_load, 3), "validate_s": round(t_validate, 3),
                          "read_load_validate_s": round(t_read + t_load + t_validate, 3),
                          "cli_s": round(t_cli, 3)}))


if __name__ == "__main__":
    main()
