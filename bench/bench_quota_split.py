"""Benchmark: the per-flavor quota split the reconcile loop computes every cycle (`render.quota_digests`, for
the Kueue decision) and the act stage's Kueue specs read (`render.render_quotas`), and the digests of the other
Kueue objects (`render.kueue_config`), on a generated fleet.

    python bench/bench_quota_split.py [--jobs 10000] [--pools 1000] [--clusters 20] [--repeat 5]

Set-up (not timed): a seeded fleet (bench/generate.py, 50 teams), validated and planned. Timed, CPU seconds,
the collector paused as the loop pauses it:
- `digests_churn_cpu_s`: `quota_digests` of a plan with 1% of its placements gone and the rest running
  (`kept`), after the digests of the plan before: most (cluster, accelerator) splits change, as in a steady
  cycle (the split caches cleared before each repeat; the best of --repeat);
- `render_quotas_warm_cpu_s`: `render_quotas` of the same plan right after its digests (the act stage reuses
  the split through its cache; the best of --repeat);
- `kueue_config_cpu_s`: `render.kueue_config`, the digests of every cluster's other Kueue objects, which the loop
  computes again only when a file outside `jobs/` changed (a merge to the fleet or the policies; the best of
  --repeat).
One JSON line; it names the machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import generate

from reconciler.catalog import load_catalog
from reconciler.gcpause import paused_gc
from reconciler.pipeline import check
from reconciler.plan import plan, quotasplit
from reconciler.render import flavor_quota, kueue_config, quota_digests, render_quotas


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    files = {k: t.encode() for k, t in generate(a.clusters, a.pools, 50, a.jobs, 7).items()}
    catalog = load_catalog()
    v = check(files, catalog)
    assert v.ok, v.errors[:3]
    before = plan(v)
    gone = len(before.placements) // 100
    after = replace(before, placements=tuple(replace(p, status="kept") for p in before.placements[gone:]))
    churn = warm = objects = float("inf")
    with paused_gc():
        for _ in range(a.repeat):
            quotasplit._split.cache_clear()
            flavor_quota._digests.cache_clear()
            quota_digests(v, before)
            c = time.process_time()
            digests = quota_digests(v, after)
            churn = min(churn, time.process_time() - c)
            c = time.process_time()
            quotas = render_quotas(v, after)
            warm = min(warm, time.process_time() - c)
            c = time.process_time()
            lines = kueue_config(v, catalog)
            objects = min(objects, time.process_time() - c)
    print(json.dumps({"machine": f"{platform.machine()} {platform.python_version()}", "jobs": a.jobs,
                      "clusters": a.clusters, "placements": len(after.placements), "flavor_quotas": len(quotas),
                      "digest_lines": sum(map(len, digests.values())), "digests_churn_cpu_s": round(churn, 3),
                      "render_quotas_warm_cpu_s": round(warm, 3), "kueue_objects": sum(map(len, lines.values())),
                      "kueue_config_cpu_s": round(objects, 3)}))


if __name__ == "__main__":
    main()
