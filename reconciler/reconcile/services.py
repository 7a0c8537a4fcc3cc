"""Inference services in the reconcile decision (`decide.py` step 2). Pure.

The snapshot lists JobSets only, not a service's Deployments or LeaderWorkerSets, so the loop remembers where
it applied each service (`LoopMemory.services`) and compares that with the plan's placements of the job: a
spread service (plan/spread.py) has one placement per pool, and acts per cluster (the actuator applies all
of the job's objects in a cluster at once, reconcile/manifests.py)."""

from __future__ import annotations

from ..plan.types import Placement
from .model import Action


def service_actions(job: str, placed: list[Placement], services: dict[str, str], reachable: set[str],
             notes: list[str], why_stop: str = "") -> list[Action]:
    """Inference: objects the snapshot does not list (Deployments, LeaderWorkerSets), so where they were applied
    is remembered, as `cluster/pool` entries joined by commas (a spread service runs in several pools: one
    start or move per cluster, whose objects are all of the job's pools there). A cluster that newly holds
    replicas while another stops holding them is a move (the actuator starts the new copy, then stops the
    old); one that only gains is a start, one that only loses a stop. A cluster that cannot be read is left
    as remembered, to be acted on when it answers."""
    old = {w for w in services.get(job, "").split(",") if w}
    new = {f"{p.cluster}/{p.pool}" for p in placed}
    if old == new:
        return []

    def by_cluster(where: set[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for w in where:
            c, _, pool = w.partition("/")
            out.setdefault(c, set()).add(pool)
        return out

    was, now_ = by_cluster(old), by_cluster(new)
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
        if was.get(c) == now_[c]:
            continue
        p = first[c]
        if c not in was and gone:
            src = gone.pop(0)
            actions.append(Action(kind="move", cluster=c, pool=p.pool, job=job, units=p.units, service=True,
                                  from_cluster=src, from_pool=min(was[src]), force=True,
                                  reason=p.reason or f"the plan places its replicas on {c}/{p.pool}"))
        else:
            actions.append(Action(kind="start", cluster=c, pool=p.pool, job=job, units=p.units, service=True,
                                  reason=p.reason or "the plan starts it"))
    for c in gone:
        actions.append(Action(kind="stop", cluster=c, pool=min(was[c]), job=job, service=True, from_cluster=c,
                              from_pool=min(was[c]),
                              reason=why_stop or f"the plan no longer places replicas of it on {c}"))
    return actions
