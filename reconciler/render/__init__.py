"""Stage 5, render: what the clusters and clouds must look like for a plan. Pure and deterministic.

`render(validated, plan, catalog)` returns `{relative path: file text}`:

- `<cluster>/kueue.yaml`: the cluster's Kueue objects in apply order (kueue.py), one multi-document file;
- `<cluster>/jobsets/<team>.<job>.yaml`: a JobSet per training or batch job the plan placed in the cluster
  (jobset.py);
- `<cluster>/services/<team>.<job>.yaml`: per inference job, its Deployments or LeaderWorkerSets and its
  Service (service.py);
- `<cluster>/node-health.yaml` and `<cluster>/node-health/<pool>.json`: node-problem-detector running
  `fleet health-check` on the NVIDIA GPU nodes of on-prem clusters and of clusters that ask (node_health.py);
- `robots/<fleet>/<deployment>/...`: Rancher Fleet GitRepos of k3s robots and their policy server
  (robots/render.py);
- `stacks/<cluster>-infra.json`, `-kueue.json`, `-jobs.json`: the stack specs `fleet apply` feeds to
  `stacks/` (stackspec.py); the kueue and jobs specs carry the same objects as the YAML files;
- a Slurm cluster (DESIGN 4e) has none of these: `<cluster>/slurm/<team>.<job>.json` and `.sh`, each placed
  job's slurmrestd job-submit document and its script (slurm/submit.py).

Steps: 1. facts per pool (facts.py); 2. per-flavor quotas from the plan's per-cluster quotas (quota.py);
3. per cluster: Kueue objects, JobSets, stack specs. Everything is sorted by name, so equal inputs give
equal bytes whatever the order of the files in the repository.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..catalog import Catalog
from ..models import Cluster
from ..plan.quota import spot_charges
from ..plan.spread import group_replicas
from ..plan.types import Plan, QuotaPlan
from ..robots.observed import RobotsObservation
from ..slurm.submit import files as slurm_files
from ..validate import Validated
from .facts import PoolFacts, pool_facts
from .flavor_quota import FlavorPool, FlavorQuota, digest, flavor_digests, flavor_quotas, usage
from .gang import gang_object, is_gang, sized
from .jobset import gang_shape
from .kueue import flavor_terms, kueue_objects
from .network import EFA_RESOURCE as EFA
from .node_health import node_health
from .pods import PodShape, efa_request, pod_requests
from .ray import RAY
from .service import ReplicaGroup, service, service_workloads
from .stackspec import Obj, common, infra_spec, objects_spec, to_json
from .yamlout import dump_all

__all__ = ["FlavorQuota", "kueue_config", "pool_and_kueue_docs", "pool_and_kueue_specs", "quota_digests", "render",
           "render_quotas"]


def _domain(v: Validated) -> dict[str, str | None]:
    """team -> root of its cohort tree (None: no cohort)."""
    assert v.loaded.teams is not None
    return v.loaded.teams.domains()


def render_quotas(v: Validated, plan: Plan) -> list[FlavorQuota]:
    """Every team's quota per cluster and flavor (pool). A team that the plan lets borrow an accelerator it
    has no quota for gets a zero nominal there, with no borrowing limit, as the planner's ledger has it."""
    return flavor_quotas(*_quota_inputs(v, plan))


def quota_digests(v: Validated, plan: Plan) -> dict[str, list[str]]:
    """cluster -> a line per quota entry with a digest of its split over the cluster's flavors, as
    `render_quotas` splits it (`flavor_quota.flavor_digests`): what the reconcile loop compares between cycles."""
    return flavor_digests(*_quota_inputs(v, plan))


