"""Inference services in the reconcile decision (`decide.py` step 2), compared by replica count. Pure.

A service is not a JobSet: render writes a Deployment or a LeaderWorkerSet per pool its replicas run on
(`<job>` when it is the job's only pool in the cluster, else `<job>-<pool>`: render/service.py), each with the
`spec.replicas` of its placement (`plan.spread.group_replicas`). What runs is known two ways:
- the snapshot (`fleet observe` lists Fleet's Deployments and LeaderWorkerSets by the `fleet.dev/job` label,
  with their `fleet.dev/pool` label, `spec.replicas` and `status.readyReplicas`: `served`): where a cluster
  shows objects of the job, they are what runs there, names, pools and counts;
- the loop's memory of what it applied (`LoopMemory.services`: `cluster/pool=replicas` entries joined by
  commas), for a cluster whose services were not listed: one that cannot be read now, and the simulator,
  which has no Deployments (`ClusterObservation.services_read`). Where they were listed and none is there,
  none runs (a Deployment deleted by hand is applied again). A cluster counted lost
  (`cluster_lost_after_minutes`) holds nothing any more: its replicas are started elsewhere by the plan, and
  nothing waits for it.

Per cluster, the plan's objects (pool, name, replicas) are compared with those: a cluster that lacks one, or
shows it with another replica count, gets a `start` (the actuator applies the plan's objects of the job in
that cluster: a scale up or down is the same apply); objects of the job the plan no longer has (another pool,
another name, a cluster the plan left) go with a `stop` that keeps the plan's objects (`keep`). New replicas
are ready before old ones go: a stale object that still serves is removed only once every replica the plan
places is observed ready, or when the plan stops the service (a preemption, its file gone). Nothing is done
where a cluster that holds or gets replicas cannot be read and is not lost yet: those replicas still count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..observe.model import Snapshot
from ..plan.spread import group_replicas
from ..plan.types import Placement
from ..render.service import workload_name
from .model import Action


@dataclass(frozen=True)
class Object:
    """One Deployment or LeaderWorkerSet of a service, as observed."""

    pool: str
    name: str
    replicas: int
    ready: int


@dataclass(frozen=True)
class Served:
    """What the snapshot shows of inference services: job -> cluster -> its objects there."""

    where: Mapping[str, Mapping[str, tuple[Object, ...]]] = field(default_factory=dict)
    read: frozenset[str] = frozenset()      # clusters whose services were listed: no object there means none


def serving(snapshot: Snapshot) -> set[str]:
    """The jobs whose services run replicas on a reachable cluster (a victim that loses nothing by running on
    while its fellow victims run to their checkpoints: ckptwait.py)."""
    reachable = {c.name for c in snapshot.clusters if c.status != "unreachable"}
    return {j for j, by in served(snapshot).where.items()
            if any(o.replicas for c in by if c in reachable for o in by[c])}


def served(snapshot: Snapshot) -> Served:
    """The Fleet-labelled Deployments and LeaderWorkerSets of every cluster read, by job and cluster."""
    out: dict[str, dict[str, list[Object]]] = {}
    for c in snapshot.clusters:
        for s in c.services:
            if s.job_id is not None and s.pool is not None:
                out.setdefault(s.job_id, {}).setdefault(c.name, []).append(
                    Object(s.pool, s.name, s.replicas, s.ready_replicas))
    return Served({j: {c: tuple(sorted(v, key=lambda o: (o.pool, o.name))) for c, v in by.items()}
                   for j, by in out.items()},
                  frozenset(c.name for c in snapshot.clusters if c.services_read and c.status != "unreachable"))


Groups = dict[str, dict[str, int | None]]          # cluster -> pool -> replicas (None: not known)


def remembered(entry: str) -> Groups:
    """`LoopMemory.services` of one job: `cluster/pool=replicas` entries (`cluster/pool` from older memory files:
    replicas not known) joined by commas."""
    out: Groups = {}
    for w in entry.split(","):
        if not w:
            continue
        where, _, n = w.partition("=")
        c, _, pool = where.partition("/")
        out.setdefault(c, {})[pool] = int(n) if n.isascii() and n.isdigit() else None   # else: not known
    return out


def remember(groups: Groups) -> str:
    return ",".join(f"{c}/{p}" + (f"={n}" if n is not None else "")
                    for c in sorted(groups) for p, n in sorted(groups[c].items()))


def planned_groups(placed: Sequence[Placement], counts: Sequence[int]) -> Groups:
    """cluster -> pool -> the replicas the plan puts there (what render writes as `spec.replicas`); None where
    the job's options are not known (`counts`: accelerators per replica, by option index)."""
    out: Groups = {}
    for p in placed:
        n = group_replicas(p.accelerators_per_unit, len(p.units), counts[p.option]) \
            if p.option < len(counts) else None
        pools = out.setdefault(p.cluster, {})
        before = pools.get(p.pool, 0)
        pools[p.pool] = None if n is None or before is None else before + n
    return out


def _count(n: int | None) -> str:
    return "?" if n is None else str(n)


