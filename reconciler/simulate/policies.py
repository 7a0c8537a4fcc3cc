"""The policies `fleet simulate` compares, all on the same engine, trace and faults. Pure.

- `fleet`: the real planner (`pipeline.plan`), from what the simulated clusters hold. Every loop in which
  something changed (an arrival, a finish, an interruption, a repair, an outage) it plans the active jobs
  against its previous plan as the base (stickiness: running jobs keep their units unless the plan moves or
  preempts them, with the plan's limits on migrations), clusters in an outage marked `down` (what the loop
  does once a cluster is lost), and the engine carries the plan out: it stops what the plan preempts or
  moves, and starts what it places, on the plan's units. Nothing changed: the plan stands and nothing is
  planned (incremental planning at its simplest). Leaves out, until `plan(observed=Snapshot, now=)` and the
  reconcile loop's `decide` land (issue 12 item 2, issue 14): failed units are not known to the planner (a job
  it keeps on a failed unit waits for the repair instead of being placed elsewhere), and there is no
  cluster_lost/node_failed grace time (an outage is acted on at the next loop).
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

from ..plan.types import Plan
from ..validate import Validated
from .cluster import SimPool
from .engine import Engine, SimJob

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


class Fifo:
    name = "fifo"

    def __init__(self, sim: Engine) -> None:
        self.order = [p for c in sorted(sim.clusters) for p in sim.clusters[c].pools]

    def step(self, sim: Engine, now_s: int) -> None:
        for j in sorted(sim.waiting(), key=lambda j: (j.submit_s, j.id)):
            if not _try(sim, j, _usable(sim, j, self.order)):
                return


class Cheapest:
    name = "cheapest"

    def step(self, sim: Engine, now_s: int) -> None:
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
        use = self._usage(sim)
        queue = sorted((j for j in sim.waiting() if j.requeue_at_s <= now_s),
                       key=lambda j: (-j.value, j.submit_s, j.id))
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
                    break

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
        for v in sim.active.values():
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
                units = sim.free_units(p, n, per)
                if units is not None and sim.place(j, p, o, units, per):
                    k2 = (p.rp.cluster, j.team, acc)
                    use[k2] = use.get(k2, 0) + n * per
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


class FleetPolicy:
    """The real planner, driven from the simulated fleet (see the module docstring for what it leaves out)."""

    name = "fleet"

    def __init__(self, sim: Engine) -> None:
        self.plans = 0

    def step(self, sim: Engine, now_s: int) -> None:
        from .. import pipeline

        if not sim.changed:
            return
        sim.changed = False
        view = _view(sim)
        base = _base(sim)
        planned = pipeline.plan(view, base=base)
        self.plans += 1
        sim.plan = planned
        target = {p.job: p for p in planned.placements}
        preempted = {p.job for p in planned.preemptions}
        for j in sorted(sim.active.values(), key=lambda j: j.id):
            if j.pool is None:
                continue
            t = target.get(j.id)
            if t is None:
                sim.stop(j, "preempt" if j.id in preempted else "requeue")
            elif (t.cluster, t.pool, t.option, t.units) != (j.cluster, j.pool.rp.name, j.option, j.units):
                sim.stop(j, "move")
        for pl in planned.placements:
            j = sim.by_id[pl.job]
            if j.state == "waiting":
                pool = sim.pools[pl.pool_key]
                if not sim.place(j, pool, pl.option, pl.units, pl.accelerators_per_unit):
                    sim.changed = True          # a unit is failed or taken: plan again next loop


def _view(sim: Engine) -> Validated:
    """The repository as the planner sees it this loop: the active jobs, clusters in an outage down."""
    v = sim.v
    active = sorted(sim.active)
    down = {name for name, c in sim.clusters.items() if c.down}
    jobs = tuple(sim.by_id[i].job for i in active)
    loaded = v.loaded
    if down:
        clusters = tuple(c.model_copy(update={"status": "down"}) if c.name in down else c for c in loaded.clusters)
        loaded = replace(loaded, clusters=clusters)
        pools = tuple(replace(p, status="down") if p.cluster in down else p for p in v.pools)
        v = replace(v, pools=pools)
    loaded = replace(loaded, jobs=jobs)
    return replace(v, loaded=loaded, options={i: v.options[i] for i in active if i in v.options})


def _base(sim: Engine) -> Plan | None:
    """The last plan, keeping only the placements the clusters hold now (interrupted jobs are placed anew)."""
    if sim.plan is None:
        return None
    keep = tuple(p for p in sim.plan.placements
                 if (j := sim.by_id.get(p.job)) is not None and j.pool is not None and j.units == p.units
                 and j.cluster == p.cluster)
    return replace(sim.plan, placements=keep, preemptions=())


def quotas_of(v: Validated) -> dict[tuple[str, str, str], tuple[int, int | None]]:
    """The per-cluster quotas Fleet renders for Kueue (a plan of the fleet with no jobs)."""
    from .. import pipeline

    empty = replace(v, loaded=replace(v.loaded, jobs=()), options={})
    return {(q.cluster, q.team, q.accelerator): (q.nominal, q.borrowing_limit) for q in pipeline.plan(empty).quotas}


def make(name: str, sim: Engine) -> Fifo | Cheapest | Kueue | FleetPolicy:
    if name == "fifo":
        return Fifo(sim)
    if name == "cheapest":
        return Cheapest()
    if name == "kueue":
        return Kueue(sim, quotas_of(sim.v))
    return FleetPolicy(sim)
