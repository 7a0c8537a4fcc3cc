"""A class's queue waits by job size, per policy: who a short p99 starves. Not a timing.

    python bench/waits_by_size.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace \
        --seed 1 --policies fleet,kueue-multikueue
    python bench/waits_by_size.py --jobs 2000 --days 7 --seed 1 --class critical

Runs each policy on the seed's trace as bench_simulate.py does (the same runs, so the same figures) and prints,
for the jobs of --class submitted before the end, grouped by the accelerators each asks (first option times
replicas): how many, how many never started, and the mean, p50, p99 and longest wait in minutes (a job that
never started waits to the end, as in the JSON). Then the plain p99 and the p99 by accelerator of the class.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.simulate.engine import Engine
from reconciler.simulate.policies import make
from reconciler.simulate.results import percentile, weighted_percentile


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, seed=1)
    ap.add_argument("--class", dest="cls", default="production")
    ap.add_argument("--policies", default="fleet,cheapest,kueue-multikueue")
    args = ap.parse_args()
    s, trace = bs.seed_trace(args)
    print(f"{args.cls} queue waits (min) by accelerators asked, seed {args.seed}")
    print("| policy | accelerators | jobs | never started | mean | p50 | p99 | longest |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    summary = []
    for name in args.policies.split(","):
        sim = Engine(trace, bs.faults_of(s), args.seed, s.days, s.interval)
        sim.run(make(name, sim))
        by_size: dict[int, list[float]] = defaultdict(list)
        never: dict[int, int] = defaultdict(int)
        weighted: list[tuple[float, float]] = []
        for j in sim.jobs:
            if j.cls != args.cls or j.submit_s >= sim.end_s:
                continue
            size = j.asked
            wait = ((j.first_start_s if j.first_start_s is not None else sim.end_s) - j.submit_s) / 60
            by_size[size].append(wait)
            never[size] += j.first_start_s is None
            weighted.append((wait, float(size)))
        for size, waits in sorted(by_size.items()):
            print(f"| `{name}` | {size} | {len(waits):,} | {never[size]:,} | {sum(waits) / len(waits):,.0f} | "
                  f"{percentile(waits, 50):,.1f} | {percentile(waits, 99):,.0f} | {max(waits):,.0f} |")
        plain = [w for w, _ in weighted]
        summary.append(f"`{name}`: p99 {percentile(plain, 99):,.0f}, p99 by accelerator "
                       f"{weighted_percentile(weighted, 99):,.0f}, mean {sum(plain) / max(1, len(plain)):,.0f}")
    print()
    print("\n".join(summary))


if __name__ == "__main__":
    main()