def service_actions(job: str, placed: list[Placement], services: dict[str, str], reachable: set[str],
                    notes: list[str], why_stop: str = "", seen: Served | None = None, *,
                    lost: Sequence[str] = (), counts: Sequence[int] = ()) -> list[Action]:
    """The actions that make the service run as the plan places it (module docstring); `services` (the memory)
    is updated in place."""
    read = (seen or Served()).read
    objects = (seen or Served()).where.get(job, {})
    want = planned_groups(placed, counts)
    name = job.partition("/")[2]
    wanted_names = {c: {p: workload_name(name, p, len(pools)) for p in pools} for c, pools in want.items()}
    have: Groups = {c: pools for c, pools in remembered(services.get(job, "")).items()   # memory: where nothing
                    if c not in lost and c not in objects and c not in read}           # was listed
    for c, objs in objects.items():
        if c in reachable:
            have[c] = {}
            for o in objs:
                have[c][o.pool] = (have[c].get(o.pool) or 0) + o.replicas
        elif c not in lost:
            have.setdefault(c, {o.pool: o.replicas for o in objs})

    def matches(c: str) -> bool:
        """The cluster runs what the plan places there: the same objects (observed) or pools (remembered), and
        the same replica counts where both are known."""
        w, h = want.get(c, {}), have.get(c, {})
        if set(w) != set(h) or any(h[p] is not None and w[p] is not None and h[p] != w[p] for p in w):
            return False
        if c in objects and c in reachable:
            return {(o.pool, o.name) for o in objects[c]} == {(p, wanted_names[c][p]) for p in w}
        return True

    changed = sorted(c for c in set(want) | set(have) if not matches(c))
    if not changed:
        if want:
            services[job] = remember(want)
        return []
    blocked = [c for c in changed if c not in reachable]
    if blocked:
        notes.append(f"{job}: replicas change on {', '.join(blocked)}, which cannot be read: nothing done (its "
                     "replicas there count until the cluster is lost)")
        return []
    total = sum(n or 0 for pools in want.values() for n in pools.values())
    ready = sum(min(o.ready, want[c].get(o.pool) or 0) for c, objs in objects.items() if c in want
                for o in objs if wanted_names[c].get(o.pool) == o.name
                and (want[c][o.pool] is None or o.replicas == want[c][o.pool]))
    all_ready = why_stop != "" or (total > 0 and ready >= total)
    first = {p.cluster: p for p in sorted(placed, key=lambda x: (x.cluster, x.pool))}
    gone = [c for c in changed if c not in want and c not in objects]   # remembered only: the simulator's case
    actions: list[Action] = []
    waiting: list[str] = []
    kept = {c: dict(pools) for c, pools in want.items()}
    for c in changed:
        w, h = want.get(c, {}), have.get(c, {})
        objs = objects.get(c, ())
        stale = [o for o in objs if wanted_names.get(c, {}).get(o.pool) != o.name]
        serving = sum(o.ready for o in stale)
        if w:
            p = first[c]
            wrong = not objs or any(
                not any(o.pool == pool and o.name == wanted_names[c][pool]
                        and (n is None or o.replicas == n) for o in objs) for pool, n in w.items())
            keep = tuple(sorted(wanted_names[c].values()))
            where = ", ".join(f"{c}/{pool} x{_count(n)}" for pool, n in sorted(w.items()))
            if wrong and c not in have and gone and not objs:
                src = gone.pop(0)        # remembered only (no object to wait for): new copy, then the old one goes
                actions.append(Action(kind="move", cluster=c, pool=p.pool, job=job, units=p.units, service=True,
                                      from_cluster=src, from_pool=min(have[src]), force=True,
                                      reason=p.reason or f"the plan places its replicas on {where}"))
            elif wrong:
                before = ", ".join(f"{c}/{pool} x{_count(n)}" for pool, n in sorted(h.items())) or "none"
                actions.append(Action(kind="start", cluster=c, pool=p.pool, job=job, units=p.units, service=True,
                                      keep=tuple(sorted(o.name for o in stale)) if serving and not all_ready
                                      else (),
                                      reason=(p.reason + "; " if p.reason and c not in have else "")
                                      + f"replicas {before} -> {where}"))
            elif stale and (all_ready or serving == 0):
                actions.append(Action(kind="stop", cluster=c, pool=min(o.pool for o in stale), job=job,
                                      service=True, from_cluster=c, from_pool=min(o.pool for o in stale),
                                      keep=keep, reason=f"{', '.join(o.name for o in stale)} left the plan; "
                                      + (f"its replacement serves ({ready}/{total} replicas ready)" if all_ready else
                                         f"it serves no ready replica (its replacement: {ready}/{total} ready)")))
            elif stale:
                waiting.append(c)
            continue
        if c in gone:
            continue
        if objs and serving and not all_ready:
            waiting.append(c)
            kept[c] = {o.pool: o.replicas for o in objs}
            continue
        pool = min(h) if h else (min(o.pool for o in objs) if objs else "")
        actions.append(Action(kind="stop", cluster=c, pool=pool, job=job, service=True, from_cluster=c,
                              from_pool=pool, reason=why_stop or f"the plan no longer places replicas of it on {c}"))
    for src in gone:                 # remembered on a cluster the plan left, with no new copy to pair with
        actions.append(Action(kind="stop", cluster=src, pool=min(have[src]), job=job, service=True,
                              from_cluster=src, from_pool=min(have[src]),
                              reason=why_stop or f"the plan no longer places replicas of it on {src}"))
    if waiting:
        notes.append(f"{job}: old replicas on {', '.join(waiting)} keep serving until the plan's are ready "
                     f"({ready}/{total} ready)")
    if kept:
        services[job] = remember(kept)
    else:
        services.pop(job, None)
    return actions
