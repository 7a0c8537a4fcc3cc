"""Idempotence as a property (issue 20 item 4): a fleet that runs exactly plan P, observed by a reconciler that
has no memory and no base (its first cycle: a new checkout, a restart), plans P again and decides nothing.

Fleets are generated over the small two-cluster fleet of tests/builders.py: batch jobs on TPU slices and GPU
nodes, inference services of 1-4 replicas (spread by default, `spread: cluster`, `spread: none`). P is the plan
from git alone; the snapshot is what a cluster runs when P is applied: a running JobSet and Workload per batch
placement (with render's `fleet.dev/units`), a ready Deployment per service group (render's name, pool and
replica count) with a running pod on each unit the group holds, and the nodes of every pool at its target
(TPU slice i is node pool `<pool>-s<i>`). The Kueue quotas a first cycle applies are left out: the snapshot
does not read ClusterQueues, so a reconciler with no memory cannot know they are already applied.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kube_objects import T0, node, serving

from reconciler.catalog import load_catalog
from reconciler.models import spec_digest
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_deployment, parse_jobset, parse_node, parse_pod, parse_workload
from reconciler.pipeline import check, plan
from reconciler.plan.spread import group_replicas
from reconciler.plan.types import Plan
from reconciler.reconcile.decide import Knobs, LoopMemory, decide, job_facts
from reconciler.render.service import workload_name
from reconciler.validate import Validated

from builders import job, with_files

CAT = load_catalog()
NOW = T0 + timedelta(hours=2)


def batch(name: str, tpu: bool, size: int) -> str:
    if tpu:
        return (f"name: {name}\nteam: vision\noptions:\n  - {{accelerator: tpu-v5p, topology: 4x4x4, slices: {size}}}\n"
                "duration_hours: 24\ncheckpoint_minutes: 30\nimage: img:1\n")
    return job(name, count=8 * size, body="checkpoint_minutes: 30\n")


def service(name: str, replicas: int, spread: str | None, count: int) -> str:
    return (f"name: {name}\nteam: vision\npriority: production\nkind: inference\nreplicas: {replicas}\nport: 8080\n"
            + (f"spread: {spread}\n" if spread else "")
            + f"options:\n  - {{accelerator: nvidia-h100-80gb, count: {count}}}\nimage: img:1\n")


jobs_st = st.tuples(
    st.lists(st.tuples(st.booleans(), st.integers(1, 2)), max_size=3),
    st.lists(st.tuples(st.integers(1, 4), st.sampled_from([None, "cluster", "none"]), st.sampled_from([1, 8])),
             max_size=3))


def repo(batches: list[tuple[bool, int]], services: list[tuple[int, str | None, int]]) -> Validated:
    files: dict[str, str | None] = {"jobs/vision/train.yaml": None}
    for i, (tpu, size) in enumerate(batches):
        files[f"jobs/vision/b{i}.yaml"] = batch(f"b{i}", tpu, size)
    for i, (replicas, spread, count) in enumerate(services):
        files[f"jobs/vision/s{i}.yaml"] = service(f"s{i}", replicas, spread, count)
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    return v


def node_name(pool: str, unit: int, tpu: bool) -> str:
    """Slice i's first host, or GPU node i (zero-padded: observe numbers a GPU pool's nodes by name)."""
    return f"{pool}-s{unit}-0" if tpu else f"{pool}-{unit:03d}"


def pods(team: str, namespace: str, name: str, pl: Any, tpu: bool) -> list[dict[str, Any]]:
    """The running pods of a service group: one per unit entry of its placement, on that unit's node."""
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{name}-{pl.pool}-{i}", "namespace": namespace,
                          "labels": {"fleet.dev/team": team, "fleet.dev/job": name, "fleet.dev/pool": pl.pool}},
             "spec": {"nodeName": node_name(pl.pool, u, tpu)},
             "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
            for i, u in enumerate(pl.units)]


def shape(v: Validated, p: Plan) -> list[tuple[str, str, str, int, tuple[int, ...]]]:
    """The placements that matter: job, cluster, pool, how many units, and which for TPU slices (a GPU pool's
    nodes are interchangeable)."""
    kinds = {pp.key: pp.kind for pp in v.pools}
    return sorted((x.job, x.cluster, x.pool, len(x.units), x.units if kinds[f"{x.cluster}/{x.pool}"] == "tpu" else ())
                  for x in p.placements)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(jobs_st)
