"""The policies `fleet simulate` compares, all on the same engine, trace and faults. Pure.

- `fleet`: the reconcile loop itself, observe, plan, decide, act (loop.py, which says what it simplifies).
- `fifo`: one queue in arrival order, first fit over the fleet's pools in file order, head-of-line blocking
  (the queue stops at the first job that does not fit). No priorities, quotas, preemption or cost.
- `kueue`: what Kueue alone gives. Each job is submitted to one cluster of its team (the one with the most
  nominal quota for its first option's accelerator in the quotas Fleet renders); ClusterQueue per team and
  cluster with that nominal quota; admission in priority then arrival order (BestEffortFIFO); flavors
  (pools) tried in the job's option order, then the cluster's pool order; borrowing in the cohort up to the
  team's borrowing_limit while the cohort's nominal in the cluster has room; preemption of lower-priority
  work of the same team (within_team) and of cohort borrowers when the team is under its nominal
  (reclaim_within_cohort); requeue after an eviction with Kueue's backoff (60 s doubling to an hour). No
  cross-cluster moves (a job waits on its cluster, down or not), no cost awareness. Leaves out: lending
  limits (the cohort's whole nominal may be borrowed), fair sharing, admission checks, partial admission.
- `cheapest`: what a cloud broker gives: each job in arrival order to the cheapest pool with room now over
  every option (dollars per unit of work: unit price x units / relative speed), relaunched in another region
  after a failure when one has room. No quotas, priorities, fairness or preemption.
"""

from __future__ import annotations

from dataclasses import replace

from ..validate import Validated
from .cluster import SimPool
from .engine import Engine
from .loop import FleetLoop
from .state import SimJob

POLICIES = ("fleet", "fifo", "kueue", "cheapest")


def _try(sim: Engine, j: SimJob, candidates: list[tuple[int, SimPool]]) -> bool:
    for o, p in candidates:
        opt = j.options[o]
        n, per = sim.gang(opt, p.rp, j.replicas)
        units = sim.free_units(p, n, per)
        if units is not None and sim.place(j, p, o, units, per):
            return True
    return False


def _usable(sim: Engine, j: SimJob, pools: list[SimPool]) -> list[tuple[int, SimPool]]:
    return [(o, p) for o in range(len(j.options)) for p in pools if sim.can_use(j, j.options[o], p)]


def _idle(sim: Engine) -> bool:
    """Nothing arrived, freed, became ready or came back since the policy's last step: the baselines decide
    from the state alone, so they would decide nothing new (their incremental shortcut)."""
    if not sim.changed:
        return True
    sim.changed = False
    return False


class Fifo:
    name = "fifo"

    def __init__(self, sim: Engine) -> None:
        self.order = [p for c in sorted(sim.clusters) for p in sim.clusters[c].pools]

    def step(self, sim: Engine, now_s: int) -> None:
        if _idle(sim):
            return
        for j in sorted(sim.waiting(), key=lambda j: (j.submit_s, j.id)):
            if not _try(sim, j, _usable(sim, j, self.order)):
                return


class Cheapest:
    name = "cheapest"

    def step(self, sim: Engine, now_s: int) -> None:
        if _idle(sim):
            return
        pools = list(sim.pools.values())
        for j in sorted(sim.waiting(), key=lambda j: (j.submit_s, j.id)):
            def key(c: tuple[int, SimPool], j: SimJob = j) -> tuple[bool, float, str, int]:
                o, p = c
                n, _ = sim.gang(j.options[o], p.rp, j.replicas)
                moved = j.interruptions > 0 and sim.clusters[p.rp.cluster].region == j.last_region
                return (moved, p.unit_hourly_usd * n / j.options[o].relative_speed, p.key, o)
            _try(sim, j, sorted(_usable(sim, j, pools), key=key))


