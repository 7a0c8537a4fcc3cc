"""Benchmark: one point of `fleet cost --history` for the example fleet (`pipeline.cost_point`: its files
checked, planned from git with the improvement phase, priced), what each of bench_history.py's 1,000 cold
commits costs a worker.

    python bench/bench_cost_point.py [--repeat 20]

The files are this checkout's example fleet, read once; a first point warms the parse cache, as consecutive
commits share their files; then `--repeat` points. One JSON line: CPU seconds per point (mean of the repeats).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from reconciler.catalog import load_catalog
from reconciler.load import ParseCache
from reconciler.pipeline import cost_point
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    files = read_worktree(ROOT)
    catalog, cache = load_catalog(), ParseCache()
    cost_point("warm", "", "", files, catalog, cache)
    t = time.process_time()
    for i in range(a.repeat):
        point = cost_point(str(i), "", "", files, catalog, cache)
    per = (time.process_time() - t) / a.repeat
    print(json.dumps({"machine": f"{platform.machine()} {platform.python_version()}", "repeat": a.repeat,
                      "point_cpu_s": round(per, 4), "placed": point.placed, "pending": point.pending}))


if __name__ == "__main__":
    main()