def _quota_inputs(v: Validated, plan: Plan) -> tuple[Plan, dict[tuple[str, str], list[FlavorPool]],
                                                     dict[str, str | None], dict[str, int], frozenset[str]]:
    pools: dict[tuple[str, str], list[FlavorPool]] = defaultdict(list)
    for p in sorted(v.pools, key=lambda p: (p.cluster, p.accelerator, p.name)):
        if p.status != "down":    # a TPU workload takes whole slices; GPUs are shared (quota.py)
            unit = p.unit_accelerators if p.kind == "tpu" else 1
            pools[(p.cluster, p.accelerator)].append(FlavorPool(p.name, p.max * p.unit_accelerators, unit,
                                                                p.capacity == "spot"))
    quotas = list(plan.quotas)
    have = {(q.cluster, q.team, q.accelerator) for q in quotas}
    acc_of = {(p.cluster, p.name): p.accelerator for p in v.pools}
    for (cluster, pool, team), n in sorted(usage(plan).items()):
        key = (cluster, team, acc_of[(cluster, pool)])
        if n and key not in have:
            quotas.append(QuotaPlan(cluster, team, key[2], 0, None, None))
            have.add(key)
    return (Plan(plan.placements, plan.pending, plan.preemptions, plan.pools, tuple(quotas), plan.cost),
            pools, _domain(v), _priority(v), _spot_only(v, plan, acc_of))


def _spot_only(v: Validated, plan: Plan, acc_of: Mapping[tuple[str, str], str]) -> frozenset[str]:
    """The placed jobs charged to their team's `spot:` quota of the accelerator they run on, by the planner's own
    rule (`quota.spot_charges`)."""
    charged = spot_charges(v.loaded.teams, v.loaded.priorities, v.loaded.jobs)
    return frozenset(p.job for p in plan.placements if acc_of[(p.cluster, p.pool)] in charged.get(p.job, ()))


def _priority(v: Validated) -> dict[str, int]:
    """Job id -> the value of its priority class (which of a team's work is within nominal: quotasplit.py)."""
    prio = v.loaded.priorities
    if prio is None:   # pragma: no cover - a valid repository has priorities
        return {}
    value = {c.name: c.value for c in prio.classes}
    return {j.id: value.get(j.priority or prio.default, 0) for j in v.loaded.jobs}


def _object_key(o: dict[str, object]) -> tuple[str, str, str]:
    meta = o["metadata"]
    assert isinstance(meta, dict)
    return (str(meta["namespace"]), str(meta["name"]), str(o["kind"]))


