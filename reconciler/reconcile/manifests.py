"""The objects one job's start applies, built for that job alone. Pure.

`pipeline.render` builds every file of the fleet (Kueue objects, every JobSet, every stack spec) as YAML: on
10,000 jobs that is most of a cycle's time, for the few jobs a cycle starts. These are the same objects,
from the same builders render uses (`render.jobset.jobset` + `stamp`, `render.service`), for one placement:
so what the loop applies is what `fleet render` writes for that job (a test compares them). The stack specs
(pools, Kueue) still come from the whole render, which the loop runs only when a cycle resizes a pool or
changes quotas.
"""

from __future__ import annotations

from typing import Any

from ..catalog import Catalog
from ..plan.spread import group_replicas
from ..plan.types import Placement
from ..render.facts import pool_facts
from ..render.gang import gang_object, is_gang
from ..render.service import ReplicaGroup, service, service_workloads
from ..validate import Validated


def job_manifests(v: Validated, p: Placement, catalog: Catalog,
                  group: tuple[Placement, ...] = ()) -> list[dict[str, Any]]:
    """The JobSet (training, batch; a RayJob or RayService for a Ray job) or the Deployments/LeaderWorkerSets and
    Service (inference) of `p`; `group`:
    every placement of the job in p's cluster (a spread service, plan/spread.py: one workload per pool)."""
    loaded = v.loaded
    assert loaded.teams is not None and loaded.priorities is not None, "a valid repository"
    job = v.job_by_id[p.job]
    team = next(t for t in loaded.teams.teams if t.name == job.team)
    opt = next(o for o in v.options[p.job] if o.index == p.option)
    pool = v.pool_by_key[(p.cluster, p.pool)]
    f = pool_facts(pool, catalog)
    priority = job.priority or loaded.priorities.default
    if not is_gang(job):
        groups = []
        for x in sorted(group or (p,), key=lambda x: x.pool):
            o = next(o for o in v.options[x.job] if o.index == x.option)
            pool = v.pool_by_key[(x.cluster, x.pool)]
            groups.append(ReplicaGroup(o, pool_facts(pool, catalog),
                                       group_replicas(x.accelerators_per_unit, len(x.units), o.count)))
        objs = service_workloads(job, team, priority, groups)
        return [*objs, service(job, team, objs)]
    return [gang_object(job, team, priority, opt, f, p.units)]      # a JobSet or a Ray job (render/gang.py)
