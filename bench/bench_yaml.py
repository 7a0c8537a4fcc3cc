"""Benchmark: reading a generated fleet's job files, alone: the fast reader (`yamlfast.read`), its positions
(`yamlfast.positions`), the whole `yamlio.parse` (checks, then the fast reader or libyaml) and libyaml's reader
(`yamlio.read_with_libyaml`, what every file went through before the fast reader).

    python bench/bench_yaml.py [--jobs 100000] [--pools 2000] [--clusters 200] [--teams 50]

The fleet is bench/generate.py's (seed 7, the one bench_plan.py plans), generated in memory. Each reader runs
once over every job file, in this order, with the collector paused; the fast reader's memo of lines is warm
after its first pass, as in a command that reads a repository. One JSON line: CPU seconds of each, the files
and how many the fast reader read (the rest go to libyaml).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate

from reconciler import yamlfast, yamlio
from reconciler.gcpause import paused_gc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--pools", type=int, default=2000)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--teams", type=int, default=50)
    a = ap.parse_args()
    files = generate(a.clusters, a.pools, a.teams, a.jobs, seed=7)
    texts = [t for p, t in sorted(files.items()) if p.startswith("jobs/")]
    raw = [(p, t.encode()) for p, t in sorted(files.items()) if p.startswith("jobs/")]
    out: dict[str, object] = {"machine": f"{platform.machine()} {platform.python_version()}", "files": len(texts)}

    def cpu(name: str, fn: Callable[[], object]) -> object:
        t = time.process_time()
        found = fn()
        out[f"{name}_cpu_s"] = round(time.process_time() - t, 3)
        return found

    with paused_gc():
        read = cpu("fast_read", lambda: [yamlfast.read(t, yamlio._plain, yamlio.MAX_DEPTH) for t in texts])
        out["fast_read_answered"] = sum(d is not None for d in read)  # type: ignore[attr-defined]
        cpu("fast_positions", lambda: [yamlfast.positions(t, yamlio._plain, yamlio.MAX_DEPTH) for t in texts])
        cpu("parse", lambda: [yamlio.parse(p, b) for p, b in raw])
        cpu("libyaml", lambda: [yamlio.read_with_libyaml(t) for t in texts])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
