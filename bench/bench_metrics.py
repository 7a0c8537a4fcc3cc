"""Benchmark: one `FleetMetrics.update` of a large fleet, and its exposition (what each reconcile cycle and
each scrape cost).

    python bench/bench_metrics.py [--jobs 10000] [--pools 1000] [--clusters 200] [--repeat 3]

The fleet comes from bench/generate.py (seeded); the snapshot holds every placed job running where the plan
put it (a JobSet and its Workload, as tests/kube_objects.py builds them) and two nodes per pool, one of them
NotReady. Reports the best of --repeat updates (wall and CPU seconds: the machine is shared), the
exposition's size, its series count and the time to write it. One JSON line; the first names the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests")]
from generate import generate, write
from kube_objects import job_objects, node

from reconciler.catalog import load_catalog
from reconciler.observability.metrics import FleetMetrics
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_jobset, parse_node, parse_workload
from reconciler.pipeline import check, plan
from reconciler.sources import read_worktree


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=200)
    ap.add_argument("--teams", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
                      "load": round(os.getloadavg()[0], 1)}))
    out = ROOT / "bench" / "out" / f"metrics-{a.jobs}"
    write(out, generate(a.clusters, a.pools, a.teams, a.jobs, seed=7))
    v = check(read_worktree(out), load_catalog())
    assert v.ok, v.errors[:3]
    p = plan(v)
    by_cluster: dict[str, list[dict[str, object]]] = {c.name: [] for c in v.loaded.clusters}
    for i, pl in enumerate(p.placements):
        team, name = pl.job.split("/")
        by_cluster[pl.cluster] += job_objects(team, name, pl.pool, "running", created=i % 600, admitted=i % 600 + 7)
    for rp in v.pools:
        by_cluster[rp.cluster] += [node(f"{rp.name}-{u}", pool=rp.name, ready=u == 0) for u in range(2)]
    clusters = tuple(ClusterObservation(
        name=c, status="ok", workloads=tuple(parse_workload(o) for o in objs if o["kind"] == "Workload"),
        jobsets=tuple(parse_jobset(o) for o in objs if o["kind"] == "JobSet"),
        nodes=tuple(parse_node(o) for o in objs if o["kind"] == "Node")) for c, objs in sorted(by_cluster.items()))
    now = datetime(2026, 11, 23, 4, tzinfo=UTC)
    best_wall = best_cpu = float("inf")
    for r in range(a.repeat):
        m = FleetMetrics(v.loaded.slos)
        snap = Snapshot(observed_at=now + timedelta(minutes=r), clusters=clusters)
        wall, cpu = time.perf_counter(), time.process_time()
        m.update(v, snap, p, snap.observed_at)
        best_wall, best_cpu = min(best_wall, time.perf_counter() - wall), min(best_cpu, time.process_time() - cpu)
    wall = time.perf_counter()
    text = m.exposition()
    expo_s = time.perf_counter() - wall
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    print(json.dumps({"jobs": a.jobs, "placed": len(p.placements), "pools": len(v.pools), "clusters": len(clusters),
                      "update_wall_s": round(best_wall, 3), "update_cpu_s": round(best_cpu, 3),
                      "exposition_s": round(expo_s, 3), "exposition_bytes": len(text), "series": series}))


if __name__ == "__main__":
    main()
