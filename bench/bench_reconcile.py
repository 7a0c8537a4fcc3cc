"""Benchmark: one `fleet reconcile` cycle for 10,000 jobs on 1,000 pools across 20 local clusters (target: < 5 s
on the 2-core machine, < 1.5 GiB peak memory).

    python bench/bench_reconcile.py [--jobs 10000] [--pools 1000] [--clusters 20] [--churn 0.01] [--seed 7]

Set-up (not timed): a seeded fleet (bench/generate.py) with a kubeconfig context per cluster and a Lease cluster;
its plan; then the clusters as they would be a little later: every placed job running where the plan put it (a
JobSet with Fleet's labels and units, a running Workload owned by it), every unit of every pool a node, except the
churn: that fraction of the jobs is new (not started yet), as many have finished (Succeeded), and as many JobSets
run whose files are gone. The API servers (tests/kube_api.py, one per cluster) run in a child process, as
real ones would be elsewhere.

Timed: `Reconciler.cycle()` itself, the real code path: read and validate the repository, observe the 20 servers,
plan from the snapshot, decide, take the Lease, write the completion records, act (server-side apply of the
new JobSets, deletes, Events, against the servers; the pools and Kueue stacks through a stack runner that only
records the specs, since Pulumi against clouds is not what is measured) and record. One JSON line: wall and CPU
seconds of the cycle and of its stages, the servers' CPU, actions by kind and outcome, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from generate import generate
from kube_api import KubeCluster, write_kubeconfig
from kube_objects import job_objects, node

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.reconcile.loop import Config, Reconciler

NOW = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def fleet(args: argparse.Namespace) -> dict[str, str]:
    files = generate(args.clusters, args.pools, 50, args.jobs, args.seed)
    names = sorted(p.split("/")[-1][:-5] for p in files if p.startswith("fleet/clusters/"))
    for i, name in enumerate(names):
        path = f"fleet/clusters/{name}.yaml"
        files[path] = re.sub(r"kubernetes: \{cluster: (\S+)\}", rf"kubernetes: {{cluster: \1, context: ctx-{i:02d}}}",
                             files[path])
    files["policies/placement.yaml"] = f"reconcile:\n  lease_cluster: {names[0]}\n"
    return files


def objects(files: dict[str, str], churn: float, seed: int) -> dict[str, dict[str, list[Any]]]:
    """Per cluster: `listed` (plural -> [(key, bytes)]), served by list only, and `real` objects (get/delete)."""
    import random

    v = pipeline.check({k: t.encode() for k, t in files.items()}, load_catalog())
    assert v.ok, v.errors[:3]
    plan = pipeline.plan(v)
    rng = random.Random(seed)
    placements = list(plan.placements)
    rng.shuffle(placements)
    k = int(len(placements) * churn)
    new, finished, running = placements[:k], placements[k:2 * k], placements[2 * k:]
    names = sorted({c.name for c in v.loaded.clusters})
    namespaces = {t.name: t.queue_namespace for t in v.loaded.teams.teams} if v.loaded.teams else {}
    out: dict[str, dict[str, list[Any]]] = {c: {"listed": [], "real": []} for c in names}
    kinds = {j.id: j.kind for j in v.loaded.jobs}
    templates: dict[str, list[str]] = {}

    def add(p: Any, phase: str, job: str | None = None) -> None:
        team, _, name = (job or p.job).partition("/")
        if kinds.get(p.job) == "inference":
            return                                  # services are not JobSets: the loop remembers them
        if phase not in templates:
            templates[phase] = [json.dumps(o, separators=(",", ":")) for o in job_objects("TEAM", "JOBNAME", "POOL", phase,
                                                                                         admitted=400)]
        for tpl in templates[phase]:
            text = (tpl.replace("JOBNAME", name).replace('"TEAM"', json.dumps(namespaces.get(team, team)))
                    .replace("fleet.dev/team\":\"TEAM", f"fleet.dev/team\":\"{team}").replace("POOL", p.pool)
                    .replace("uid-TEAM-", f"uid-{team}-"))
            obj = json.loads(text)
            if obj["kind"] == "JobSet":
                obj["metadata"]["annotations"] = {"fleet.dev/units": ",".join(map(str, p.units))}
                obj["metadata"]["labels"]["fleet.dev/team"] = team
            obj["metadata"]["namespace"] = namespaces.get(team, team)
            plural = "jobsets" if obj["kind"] == "JobSet" else "workloads"
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            out[p.cluster]["listed"].append((plural, key, json.dumps(obj, separators=(",", ":")).encode()))

    for p in running:
        add(p, "running")
    for p in finished:
        add(p, "succeeded")
    for i, p in enumerate(new[: k // 2]):         # as many orphans (files gone) as half the new ones
        team = p.job.split("/")[0]
        objs = job_objects(namespaces.get(team, team), f"gone-{i:05d}", p.pool, "running", admitted=400)
        objs[0]["metadata"]["labels"]["fleet.dev/team"] = team
        out[p.cluster]["real"] += objs
    pools = {(pp.cluster, pp.pool): pp for pp in plan.pools}
    tpu = {(p.cluster, p.name) for p in v.pools if p.kind == "tpu"}
    for (cluster, pool), pp in pools.items():
        for u in range(pp.target):
            if (cluster, pool) in tpu:
                n = node(f"{pool}-s{u}-h0", node_pool=f"{pool}-s{u}")
            else:
                n = node(f"{pool}-n{u}", pool=pool, accel="gpu")
            out[cluster]["listed"].append(("nodes", ("", n["metadata"]["name"]), json.dumps(n).encode()))
    return out


def _serve(names: list[str], state: dict[str, dict[str, list[Any]]], conn: Any) -> None:
    servers = []
    for name in names:
        c = KubeCluster(name).start()
        by: dict[str, list[Any]] = {}
        for plural, key, data in state[name]["listed"]:
            by.setdefault(plural, []).append((key, data))
        for plural, items in by.items():
            c.add_listed(plural, items)
        if state[name]["real"]:
            c.add(*state[name]["real"])
        servers.append(c)
    conn.send(([c.url for c in servers], time.process_time()))
    conn.recv()
    conn.send((time.process_time(), sum(len(c.requests) for c in servers)))


class Runner:
    def __init__(self) -> None:
        self.stacks: list[str] = []

    def up(self, spec: dict[str, Any]) -> dict[str, int]:
        self.stacks.append(spec["stack"])
        return {"update": 1}


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--churn", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", type=Path, default=None, help="write the first cycle's cProfile stats here")
    args = ap.parse_args()
    files = fleet(args)
    state = objects(files, args.churn, args.seed)
    names = sorted(state)
    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=_serve, args=(names, state, child), daemon=True)
    proc.start()
    urls, server_cpu_ready = parent.recv()
    del state
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        del files
        kc = write_kubeconfig(Path(tmp) / "kubeconfig", {f"ctx-{i:02d}": u for i, u in enumerate(urls)})
        runner = Runner()
        lines: list[str] = []
        loop = Reconciler(Config(repo=repo, kubeconfig=str(kc), once=True, identity="bench"),
                          clock=lambda: NOW, say=lines.append, engine=lambda: runner)
        t, cpu = time.perf_counter(), _cpu_s()
        if args.profile:
            import cProfile

            with cProfile.Profile() as prof:
                report = loop.cycle()
            prof.dump_stats(args.profile)
        else:
            report = loop.cycle()
        cycle_s, cycle_cpu_s = time.perf_counter() - t, _cpu_s() - cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        loop.clock = lambda: NOW + timedelta(minutes=1)
        t, cpu = time.perf_counter(), _cpu_s()
        second = loop.cycle()                                    # the next cycle: little left to do
        second_s, second_cpu_s = time.perf_counter() - t, _cpu_s() - cpu
    parent.send("done")
    server_cpu_end, requests = parent.recv()
    proc.join(5)
    outcomes: dict[str, int] = {}
    for r in report.results:
        key = f"{r.action.kind}:{r.status}"
        outcomes[key] = outcomes.get(key, 0) + 1
    print(json.dumps({
        "machine": f"{platform.machine()} {platform.python_version()}", "jobs": args.jobs, "pools": args.pools,
        "clusters": args.clusters, "churn": args.churn, "leader": report.leader, "errors": list(report.errors),
        "cycle_s": round(cycle_s, 2), "cycle_cpu_s": round(cycle_cpu_s, 2),
        "stages_s": {k: round(v, 2) for k, v in report.timings.items()},
        "stages_cpu_s": {k: round(v, 2) for k, v in report.cpu_timings.items()},
        "actions": outcomes, "stacks_run": len(runner.stacks),
        "second_cycle_s": round(second_s, 2), "second_cycle_cpu_s": round(second_cpu_s, 2),
        "second_cycle_actions": len(second.results),
        "second_stages_s": {k: round(v, 2) for k, v in second.timings.items()},
        "second_stages_cpu_s": {k: round(v, 2) for k, v in second.cpu_timings.items()},
        "second_cycle_kinds": sorted({r.action.kind for r in second.results}),
        "servers_cpu_s": round(server_cpu_end - server_cpu_ready, 2), "requests": requests,
        "load_average_1m": round(os.getloadavg()[0], 1), "peak_rss_mib": round(rss)}))


if __name__ == "__main__":
    main()
