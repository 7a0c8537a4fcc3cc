"""Benchmark: one `fleet reconcile` cycle for 10,000 jobs on 1,000 pools across 20 local clusters (target: < 5 s
on the 2-core machine, < 1.5 GiB peak memory).

    python bench/bench_reconcile.py [--jobs 10000] [--pools 1000] [--clusters 20] [--churn 0.01] [--seed 7]

Set-up (not timed): a seeded fleet (bench/generate.py) with a kubeconfig context per cluster and a Lease cluster;
its plan; the clusters running it: every placed training or batch job running where the plan put it (a JobSet
with Fleet's labels and units, a running Workload owned by it), every unit of every pool a node. The API servers
(tests/kube_api.py, one per cluster) run in a child process, as real ones would be elsewhere.

Timed: `Reconciler.cycle()` itself, the real code path: read and validate the repository, observe the 20 servers,
plan from the snapshot, decide, take the Lease, write the completion records, act (server-side apply of the
new JobSets, deletes, Events, against the servers; the pools and Kueue stacks through a stack runner that only
records the specs, since Pulumi against clouds is not what is measured) and record. Two cycles: the first after
a (re)start (it applies every inference service and every cluster's quotas once, having no memory), then, a
minute later, the steady cycle the target is about: `--churn` of the jobs finished, as many files removed
(their JobSets stopped) and as many new files merged (started). One JSON line: wall and CPU seconds of each
cycle and of its stages, the servers' CPU during the steady cycle, actions by kind and outcome, peak RSS, and
the size and encoding CPU of the memory `--memory FILE` would write after the steady cycle (not written here).
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
from reconciler.apply.pool_guard import Preview
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


def objects(files: dict[str, str], churn: float, seed: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """(the clusters now, the churn a minute later, the job files that arrive then). Per cluster: `listed`
    [(plural, key, bytes)] served by list only, and `real` objects (get, delete)."""
    import random

    v = pipeline.check({k: t.encode() for k, t in files.items()}, load_catalog())
    assert v.ok, v.errors[:3]
    plan = pipeline.plan(v)
    rng = random.Random(seed)
    names = sorted({c.name for c in v.loaded.clusters})
    namespaces = {t.name: t.queue_namespace for t in v.loaded.teams.teams} if v.loaded.teams else {}
    kinds = {j.id: j.kind for j in v.loaded.jobs}
    now: dict[str, Any] = {c: {"listed": [], "real": []} for c in names}
    later: dict[str, Any] = {c: {"listed": [], "real": []} for c in names}
    templates: dict[str, list[str]] = {}

    def encode(p: Any, phase: str) -> list[tuple[str, tuple[str, str], bytes]]:
        team, _, name = p.job.partition("/")
        if phase not in templates:
            templates[phase] = [json.dumps(o, separators=(",", ":"))
                                for o in job_objects("TEAM", "JOBNAME", "POOL", phase, admitted=400)]
        out = []
        for tpl in templates[phase]:
            obj = json.loads(tpl.replace("JOBNAME", name).replace("POOL", p.pool).replace("uid-TEAM-", f"uid-{team}-"))
            ns = namespaces.get(team, team)
            obj["metadata"]["namespace"] = ns
            if obj["kind"] == "JobSet":
                obj["metadata"]["annotations"] = {"fleet.dev/units": ",".join(map(str, p.units))}
                obj["metadata"]["labels"]["fleet.dev/team"] = team
            plural = "jobsets" if obj["kind"] == "JobSet" else "workloads"
            out.append((plural, (ns, obj["metadata"]["name"]), json.dumps(obj, separators=(",", ":")).encode()))
        return out

    running = [p for p in plan.placements if kinds.get(p.job) != "inference"]   # services: no JobSet
    for p in running:
        now[p.cluster]["listed"] += encode(p, "running")
    k = max(1, int(len(plan.placements) * churn))
    for p in rng.sample(running, k):                                            # finished since
        later[p.cluster]["listed"] += encode(p, "succeeded")
    for i, p in enumerate(rng.sample(running, k)):                              # files gone: stopped
        team = p.job.split("/")[0]
        objs = job_objects(namespaces.get(team, team), f"gone-{i:05d}", p.pool, "running", admitted=400)
        objs[0]["metadata"]["labels"]["fleet.dev/team"] = team
        later[p.cluster]["real"] += objs
    arrivals = {}                                                               # new files: started
    job_paths = sorted(f for f in files if f.startswith("jobs/"))
    for i, path in enumerate(rng.sample(job_paths, k)):
        team = path.split("/")[1]
        arrivals[f"jobs/{team}/new-{i:05d}.yaml"] = re.sub(r"name: job-\d+", f"name: new-{i:05d}", files[path])
    pools = {(pp.cluster, pp.pool): pp for pp in plan.pools}
    tpu = {(p.cluster, p.name) for p in v.pools if p.kind == "tpu"}
    for (cluster, pool), pp in pools.items():
        for u in range(pp.target):
            if (cluster, pool) in tpu:
                n = node(f"{pool}-s{u}-h0", node_pool=f"{pool}-s{u}")
            else:
                n = node(f"{pool}-n{u}", pool=pool, accel="gpu")
            now[cluster]["listed"].append(("nodes", ("", n["metadata"]["name"]), json.dumps(n).encode()))
    return now, later, arrivals


def _load(c: KubeCluster, part: dict[str, Any]) -> None:
    by: dict[str, list[Any]] = {}
    for plural, key, data in part["listed"]:
        by.setdefault(plural, []).append((key, data))
    for plural, items in by.items():
        c.add_listed(plural, items)
    if part["real"]:
        c.add(*part["real"])


def _serve(names: list[str], state: dict[str, Any], later: dict[str, Any], conn: Any) -> None:
    servers = {name: KubeCluster(name).start() for name in names}
    for name, c in servers.items():
        _load(c, state[name])
    conn.send(([servers[n].url for n in names], time.process_time()))
    conn.recv()                                   # a minute later: the churn
    for name, c in servers.items():
        _load(c, later[name])
    conn.send(time.process_time())
    conn.recv()
    conn.send((time.process_time(), sum(len(c.requests) for c in servers.values())))


class Runner:
    def __init__(self) -> None:
        self.stacks: list[str] = []

    def up(self, spec: dict[str, Any]) -> dict[str, int]:
        self.stacks.append(spec["stack"])
        return {"update": 1}

    def preview_steps(self, spec: dict[str, Any]) -> Preview:
        return Preview({})      # the loop's pool guard previews each infra stack first: this runner replaces nothing


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _summary(report: Any, wall_s: float, cpu_s: float) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    for r in report.results:
        key = f"{r.action.kind}:{r.status}"
        outcomes[key] = outcomes.get(key, 0) + 1
    return {"wall_s": round(wall_s, 2), "cpu_s": round(cpu_s, 2), "leader": report.leader,
            "errors": list(report.errors), "actions": dict(sorted(outcomes.items())),
            "stages_wall_s": {k: round(v, 2) for k, v in report.timings.items()},
            "stages_cpu_s": {k: round(v, 2) for k, v in report.cpu_timings.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("--churn", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", type=Path, default=None, help="write the timed cycle's cProfile stats here")
    args = ap.parse_args()
    files = fleet(args)
    state, later, arrivals = objects(files, args.churn, args.seed)
    names = sorted(state)
    parent, child = mp.Pipe()
    proc = mp.get_context("fork").Process(target=_serve, args=(names, state, later, child), daemon=True)
    proc.start()
    urls, _ = parent.recv()
    del state, later
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
        # 1. the first cycle after a (re)start: every service applied once, every cluster's quotas once
        t, cpu = time.perf_counter(), _cpu_s()
        first = _summary(loop.cycle(), time.perf_counter() - t, _cpu_s() - cpu)
        # 2. a minute later: jobs finished, files removed, new files merged
        parent.send("churn")
        server_cpu_ready = parent.recv()
        for rel, text in arrivals.items():
            (repo / rel).write_text(text)
        loop.clock = lambda: NOW + timedelta(minutes=1)
        t, cpu = time.perf_counter(), _cpu_s()
        if args.profile:
            import cProfile

            with cProfile.Profile() as prof:
                report = loop.cycle()
            prof.dump_stats(args.profile)
        else:
            report = loop.cycle()
        steady = _summary(report, time.perf_counter() - t, _cpu_s() - cpu)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        cpu = _cpu_s()     # what `--memory FILE` would write after this cycle (not timed above: no file here)
        memory = loop.memory.model_dump_json(indent=1)
        memory_cpu = _cpu_s() - cpu
    parent.send("done")
    server_cpu_end, requests = parent.recv()
    proc.join(5)
    print(json.dumps({
        "machine": f"{platform.machine()} {platform.python_version()}", "jobs": args.jobs, "pools": args.pools,
        "clusters": args.clusters, "churn": args.churn, "cycle": steady,
        "servers_cpu_s": round(server_cpu_end - server_cpu_ready, 2), "first_cycle_after_start": first,
        "stacks_run": len(runner.stacks), "requests_in_all": requests,
        "load_average_1m": round(os.getloadavg()[0], 1), "peak_rss_mib": round(rss),
        "memory_file_bytes": len(memory.encode()), "memory_dump_cpu_s": round(memory_cpu, 3),
        "memory_running_jobsets": sum(map(len, loop.memory.last_running.values()))}))


if __name__ == "__main__":
    main()