def test_a_fleet_that_runs_the_plan_plans_it_again_and_gets_no_write(generated: Any) -> None:
    v = repo(*generated)
    first = plan(v)
    snap = running(v, first)
    again = plan(v, observed=snap, now=NOW)
    assert shape(v, again) == shape(v, first)
    assert not again.preemptions and {q.job for q in again.pending} == {q.job for q in first.pending}
    knobs = Knobs.of(v.loaded.placement)
    d = decide(again, snap, LoopMemory(), knobs, NOW, jobs=job_facts(v))
    assert [a.describe() for a in d.actions if a.kind != "kueue"] == []
    # and every later cycle: the memory the first one leaves changes nothing
    later = NOW + timedelta(minutes=1)
    d2 = decide(plan(v, base=again, observed=snap, now=later), snap, d.memory, knobs, later, jobs=job_facts(v))
    assert [a.describe() for a in d2.actions] == []


def test_the_example_fleet_running_its_plan_gets_no_write_on_the_first_cycle() -> None:
    """The repository's own example (6 clusters, services spread over zones and clusters, TPU and GPU work):
    observed running its plan by a reconciler with no memory, it is planned the same and nothing is done
    (a first cycle used to re-apply a service onto spot nodes and add a replica elsewhere, as `start`s)."""
    from pathlib import Path

    from reconciler import sources

    root = Path(__file__).resolve().parents[1]
    v = check(sources.read_worktree(root), CAT)
    assert v.ok
    first = plan(v)
    snap = running(v, first)
    again = plan(v, observed=snap, now=NOW)
    assert shape(v, again) == shape(v, first)
    d = decide(again, snap, LoopMemory(), Knobs.of(v.loaded.placement), NOW, jobs=job_facts(v))
    assert [a.describe() for a in d.actions if a.kind != "kueue"] == []


def running(v: Validated, p: Plan) -> Snapshot:
    """What the clusters show once `p` is applied and everything runs (each job in its team's namespace, as
    render puts it)."""
    from kube_objects import job_objects

    assert v.loaded.teams is not None
    ns = {t.name: t.queue_namespace for t in v.loaded.teams.teams}
    objs: dict[str, list[dict[str, Any]]] = {c.name: [] for c in v.loaded.clusters}
    kinds = {pp.key: pp.kind for pp in v.pools}
    jobs = {j.id: j for j in v.loaded.jobs}
    groups: dict[tuple[str, str], list[Any]] = {}
    for pl in p.placements:
        j = jobs[pl.job]
        if j.kind == "inference":
            groups.setdefault((pl.job, pl.cluster), []).append(pl)
            continue
        tpu = kinds[f"{pl.cluster}/{pl.pool}"] == "tpu"
        js, wl = job_objects(j.team, j.name, pl.pool, "running", admitted=30, accel="tpu" if tpu else "gpu",
                             per_pod=4 if tpu else 8)
        for o in (js, wl):
            o["metadata"]["namespace"] = ns[j.team]
        js["metadata"]["annotations"] = {"fleet.dev/spec-digest": spec_digest(j),
                                         "fleet.dev/units": ",".join(map(str, pl.units))}
        objs[pl.cluster] += [js, wl]
    for (job_id, cluster), pls in groups.items():
        team, name = job_id.split("/")
        options = {o.index: o for o in v.options[job_id]}
        for pl in pls:
            n = group_replicas(pl.accelerators_per_unit, len(pl.units), options[pl.option].count)
            obj = serving(team, name, pl.pool, replicas=n, ready=n, name=workload_name(name, pl.pool, len(pls)))
            obj["metadata"]["namespace"] = ns[team]
            objs[cluster].append(obj)
            objs[cluster] += pods(team, ns[team], name, pl, kinds[f"{cluster}/{pl.pool}"] == "tpu")
    for pp in p.pools:
        tpu = kinds[f"{pp.cluster}/{pp.pool}"] == "tpu"
        for u in range(pp.target):
            objs[pp.cluster].append(node(node_name(pp.pool, u, tpu), node_pool=f"{pp.pool}-s{u}") if tpu else
                                    node(node_name(pp.pool, u, tpu), pool=pp.pool, accel="gpu"))
    return Snapshot(observed_at=NOW, clusters=tuple(
        ClusterObservation(
            name=name, status="ok",
            jobsets=tuple(parse_jobset(o) for o in found if o["kind"] == "JobSet"),
            workloads=tuple(parse_workload(o) for o in found if o["kind"] == "Workload"),
            nodes=tuple(sorted((parse_node(o) for o in found if o["kind"] == "Node"), key=lambda n: n.name)),
            services=tuple(x for o in found if o["kind"] == "Deployment" and (x := parse_deployment(o))),
            pods=tuple(x for o in found if o["kind"] == "Pod" and (x := parse_pod(o))))
        for name, found in sorted(objs.items())))
