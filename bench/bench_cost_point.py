"""Benchmark: one point of `fleet cost --history` for the example fleet (`pipeline.cost_point`: its files
checked, planned from git with the improvement phase, priced), what each of bench_history.py's 1,000 cold
commits costs a worker.

    python bench/bench_cost_point.py [--repeat 20] [--moves] [--phases]

The files are this checkout's example fleet, read once; a first point warms the parse cache, as consecutive
commits share their files; then `--repeat` points. One JSON line: CPU seconds per point (mean of the repeats).
With `--moves`, also the eject-and-insert attempts of one point (`moves.eject_and_insert`, the improvement
phase's one move), kept and undone, by the function that made them (`moves`; the timing then includes the
counting). With `--phases`, the calls a point makes of the improvement phase's steps and their CPU seconds
(`phases`: inclusive, so nested steps count in both; the wrapping's cost is in the figures).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from reconciler.catalog import load_catalog
from reconciler.load import ParseCache
from reconciler.pipeline import cost_point
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--moves", action="store_true", help="count one point's eject-and-insert attempts")
    ap.add_argument("--phases", action="store_true", help="calls and CPU seconds a point spends in each step")
    a = ap.parse_args()
    counts = count_moves() if a.moves else None
    spent = time_phases() if a.phases else None
    files = read_worktree(ROOT)
    catalog, cache = load_catalog(), ParseCache()
    cost_point("warm", "", "", files, catalog, cache)
    if counts is not None:
        counts.clear()
        cost_point("count", "", "", files, catalog, cache)
        moves = {f"{fn} {'kept' if kept else 'undone'}": n for (fn, kept), n in sorted(counts.items())}
    if spent is not None:
        spent.clear()
    t = time.process_time()
    for i in range(a.repeat):
        point = cost_point(str(i), "", "", files, catalog, cache)
    per = (time.process_time() - t) / a.repeat
    phases = {name: {"calls": round(n / a.repeat, 1), "cpu_s": round(cpu / a.repeat, 4)}
              for name, (n, cpu) in sorted((spent or {}).items(), key=lambda kv: -kv[1][1])}
    print(json.dumps({"machine": f"{platform.machine()} {platform.python_version()}", "repeat": a.repeat,
                      "point_cpu_s": round(per, 4), "placed": point.placed, "pending": point.pending,
                      **({"moves": moves} if counts is not None else {}),
                      **({"phases": phases} if spent is not None else {})}))


def count_moves() -> Counter[tuple[str, bool]]:
    """Wrap `eject_and_insert` where the planner's modules call it; count (caller, kept) per call."""
    from reconciler.plan import improve, locality, moves

    counts: Counter[tuple[str, bool]] = Counter()
    inner = moves.eject_and_insert

    def counted(*args: Any, **kw: Any) -> bool:
        kept = inner(*args, **kw)
        counts[(sys._getframe(1).f_code.co_name, kept)] += 1
        return kept

    for module in (improve, locality, moves):
        module.eject_and_insert = counted   # type: ignore[attr-defined]
    return counts


PHASES = {"improve": ("insert_pending", "eject_pairs", "reduce_cost", "repack", "repack_pools", "relocate",
                       "bring_home", "place_all", "frees_room", "frees_unit", "kicks", "polish"),
          "moves": ("try_insert", "frees_room", "frees_unit")}


def time_phases() -> dict[str, list[float]]:
    """Wrap the steps of `PHASES` where their modules call them; (calls, CPU seconds) per step."""
    import importlib

    spent: dict[str, list[float]] = {}

    def timed(name: str, inner: Any) -> Any:
        def run(*args: Any, **kw: Any) -> Any:
            t = time.process_time()
            try:
                return inner(*args, **kw)
            finally:
                row = spent.setdefault(name, [0, 0.0])
                row[0] += 1
                row[1] += time.process_time() - t
        return run

    for module_name, names in PHASES.items():
        module = importlib.import_module(f"reconciler.plan.{module_name}")
        for name in names:
            setattr(module, name, timed(f"{name} ({module_name})", getattr(module, name)))
    return spent


if __name__ == "__main__":
    main()