@dataclass
class _Parts:
    """Steps 1-2 of render, per cluster: pool facts, targets and occupied units, flavor quotas, the cpu/memory
    (and EFA) placed jobs request per pool, and (unless skipped) the JobSets and service objects."""

    facts: dict[str, list[PoolFacts]] = field(default_factory=lambda: defaultdict(list))
    targets: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    occupied: dict[str, dict[str, set[int]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    quotas: dict[str, list[FlavorQuota]] = field(default_factory=lambda: defaultdict(list))
    requests: dict[str, dict[tuple[str, str], int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    placed: dict[str, list[dict[str, object]]] = field(default_factory=lambda: defaultdict(list))
    services: dict[str, dict[str, list[dict[str, object]]]] = field(default_factory=lambda: defaultdict(dict))


def _facts(v: Validated, catalog: Catalog) -> _Parts:
    """Step 1 alone: facts per pool."""
    out = _Parts()
    for p in sorted(v.pools, key=lambda p: (p.cluster, p.name)):
        out.facts[p.cluster].append(pool_facts(p, catalog))
    return out


def _parts(v: Validated, plan: Plan, catalog: Catalog, workloads: bool = True) -> _Parts:
    loaded = v.loaded
    assert loaded.teams is not None and loaded.priorities is not None, "render needs a valid repository"
    team_of = {t.name: t for t in loaded.teams.teams}
    jobs = {j.id: j for j in loaded.jobs}
    out = _facts(v, catalog)
    slurm = {c.name for c in loaded.clusters if c.provider == "slurm"}   # their jobs: slurm/submit.py
    for pp in plan.pools:
        out.targets[pp.cluster][pp.pool] = pp.target
    for pl in plan.placements:
        out.occupied[pl.cluster][pl.pool].update(pl.units)
    # 2. per-flavor quotas, and the cpu/memory placed jobs request per pool
    for q in render_quotas(v, plan):
        out.quotas[q.cluster].append(q)
    groups: dict[tuple[str, str], list[ReplicaGroup]] = defaultdict(list)   # (cluster, job) -> its pools
    for pl in (pl for pl in plan.placements if pl.cluster not in slurm):
        job = jobs[pl.job]
        opt = next(o for o in v.options[pl.job] if o.index == pl.option)
        f = next(f for f in out.facts[pl.cluster] if f.name == pl.pool)
        priority = job.priority or loaded.priorities.default
        if workloads and is_gang(job):     # a JobSet, or a Ray job (render/gang.py), at the planned size
            out.placed[pl.cluster].append(gang_object(job, team_of[job.team], priority, opt, f, pl.units))
        if job.workers is not None:        # an elastic gang at the size the plan gave it (plan/workloads.py)
            opt = sized(opt, job, len(pl.units))
        n = job.replicas if is_gang(job) else group_replicas(pl.accelerators_per_unit, len(pl.units), opt.count)
        if workloads and not is_gang(job):
            groups[(pl.cluster, pl.job)].append(ReplicaGroup(opt, f, n))
        _, replicas, pods, per_pod = gang_shape(opt, f, n)
        cpus, memory = pod_requests(opt, f, per_pod)
        out.requests[pl.cluster][(pl.pool, "cpu")] += cpus * pods * replicas
        out.requests[pl.cluster][(pl.pool, "memory")] += memory * pods * replicas
        efa = efa_request(f, PodShape(per_pod, pods * replicas > 1))
        out.requests[pl.cluster][(pl.pool, EFA)] += efa * pods * replicas
    for (cluster_name, job_id), mine in groups.items():   # inference: workloads per pool, a Service per cluster
        job = jobs[job_id]
        team = team_of[job.team]
        objs = service_workloads(job, team, job.priority or loaded.priorities.default, mine)
        out.services[cluster_name][f"{team.name}.{job.name}"] = [*objs, service(job, team, objs)]
    return out


def render(v: Validated, plan: Plan, catalog: Catalog, robots: RobotsObservation | None = None) -> dict[str, str]:
    """Every rendered file of the plan (module docstring), and the k3s robots' GitRepos of the waves `robots`
    (the observed rollouts) admitted (robots/render.py). `v` must be valid (`v.ok`)."""
    loaded = v.loaded
    assert loaded.teams is not None and loaded.priorities is not None, "render needs a valid repository"
    parts = _parts(v, plan, catalog)
    # 3. per cluster: Kueue objects, JobSets, stack specs
    out: dict[str, str] = {}
    out.update(slurm_files(v, plan))      # a Slurm cluster has no Kueue, JobSets or stacks: its jobs' documents
    for cluster in sorted((c for c in loaded.clusters if c.provider != "slurm"), key=lambda c: c.name):
        c = cluster.name
        kobjs = _kueue_objects(v, parts, c)
        jsets = sorted(parts.placed[c], key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]))  # type: ignore[index]
        out[f"{c}/kueue.yaml"] = dump_all(kobjs)
        for js in jsets:
            team = js["metadata"]["labels"]["fleet.dev/team"]  # type: ignore[index]
            folder = "ray" if js["apiVersion"] == RAY else "jobsets"
            out[f"{c}/{folder}/{team}.{js['metadata']['name']}.yaml"] = dump_all([js])  # type: ignore[index]
        for key, objs in sorted(parts.services[c].items()):
            out[f"{c}/services/{key}.yaml"] = dump_all(objs)
        workloads = sorted([*jsets, *(o for objs in parts.services[c].values() for o in objs)], key=_object_key)
        out.update(_pool_and_kueue(cluster, parts, kobjs))
        out[f"stacks/{c}-jobs.json"] = to_json(objects_spec(cluster, "jobs", workloads))
        out.update(node_health(cluster, parts.facts[c]))
    from ..robots.render import render_robots  # here: robots/render.py imports this package's yamlout

    out.update(render_robots(loaded, robots))
    return dict(sorted(out.items()))


def pool_and_kueue_specs(v: Validated, plan: Plan, catalog: Catalog, clusters: set[str]) -> dict[str, str]:
    """Only `stacks/<cluster>-infra.json` and `-kueue.json` of `clusters`, the same bytes as `render` writes,
    without building or writing any JobSet (`fleet reconcile` resizes pools and updates quotas with these)."""
    stacks = {f"{c}-{layer}" for c in clusters for layer in ("infra", "kueue")}
    docs = pool_and_kueue_docs(v, plan, catalog, stacks)
    return {f"stacks/{name}.json": to_json(spec) for name, spec in docs.items()}


def pool_and_kueue_docs(v: Validated, plan: Plan, catalog: Catalog, stacks: set[str]) -> dict[str, Obj]:
    """The specs of the named stacks only (`<cluster>-infra`, `<cluster>-kueue`), equal to what `json.loads`
    reads back from `pool_and_kueue_specs`'s files, without the indented text nobody reads (`fleet reconcile`:
    seconds a cycle on a large fleet). The specs are built of JSON's own types (str keys, lists, no tuples) and
    no two places share a dict or list, so they go to the stacks as built: a JSON round trip to make them so
    was half of this function's time (tests/test_reconcile_decide.py checks all three on two fleets)."""
    parts = _parts(v, plan, catalog, workloads=False)
    out: dict[str, Obj] = {}
    for cluster in sorted((c for c in v.loaded.clusters if c.provider != "slurm"), key=lambda c: c.name):
        c = cluster.name
        if f"{c}-infra" in stacks:
            out[f"{c}-infra"] = infra_spec(cluster, parts.facts[c], parts.targets[c], parts.occupied[c])
        if f"{c}-kueue" in stacks:
            out[f"{c}-kueue"] = objects_spec(cluster, "kueue", _kueue_objects(v, parts, c))
    return out


def kueue_config(v: Validated, catalog: Catalog) -> dict[str, list[str]]:
    """cluster -> `<what> <digest>` per part of the cluster's Kueue stack that git alone decides: each Kueue
    object rendered without quotas (so each ClusterQueue without flavors), each flavor's terms in the queues that
    hold it (`kueue.flavor_terms`: cpu, memory and EFA quotas, covered resources, admission check; not for an
    accelerator no team has quota of, which no queue holds: nobody can borrow it), and the stack's own settings
    (the cluster's context, region). Not the quotas, which follow the plan
    (`quota_digests`). What the reconcile loop compares with what it last applied there (reconcile/kueuesync.py),
    so a merge whose `fleet apply` failed is applied by the loop."""
    loaded = v.loaded
    assert loaded.teams is not None and loaded.priorities is not None
    parts = _facts(v, catalog)
    first = min(loaded.teams.teams, key=lambda t: t.name, default=None)
    held = {acc for t in loaded.teams.teams for acc, q in t.quota.items() if q.nominal or q.spot}
    out: dict[str, list[str]] = {}
    for cluster in sorted((c for c in loaded.clusters if c.provider != "slurm"), key=lambda c: c.name):
        c = cluster.name
        lines = [f"{o['kind']} {_name(o)} {_digest(o)}" for o in _kueue_objects(v, parts, c)]
        usable = [f for f in parts.facts[c] if f.pool.accelerator in held]
        terms = flavor_terms(usable, first, loaded.priorities) if first is not None else {}
        lines += [f"flavor {f} in the ClusterQueues {_digest(t)}" for f, t in terms.items()]
        lines.append(f"stack {c}-kueue settings {_digest(common(cluster, 'kueue'))}")
        out[c] = sorted(lines)
    return out


def _digest(o: object) -> str:
    return digest(json.dumps(o, sort_keys=True))


def _name(o: dict[str, object]) -> str:
    meta = o["metadata"]
    assert isinstance(meta, dict)
    return f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else str(meta["name"])


def _kueue_objects(v: Validated, parts: _Parts, c: str) -> list[dict[str, object]]:
    loaded = v.loaded
    assert loaded.teams is not None and loaded.priorities is not None
    teams = sorted(loaded.teams.teams, key=lambda t: t.name)
    return kueue_objects(parts.facts[c], teams, list(loaded.teams.cohorts), loaded.priorities, parts.quotas[c],
                         parts.requests[c])


def _pool_and_kueue(cluster: Cluster, parts: _Parts, kobjs: list[dict[str, object]]) -> dict[str, str]:
    c = cluster.name
    return {f"stacks/{c}-infra.json": to_json(infra_spec(cluster, parts.facts[c], parts.targets[c], parts.occupied[c])),
            f"stacks/{c}-kueue.json": to_json(objects_spec(cluster, "kueue", kobjs))}
