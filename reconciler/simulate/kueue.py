"""The `kueue` and `kueue-multikueue` baselines of `fleet simulate`: what Kueue alone gives. Pure.

ClusterQueues. One per team and cluster, in the team's cohort (the same cohort tree in every cluster, as
`fleet render` writes it). Their nominal quota and lending limit per accelerator are the per-cluster split
that `fleet render` writes for a fleet with no jobs placed (`plan.summary.cluster_quotas`: the team's quota
split over the clusters by capacity, lending limit in proportion); the borrowing limit is the team's own
`borrowing_limit` from policies/teams.yaml, since Kueue alone has no planner to decide borrowing (what
`fleet render` writes there is what Fleet's plan borrows). Admission, borrowing and lending in a cluster use
the planner's quota ledger (`plan.quota.QuotaLedger`, Kueue's model) over that cluster's ClusterQueues.
Simplified: one quota per accelerator and cluster, not one per flavor (pool); Kueue's flavor quotas would
only constrain it further.

`kueue`. Each workload is created in a LocalQueue of one cluster, the one where it could ever be admitted
(its first usable option fits the ClusterQueue's nominal plus what it may borrow, with the cohort idle),
most nominal quota first, ties by name; it never moves from there (a down cluster means it waits). Each
loop interval: waiting workloads by priority then creation (BestEffortFIFO: one that does not fit does not
block the others); flavors in the job's option order, then the cluster's pool order; admitted where quota
and units are free (absent units are provisioned, as with a ProvisioningRequest). No budgets, no costs.

Preemption (kubernetes-sigs/kueue pkg/scheduler/preemption): when quota is short, candidates in the same
cluster and accelerator are the team's own lower-priority workloads (`withinClusterQueue`, from
priorities.yaml's `within_team`) and, if the preemptor then fits within its nominal quota, cohort-mates'
workloads while their ClusterQueue borrows (`reclaimWithinCohort`: any, or lower priority only); ordered as
`CandidatesOrdering` does: other ClusterQueues first, then lower priority, then most recently admitted;
removed one by one until the preemptor fits, then added back in reverse while it still fits (Kueue's
minimal set). A preempted workload is requeued at once; only one whose pods lost their node (fault, reclaim,
outage) waits out the PodsReady-timeout backoff (`requeue_at_s`, engine.py).

`kueue-multikueue` (MultiKueue, KEP-693 and kueue.sigs.k8s.io/docs/concepts/multikueue): a manager cluster
holds a ClusterQueue per team with the team's fleet-wide quota from policies/teams.yaml (the docs: the
manager's quota should equal the workers' total) and reserves quota there, in the same order; a reserved
workload is copied to every worker cluster (the AllAtOnce dispatcher) and runs in the first worker that
admits it, by the worker's own Kueue as above; the other copies are removed. The simulation resolves the
race by cluster name. Workers preempt by their own rules; the manager's quota must hold as well.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from ..models import Quota, TeamsDoc
from ..plan.quota import QuotaLedger
from ..validate import Validated
from .cluster import SimPool
from .engine import Engine
from .state import SimJob

Key = tuple[str, str, str]          # (cluster, team, accelerator)


def cluster_teams(v: Validated) -> dict[str, TeamsDoc]:
    """Per cluster, policies/teams.yaml with each team's quota replaced by its ClusterQueue's in that cluster."""
    from .. import pipeline

    teams = v.loaded.teams
    assert teams is not None
    empty = replace(v, loaded=replace(v.loaded, jobs=()), options={})
    split: dict[str, dict[str, dict[str, Quota]]] = defaultdict(lambda: defaultdict(dict))
    for q in pipeline.plan(empty).quotas:
        declared = next(t for t in teams.teams if t.name == q.team).quota[q.accelerator]
        split[q.cluster][q.team][q.accelerator] = Quota(   # a `spot:` quota: this cluster's part, as render gives it
            nominal=q.nominal, borrowing_limit=declared.borrowing_limit, lending_limit=q.lending_limit,
            spot=None if declared.spot is None else q.spot)
    clusters = {rp.cluster for rp in v.pools}
    return {c: teams.model_copy(update={"teams": tuple(t.model_copy(update={"quota": dict(split[c][t.name])})
                                                       for t in teams.teams)}) for c in sorted(clusters)}


def amount(j: SimJob, o: int) -> int:
    return j.options[o].count * j.replicas


class Kueue:
    name = "kueue"

    def __init__(self, sim: Engine, multi: bool = False) -> None:
        v = sim.v
        assert v.loaded.teams is not None and v.loaded.priorities is not None
        self.multi = multi
        self.name = "kueue-multikueue" if multi else "kueue"
        self.teams = cluster_teams(v)
        self.fleet_teams = v.loaded.teams
        p = v.loaded.priorities.preemption
        self.within, self.reclaim = p.within_team, p.reclaim_within_cohort
        self.next_requeue_s = 0
        self.home: dict[str, str | None] = {} if multi else {j.id: self._home(sim, j) for j in sim.jobs}

    def _home(self, sim: Engine, j: SimJob) -> str | None:
        """The cluster whose LocalQueue the workload is created in (module docstring)."""
        best: list[tuple[bool, int, str]] = []
        for c in sorted(self.teams):
            usable = self._usable(sim, j, c)
            if not usable:
                continue
            o, p = usable[0]
            led = QuotaLedger(self.teams[c])
            acc = j.options[o].accelerator
            n, per = sim.gang(j.options[o], p.rp, j.replicas)
            ever = led.shortfall(j.team, acc, amount(j, o)) == 0 and n <= p.rp.max and per <= p.rp.unit_accelerators
            best.append((not ever, -led.limits(j.team, acc)[0], c))
        return min(best)[2] if best else None

    # --- quota -----------------------------------------------------------------------------------------------

    def _ledgers(self, sim: Engine) -> tuple[dict[str, QuotaLedger], QuotaLedger]:
        cqs = {c: QuotaLedger(t) for c, t in self.teams.items()}
        manager = QuotaLedger(self.fleet_teams)
        for j in sim.active.values():
            if j.pool is not None:
                acc = j.options[j.option].accelerator
                cqs[j.cluster].add(j.team, acc, amount(j, j.option))
                manager.add(j.team, acc, amount(j, j.option))
        return cqs, manager

    def step(self, sim: Engine, now_s: int) -> None:
        if not sim.changed and now_s < self.next_requeue_s:
            return
        sim.changed = False
        self.cqs, self.manager = self._ledgers(sim)
        waiting = sim.waiting()
        self.next_requeue_s = min((j.requeue_at_s for j in waiting if j.requeue_at_s > now_s), default=1 << 62)
        for j in sorted((j for j in waiting if j.requeue_at_s <= now_s), key=lambda j: (-j.value, j.submit_s, j.id)):
            clusters = sorted(self.teams) if self.multi else [c for c in [self.home.get(j.id)] if c is not None]
            if not any(self._admit(sim, j, c) for c in clusters):
                any(self._preempt(sim, j, c) for c in clusters)

    def _fits(self, j: SimJob, c: str, o: int) -> bool:
        acc, n = j.options[o].accelerator, amount(j, o)
        return self.cqs[c].shortfall(j.team, acc, n) == 0 and (
            not self.multi or self.manager.shortfall(j.team, acc, n) == 0)

    def _usable(self, sim: Engine, j: SimJob, c: str) -> list[tuple[int, SimPool]]:
        return [(o, p) for o in range(len(j.options)) for p in sim.clusters[c].pools if sim.can_use(j, j.options[o], p)]

    def _place(self, sim: Engine, j: SimJob, o: int, p: SimPool) -> bool:
        n, per = sim.gang(j.options[o], p.rp, j.replicas)
        units = sim.free_units(p, n, per)
        if units is None or not sim.place(j, p, o, units, per):
            return False
        self.cqs[p.rp.cluster].add(j.team, j.options[o].accelerator, amount(j, o))
        self.manager.add(j.team, j.options[o].accelerator, amount(j, o))
        return True

    def _admit(self, sim: Engine, j: SimJob, c: str) -> bool:
        return any(self._fits(j, c, o) and self._place(sim, j, o, p) for o, p in self._usable(sim, j, c))

    # --- preemption ------------------------------------------------------------------------------------------

    def _candidates(self, sim: Engine, j: SimJob, c: str, acc: str) -> list[SimJob]:
        led = self.cqs[c]
        under = led.usage[(j.team, acc)] + amount(j, j.option) <= led.limits(j.team, acc)[0]
        domain = led.domain.get(j.team)
        out = []
        for v in sim.active.values():
            if v.pool is None or v.cluster != c or not v.preemptible or v.options[v.option].accelerator != acc:
                continue
            if v.team == j.team:
                ok = (self.within == "lower_priority" and v.value < j.value) or (
                    self.within == "lower_or_newer_equal_priority" and (v.value, -v.submit_s) < (j.value, -j.submit_s))
            else:
                ok = (domain is not None and led.domain.get(v.team) == domain and under
                      and led.is_borrowing(v.team, acc)
                      and (self.reclaim == "any" or (self.reclaim == "lower_priority" and v.value < j.value)))
            if ok:
                out.append(v)
        return sorted(out, key=lambda v: (v.team == j.team, v.value, -v.placed_s, v.id))

    def _preempt(self, sim: Engine, j: SimJob, c: str) -> bool:
        if sim.clusters[c].down:
            return False
        for o, p in self._usable(sim, j, c):
            j.option = o                                     # the flavor assignment being tried
            acc = j.options[o].accelerator
            n, per = sim.gang(j.options[o], p.rp, j.replicas)
            victims: list[SimJob] = []
            for v in self._candidates(sim, j, c, acc):
                self._take(v, -1)
                victims.append(v)
                if self._fits(j, c, o) and _room_without(p, victims, n, per):
                    break
            else:
                for v in victims:
                    self._take(v, 1)
                continue
            for v in reversed(victims[:-1]):                  # the minimal set: add back what is not needed
                self._take(v, 1)
                if self._fits(j, c, o) and _room_without(p, [x for x in victims if x is not v], n, per):
                    victims.remove(v)
                else:
                    self._take(v, -1)
            for v in victims:
                sim.stop(v, "preempt")
            if self._place(sim, j, o, p):
                return True
        return False

    def _take(self, v: SimJob, sign: int) -> None:
        acc = v.options[v.option].accelerator
        self.cqs[v.cluster].add(v.team, acc, sign * amount(v, v.option))
        self.manager.add(v.team, acc, sign * amount(v, v.option))


def _room_without(p: SimPool, victims: list[SimJob], count: int, per_unit: int) -> bool:
    """The pool has `count` units with `per_unit` accelerators free once the victims (there) are gone."""
    freed: dict[int, int] = {}
    for v in victims:
        if v.pool is p:
            for i in v.units:
                freed[i] = freed.get(i, 0) + v.per_unit
    cap = p.rp.unit_accelerators
    fits = sum(1 for i, u in enumerate(p.units) if u.state != "failed" and u.used - freed.get(i, 0) + per_unit <= cap)
    return fits >= count
