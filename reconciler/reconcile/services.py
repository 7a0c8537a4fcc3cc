"""Inference services in the reconcile decision (`decide.py` step 2). Pure.

A service is not a JobSet: render writes a Deployment or a LeaderWorkerSet per pool its replicas run on
(`<job>` when it is the job's only pool in the cluster, else `<job>-<pool>`: render/service.py). Where a
service runs is known two ways, and both count:
- the snapshot (`fleet observe` lists Fleet's Deployments and LeaderWorkerSets by the `fleet.dev/job` label,
  with their `fleet.dev/pool` label: `served`), on the clusters whose lists could be read;
- the loop's memory of where it applied each service (`LoopMemory.services`): what the snapshot cannot show
  (a cluster that cannot be read now; the simulator, which has no Deployments).
The plan's placements of the job (a spread service has one per pool, plan/spread.py) are compared with them
per cluster: the actuator acts on all of the job's objects in a cluster at once (it applies those of the
plan's pools there, then deletes the job's other objects there, found by their labels: kube_act.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..observe.model import Snapshot
from ..plan.types import Placement
from ..render.service import workload_name
from .model import Action


@dataclass(frozen=True)
class Served:
    """What the snapshot shows of inference services: job -> cluster -> {(pool, object name)}."""

    where: Mapping[str, Mapping[str, frozenset[tuple[str, str]]]] = field(default_factory=dict)


def served(snapshot: Snapshot) -> Served:
    """The Fleet-labelled Deployments and LeaderWorkerSets of every cluster read, by job and cluster."""
    out: dict[str, dict[str, set[tuple[str, str]]]] = {}
    for c in snapshot.clusters:
        for s in c.services:
            if s.job_id is not None and s.pool is not None:
                out.setdefault(s.job_id, {}).setdefault(c.name, set()).add((s.pool, s.name))
    return Served({j: {c: frozenset(v) for c, v in by.items()} for j, by in out.items()})


def service_actions(job: str, placed: list[Placement], services: dict[str, str], reachable: set[str],
                    notes: list[str], why_stop: str = "", seen: Served | None = None) -> list[Action]:
    """Inference: where its objects are (the snapshot's `seen`, and the remembered `cluster/pool` entries
    joined by commas) against where the plan places its replicas. One start, stop or move per cluster whose
    pools differ, or whose objects are not named as render names them for the plan's pools (a spread
    service that leaves all but one pool of a cluster: `<job>-<pool>` becomes `<job>`). A cluster that newly
    holds replicas while another stops holding them is a move (the actuator starts the new copy, then stops
    the old); one that only gains or changes is a start, one that only loses a stop. A cluster that cannot
    be read is left as remembered, to be acted on when it answers."""
    objects = (seen or Served()).where.get(job, {})
    old = {w for w in services.get(job, "").split(",") if w} | {
        f"{c}/{pool}" for c, objs in objects.items() for pool, _ in objs}
    new = {f"{p.cluster}/{p.pool}" for p in placed}

    def by_cluster(where: set[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for w in where:
            c, _, pool = w.partition("/")
            out.setdefault(c, set()).add(pool)
        return out

    was, now_ = by_cluster(old), by_cluster(new)
    name = job.partition("/")[2]
    misnamed = {c for c, objs in objects.items() if c in now_ and c in reachable
                and objs != {(pool, workload_name(name, pool, len(now_[c]))) for pool in now_[c]}}
    if old == new and not misnamed:
        return []
    first = {p.cluster: p for p in sorted(placed, key=lambda x: (x.cluster, x.pool))}
    blocked = sorted(c for c in set(was) ^ set(now_) | {c for c in was if was[c] != now_.get(c)}
                     if c not in reachable)
    if blocked:
        notes.append(f"{job}: replicas change on {', '.join(blocked)}, which cannot be read: nothing done")
        return []
    if new:
        services[job] = ",".join(sorted(new))
    else:
        services.pop(job, None)
    gone = sorted(c for c in was if c not in now_)
    actions: list[Action] = []
    for c in sorted(now_):
        if was.get(c) == now_[c] and c not in misnamed:
            continue
        p = first[c]
        if c not in was and gone:
            src = gone.pop(0)
            actions.append(Action(kind="move", cluster=c, pool=p.pool, job=job, units=p.units, service=True,
                                  from_cluster=src, from_pool=min(was[src]), force=True,
                                  reason=p.reason or f"the plan places its replicas on {c}/{p.pool}"))
        else:
            actions.append(Action(kind="start", cluster=c, pool=p.pool, job=job, units=p.units, service=True,
                                  reason=p.reason or f"the plan places its replicas on "
                                  f"{', '.join(f'{c}/{x}' for x in sorted(now_[c]))}"))
    for c in gone:
        actions.append(Action(kind="stop", cluster=c, pool=min(was[c]), job=job, service=True, from_cluster=c,
                              from_pool=min(was[c]),
                              reason=why_stop or f"the plan no longer places replicas of it on {c}"))
    return actions