class Kueue:
    name = "kueue"

    def __init__(self, sim: Engine, quotas: dict[tuple[str, str, str], tuple[int, int | None]]) -> None:
        self.quotas = quotas               # (cluster, team, accelerator) -> (nominal, borrowing_limit)
        self.next_requeue_s = 0            # the earliest backoff that ends: a reason to look again
        teams = sim.v.loaded.teams
        assert teams is not None
        domains = teams.domains()
        self.cohort = {t.name: domains.get(t.name) for t in teams.teams}
        self.home: dict[str, str | None] = {}
        for j in sim.jobs:
            acc = j.options[0].accelerator if j.options else ""
            best = sorted(((-q[0], c) for (c, t, a), q in quotas.items() if t == j.team and a == acc and q[0] > 0))
            usable = {p.rp.cluster for p in sim.pools.values() for o in j.options if sim.can_use(j, o, p)}
            home = next((c for _, c in best if c in usable), None)
            self.home[j.id] = home if home is not None else min(usable, default=None)

    def _usage(self, sim: Engine) -> dict[tuple[str, str, str], int]:
        use: dict[tuple[str, str, str], int] = {}
        for j in sim.active.values():
            if j.pool is not None:
                k = (j.cluster, j.team, j.options[j.option].accelerator)
                use[k] = use.get(k, 0) + j.accelerators
        return use

    def _quota_ok(self, use: dict[tuple[str, str, str], int], cluster: str, team: str, acc: str, need: int) -> bool:
        nominal, borrow = self.quotas.get((cluster, team, acc), (0, 0))
        mine = use.get((cluster, team, acc), 0) + need
        if mine <= nominal:
            return True
        if borrow is not None and mine > nominal + borrow:
            return False
        root = self.cohort.get(team)
        if root is None:
            return False
        mates = [t for t, r in self.cohort.items() if r == root]
        pool_nominal = sum(self.quotas.get((cluster, t, acc), (0, 0))[0] for t in mates)
        used = sum(use.get((cluster, t, acc), 0) for t in mates)
        return used + need <= pool_nominal

    def step(self, sim: Engine, now_s: int) -> None:
        if now_s < self.next_requeue_s and _idle(sim):
            return
        sim.changed = False
        use = self._usage(sim)
        waiting = sim.waiting()
        self.next_requeue_s = min((j.requeue_at_s for j in waiting if j.requeue_at_s > now_s), default=1 << 62)
        queue = sorted((j for j in waiting if j.requeue_at_s <= now_s), key=lambda j: (-j.value, j.submit_s, j.id))
        self._index(sim)
        for j in queue:
            home = self.home.get(j.id)
            if home is None:
                continue
            pools = sim.clusters[home].pools
            for o, p in _usable(sim, j, pools):
                opt = j.options[o]
                n, per = sim.gang(opt, p.rp, j.replicas)
                if not self._quota_ok(use, home, j.team, opt.accelerator, n * per):
                    if self._preempt(sim, j, o, p, use):
                        break
                    continue
                units = sim.free_units(p, n, per)
                if units is None and self._preempt(sim, j, o, p, use):
                    break
                if units is not None and sim.place(j, p, o, units, per):
                    k = (home, j.team, opt.accelerator)
                    use[k] = use.get(k, 0) + n * per
                    self.on_pool.setdefault(p.key, []).append(j)
                    break

    def _index(self, sim: Engine) -> None:
        self.on_pool: dict[str, list[SimJob]] = {}
        for v in sim.active.values():
            if v.pool is not None:
                self.on_pool.setdefault(v.pool.key, []).append(v)

    def _preempt(self, sim: Engine, j: SimJob, o: int, p: SimPool, use: dict[tuple[str, str, str], int]) -> bool:
        """Kueue's within-ClusterQueue preemption (lower priority of the same team) and reclaim of cohort
        borrowers when the team is under its nominal: victims lowest priority first, newest first, only as
        many as make the job fit; nothing is stopped unless the job then fits."""
        opt = j.options[o]
        n, per = sim.gang(opt, p.rp, j.replicas)
        acc = opt.accelerator
        nominal = self.quotas.get((p.rp.cluster, j.team, acc), (0, 0))[0]
        under = use.get((p.rp.cluster, j.team, acc), 0) + n * per <= nominal
        candidates = []
        for v in self.on_pool.get(p.key, []):
            if v.pool is not p or not v.preemptible:
                continue
            same = v.team == j.team and v.value < j.value
            borrower = (v.team != j.team and under and self.cohort.get(v.team) == self.cohort.get(j.team)
                        and use.get((p.rp.cluster, v.team, acc), 0) > self.quotas.get((p.rp.cluster, v.team, acc),
                                                                                      (0, 0))[0])
            if same or borrower:
                candidates.append(v)
        candidates.sort(key=lambda v: (v.value, -v.placed_s, v.id))
        victims: list[SimJob] = []
        for v in candidates:
            victims.append(v)
            if _room_without(p, victims, n, per) and self._quota_ok(
                    _without(use, victims), p.rp.cluster, j.team, acc, n * per):
                for x in victims:
                    sim.stop(x, "preempt")
                fresh = self._usage(sim)
                use.clear()
                use.update(fresh)
                self._index(sim)
                units = sim.free_units(p, n, per)
                if units is not None and sim.place(j, p, o, units, per):
                    k2 = (p.rp.cluster, j.team, acc)
                    use[k2] = use.get(k2, 0) + n * per
                    self.on_pool.setdefault(p.key, []).append(j)
                    return True
                return False
        return False


def _without(use: dict[tuple[str, str, str], int], victims: list[SimJob]) -> dict[tuple[str, str, str], int]:
    out = dict(use)
    for v in victims:
        k = (v.cluster, v.team, v.options[v.option].accelerator)
        out[k] = out.get(k, 0) - v.accelerators
    return out


def _room_without(p: SimPool, victims: list[SimJob], count: int, per_unit: int) -> bool:
    freed: dict[int, int] = {}
    for v in victims:
        for i in v.units:
            freed[i] = freed.get(i, 0) + v.per_unit
    cap = p.rp.unit_accelerators
    fits = sum(1 for i, u in enumerate(p.units) if u.state != "failed" and u.used - freed.get(i, 0) + per_unit <= cap)
    return fits >= count


def quotas_of(v: Validated) -> dict[tuple[str, str, str], tuple[int, int | None]]:
    """The per-cluster quotas Fleet renders for Kueue (a plan of the fleet with no jobs)."""
    from .. import pipeline

    empty = replace(v, loaded=replace(v.loaded, jobs=()), options={})
    return {(q.cluster, q.team, q.accelerator): (q.nominal, q.borrowing_limit) for q in pipeline.plan(empty).quotas}


def make(name: str, sim: Engine) -> Fifo | Cheapest | Kueue | FleetLoop:
    if name == "fifo":
        return Fifo(sim)
    if name == "cheapest":
        return Cheapest()
    if name == "kueue":
        return Kueue(sim, quotas_of(sim.v))
    return FleetLoop(sim)
