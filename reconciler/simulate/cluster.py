"""Simulated clusters: pools of units that are provisioned, fail, are repaired and reclaimed. Pure (no I/O:
the simulated world is a value the engine changes; `observe` reads it into the same `Snapshot` that
`fleet observe` reads from real clusters).

A unit is what a pool counts (DESIGN 4): a TPU slice or a GPU node. Its states:
absent (not provisioned, not paid) -> provisioning (paid, not usable) -> ready (paid, usable) -> failed
(unusable until repaired; paid only for owned and reserved capacity, which is paid whatever happens; a
failed cloud node or slice is being re-created and not billed). Owned and reserved units (pool min) exist
from the start and are never released.

Provisioning delays (`PROVISION_MINUTES`), assumed, not measured: owned and reserved capacity is already
there (0); an on-demand or spot GPU node joins in about 10 minutes (VM boot, driver install, node
registration: GKE and EKS document node creation taking "several minutes"); a TPU slice, created as its
own GKE node pool with all its hosts, in about 15 minutes. They are constants to change, not findings.
A `provisioning: queued` pool (GKE flex-start, issue 26) first waits for its grant: QUEUED_GRANT_MINUTES more,
also an assumption (no source in this environment gives flex-start grant times; `fleet simulate` measures
what the delay costs in queue waits, not how long it is).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ..observe.model import ClusterObservation, Condition, JobSet, Node, Snapshot, Workload
from ..resolve import ResolvedPool

PROVISION_MINUTES = {("gpu", "on-demand"): 10.0, ("gpu", "spot"): 10.0,
                     ("tpu", "on-demand"): 15.0, ("tpu", "spot"): 15.0}
QUEUED_GRANT_MINUTES = 60.0
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Simulated time 0 as a date, for the snapshots the planner reads (any fixed date: output never shows it)."""

ABSENT, PROVISIONING, READY, FAILED = "absent", "provisioning", "ready", "failed"


@dataclass(slots=True)
class Unit:
    state: str = ABSENT
    until_s: int = 0            # provisioning: ready at; failed: repaired at
    used: int = 0               # accelerators taken by jobs (placed, running or starting)
    jobs: list[str] = field(default_factory=list)
    idle_since_s: int = 0
    version: int = 0            # bumps on every state change: stale READY/REPAIRED events are ignored
    since_s: int = 0            # when it entered its state (a failed node's condition `since`)


@dataclass(slots=True)
class SimPool:
    rp: ResolvedPool
    unit_hourly_usd: float
    provision_s: int
    units: list[Unit]
    present: set[int] = field(default_factory=set)     # indices not absent

    @property
    def key(self) -> str:
        return self.rp.key

    @property
    def fixed(self) -> bool:
        """Owned and reserved capacity: paid for whatever happens, never released."""
        return self.rp.capacity in ("owned", "reserved")

    def paid(self, u: Unit) -> bool:
        return u.state in (PROVISIONING, READY) or (u.state == FAILED and self.fixed)


@dataclass(slots=True)
class SimCluster:
    name: str
    region: str
    pools: list[SimPool]
    down: bool = False


def provision_seconds(rp: ResolvedPool) -> int:
    if rp.capacity in ("owned", "reserved"):
        return 0
    kind = "tpu" if rp.shape is not None else "gpu"
    grant = QUEUED_GRANT_MINUTES if rp.queued else 0.0
    return int((PROVISION_MINUTES.get((kind, rp.capacity), 10.0) + grant) * 60)


def at(now_s: int) -> datetime:
    return EPOCH + timedelta(seconds=now_s)


@dataclass(frozen=True, slots=True)
class Running:
    """What `observe` needs of a placed job: who, where, and whether its gang runs."""

    team: str
    namespace: str
    name: str
    pool: str
    priority: int
    running: bool
    submitted_s: int
    since_s: int                # admitted (placed)
    started_s: int              # gang running since (PodsReady), when running
    restarts: int
    units: tuple[int, ...]


def observe(cluster: SimCluster, jobs: list[Running], now_s: int) -> ClusterObservation:
    """The cluster as `fleet observe` would read it: a Workload and a JobSet per placed job (Kueue phases:
    admitted while its gang is provisioned, running once it runs), a Node per unit that exists (TPU slice i
    of pool p is node pool `p-s<i>`; GPU node i is `p-n<i>`, and the simulation gives it its unit index too),
ready unless failed (NotReady since it failed). A cluster that is down is unreachable."""
    if cluster.down:
        return ClusterObservation(name=cluster.name, status="unreachable")
    workloads, jobsets, nodes = [], [], []
    for j in sorted(jobs, key=lambda r: (r.namespace, r.name)):
        conds = [Condition(type="Admitted", status="True", since=at(j.since_s)),
                 Condition(type="PodsReady", status="True" if j.running else "False",
                           since=at(j.started_s if j.running else j.since_s)),
                 Condition(type="QuotaReserved", status="True", since=at(j.since_s))]
        workloads.append(Workload(namespace=j.namespace, name=f"jobset-{j.name}", created_at=at(j.submitted_s),
                                  queue_name=j.team, priority=j.priority, jobset=j.name,
                                  requeue_count=j.restarts, conditions=tuple(conds)))
        jobsets.append(JobSet(namespace=j.namespace, name=j.name, created_at=at(j.submitted_s), team=j.team,
                              job=j.name, pool=j.pool, restarts=j.restarts, units=j.units))
    for p in cluster.pools:
        for i in sorted(p.present):
            u = p.units[i]
            unit = i
            name = f"{p.rp.name}-s{i}" if unit is not None else f"{p.rp.name}-n{i}"
            problems = () if u.state != FAILED else (
                Condition(type="Ready", status="False", reason="NodeFailure", since=at(u.since_s)),)
            nodes.append(Node(name=name, pool=p.rp.name, unit=unit, node_pool=name if unit is not None else p.rp.name,
                              ready=u.state == READY, problems=problems))
    return ClusterObservation(name=cluster.name, status="ok", workloads=tuple(workloads), jobsets=tuple(jobsets),
                              nodes=tuple(sorted(nodes, key=lambda n: n.name)))


def snapshot(clusters: list[SimCluster], by_cluster: dict[str, list[Running]], now_s: int) -> Snapshot:
    return Snapshot(observed_at=at(now_s),
                    clusters=tuple(observe(c, by_cluster.get(c.name, []), now_s)
                                   for c in sorted(clusters, key=lambda c: c.name)))


def room_without(p: SimPool, held: list[tuple[tuple[int, ...], int]], count: int, per_unit: int) -> bool:
    """The pool has `count` units that can take `per_unit` more accelerators once what `held` holds there (units,
    accelerators per unit) is gone: not failed; an absent unit counts (it is provisioned)."""
    freed: dict[int, int] = {}
    for units, per in held:
        for i in units:
            freed[i] = freed.get(i, 0) + per
    cap = p.rp.unit_accelerators
    fits = sum(1 for i, u in enumerate(p.units) if u.state != FAILED and u.used - freed.get(i, 0) + per_unit <= cap)
    return fits >= count
