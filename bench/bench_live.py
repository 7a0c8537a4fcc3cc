"""Benchmark: planning from what runs (`--observed`) on the example fleet, against planning from git alone.

    python bench/bench_live.py [--extra 5000] [--repeat 3]

The snapshot: every job the example plan places runs where the plan put it (its JobSet stamped with the
spec digest and units, its Workload running, built with tests/kube_objects.py and parsed as `fleet observe`
parses), every pool's TPU slices and GPU nodes present (one slice per TPU pool NotReady for an hour), and
`--extra` more running Workloads per cluster of jobs the repository does not have (what `live_inputs` must
scan past). One JSON line: the best of `--repeat` runs (wall and CPU seconds) of `live_inputs` alone, of the
plan from git, and of the plan from the snapshot; how many jobs were kept and moved.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kube_objects import job_objects, node

from reconciler.catalog import load_catalog
from reconciler.models import spec_digest
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_jobset, parse_node, parse_workload
from reconciler.pipeline import check, live_inputs, plan
from reconciler.sources import read_worktree


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    runs = []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        runs.append((time.perf_counter() - w, time.process_time() - c, out))
    return min(runs, key=lambda r: r[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extra", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    v = check(read_worktree(ROOT), load_catalog())
    base = plan(v)
    digests = {j.id: spec_digest(j) for j in v.loaded.jobs}
    objs: dict[str, list[dict[str, Any]]] = {c.name: [] for c in v.loaded.clusters}
    for p in base.placements:
        team, name = p.job.split("/")
        js, wl = job_objects(team, name, p.pool, "running")
        js["metadata"]["annotations"] = {"fleet.dev/spec-digest": digests[p.job],
                                         "fleet.dev/units": ",".join(map(str, p.units))}
        objs[p.cluster] += [js, wl]
    for rp in v.pools:
        for u in range(rp.max):
            if rp.kind == "tpu":
                n = node(f"{rp.name}-s{u}-0", node_pool=f"{rp.name}-s{u}", ready=u != 0)
            else:
                n = node(f"{rp.name}-{u}", pool=rp.name, accel="gpu")
            objs[rp.cluster].append(n)
    for c in objs:
        for i in range(args.extra):
            objs[c] += job_objects("other", f"x{i}", "none", "running")
    parse = {"Workload": parse_workload, "JobSet": parse_jobset, "Node": parse_node}
    clusters = []
    for name, items in sorted(objs.items()):
        got: dict[str, list[Any]] = {"Workload": [], "JobSet": [], "Node": []}
        for o in items:
            got[o["kind"]].append(parse[o["kind"]](o))
        clusters.append(ClusterObservation(name=name, status="ok", workloads=tuple(got["Workload"]),
                                           jobsets=tuple(got["JobSet"]), nodes=tuple(got["Node"])))
    snap = Snapshot(observed_at=datetime(2026, 11, 23, 1, 0, tzinfo=UTC), clusters=tuple(clusters))
    li = best(lambda: live_inputs(v, snap), args.repeat)
    git = best(lambda: plan(v), args.repeat)
    live = best(lambda: plan(v, observed=snap), args.repeat)
    statuses = [p.status for p in live[2].placements]
    print(json.dumps({
        "jobs": len(v.loaded.jobs), "placed_from_git": len(base.placements), "objects": sum(map(len, objs.values())),
        "live_inputs_s": round(li[0], 3), "live_inputs_cpu_s": round(li[1], 3),
        "plan_git_s": round(git[0], 3), "plan_git_cpu_s": round(git[1], 3),
        "plan_observed_s": round(live[0], 3), "plan_observed_cpu_s": round(live[1], 3),
        "kept": statuses.count("kept"), "moved": statuses.count("moved"), "new": statuses.count("new"),
        "python": platform.python_version(), "cpus": __import__("os").cpu_count()}))


if __name__ == "__main__":
    main()
