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

`kueue`. Each workload is created in a LocalQueue of one cluster, one where it could ever be admitted (its
first usable option fits the ClusterQueue's nominal plus what it may borrow, with the cohort idle), drawn in
proportion to the team's nominal quota there (the split assumes work spread by capacity; uniformly where the
team has none; before the forty-second session the cluster with the most, so every H100 job of the example
fleet went to one cluster and owned nodes elsewhere idled); it never moves from there (a down cluster means it
waits). Each
loop interval runs Kueue's scheduling cycles (pkg/scheduler/scheduler.go) until every waiting workload had
its turn: a cycle takes the head of each ClusterQueue (its waiting workloads by priority, then creation)
and tries those that fit without borrowing first, then by priority, then creation (the scheduler's entry
ordering); a head that does not fit goes aside for this interval and the next becomes head
(BestEffortFIFO). Flavors in the job's option order, then the cluster's pool order; admitted where quota
and units are free (absent units are provisioned, as with a ProvisioningRequest). Spot-only work of a team
with a `spot:` quota is charged to it (`QuotaLedger.charged`, render's spot flavors). No budgets, no costs.

Preemption (kubernetes-sigs/kueue pkg/scheduler/preemption, the classical algorithm, flat cohorts): only
when no usable option fits the quota (Kueue preempts for quota, never for nodes: where the quota fits and
the pool lacks the nodes, Kueue admits and the pods wait, and here the workload waits). Candidates in the
same cluster and quota: the team's own workloads by `withinClusterQueue` (priorities.yaml's `within_team`),
and the workloads of cohort-mates whose ClusterQueue borrows, by `reclaimWithinCohort`. A cohort candidate
may be taken while the preemptor borrows where the preemptor fits its nominal quota with its request
(hierarchical reclaim) or, with `borrowWithinCohort`, it has a lower priority at most the threshold; other
cohort candidates only in an attempt where the preemptor ends within nominal. Attempts, as Kueue orders
them: with borrowing only, if no cohort candidate or (no borrowWithinCohort and the ClusterQueue is at its
nominal); without then with borrowing, if no borrowWithinCohort and the request does not fit nominal; else
with then without. Candidates in `CandidatesOrdering`'s order (other ClusterQueues first, lower priority,
most recently admitted) are removed one by one, skipping a cohort-mate's once its ClusterQueue no longer
borrows, until the preemptor fits; then added back in reverse while it still fits (the minimal set). The
victims are stopped only if the pool then has the nodes. A preempted workload is requeued at once; only one
whose pods lost their node (fault, reclaim, outage) waits out the PodsReady-timeout backoff
(`requeue_at_s`, engine.py). Not modelled: hierarchical cohorts (the ledger lends within the root's domain,
as the planner does), per-flavor quotas, that Kueue lets a request over nominal preempt only through
hierarchical reclaim or borrowWithinCohort, and that with waitForPodsReady's recovery timeout (30 minutes) a
workload whose node is re-created sooner (10 minutes for a cloud GPU node here) keeps its admission and quota
(here it is evicted and requeued with backoff: against Kueue).

`kueue-multikueue` (MultiKueue, KEP-693 and kueue.sigs.k8s.io/docs/concepts/multikueue): a manager cluster
holds a ClusterQueue per team with the team's fleet-wide quota from policies/teams.yaml (the docs: the
manager's quota should equal the workers' total) and reserves quota there, in the same order; a reserved
workload is copied to every worker cluster (the AllAtOnce dispatcher) and runs in the first worker that
admits it, by the worker's own Kueue as above; the other copies are removed. The simulation draws the
race's order per workload and cycle (`raced`). Workers preempt by their own rules; the manager's quota
must hold as well. Not modelled: that the manager holds the quota it reserved for a workload until a worker
admits a copy (so a workload no worker admits yet keeps later work of its team out: in MultiKueue's favour);
the forty-second session's first form of it could not preempt such a reservation, and stopped running work
in its place (review), so it was taken out.
"""

from __future__ import annotations

import random
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import replace

from ..models import Quota, TeamsDoc
from ..plan.quota import QuotaLedger
from ..validate import Validated
from .cluster import SimPool, room_without
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


def charged(led: QuotaLedger, j: SimJob, o: int) -> str:
    """The quota of the ledger the job's option `o` is charged to (its accelerator's, or its `spot:` quota)."""
    return led.charged(j.team, j.options[o].accelerator, j.spot)


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
        self.bwc = p.borrow_within_cohort.policy != "never"
        self.threshold = p.borrow_within_cohort.max_priority_threshold
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
            key = charged(led, j, o)
            n, per = sim.gang(j.options[o], p.rp, j.replicas)
            ever = led.shortfall(j.team, key, amount(j, o)) == 0 and n <= p.rp.max and per <= p.rp.unit_accelerators
            best.append((not ever, led.limits(j.team, key)[0], c))
        if not best:
            return None
        fits = [(n, c) for never, n, c in best if not never] or [(n, c) for _, n, c in best]
        weights = [n for n, _ in fits] if any(n for n, _ in fits) else [1] * len(fits)
        return draw(sim, j.id).choices([c for _, c in fits], weights)[0]

    # --- quota -----------------------------------------------------------------------------------------------

    def _ledgers(self, sim: Engine) -> tuple[dict[str, QuotaLedger], QuotaLedger]:
        cqs = {c: QuotaLedger(t) for c, t in self.teams.items()}
        manager = QuotaLedger(self.fleet_teams)
        for j in sim.active.values():
            if j.pool is not None:
                cqs[j.cluster].add(j.team, charged(cqs[j.cluster], j, j.option), amount(j, j.option))
                manager.add(j.team, charged(manager, j, j.option), amount(j, j.option))
        return cqs, manager

    def step(self, sim: Engine, now_s: int) -> None:
        if not sim.changed and now_s < self.next_requeue_s:
            return
        sim.changed = False
        self.cqs, self.manager = self._ledgers(sim)
        waiting = sim.waiting()
        self.next_requeue_s = min((j.requeue_at_s for j in waiting if j.requeue_at_s > now_s), default=1 << 62)
        queues: dict[tuple[str, str], deque[SimJob]] = {}      # ClusterQueue -> its waiting workloads, in order
        for j in sorted((j for j in waiting if j.requeue_at_s <= now_s), key=lambda j: (-j.value, queued_at(j), j.id)):
            home = "" if self.multi else self.home.get(j.id)
            if home is not None:
                queues.setdefault((home, j.team), deque()).append(j)
        while queues:                               # one scheduling cycle: the head of every ClusterQueue
            heads = [q.popleft() for q in queues.values()]
            queues = {k: q for k, q in queues.items() if q}
            for j in sorted(heads, key=lambda j: (self._borrows(sim, j), -j.value, queued_at(j), j.id)):
                clusters = raced(sim, j.id, now_s, self.teams) if self.multi else [self.home[j.id] or ""]
                if not any(self._admit(sim, j, c) for c in clusters):
                    any(self._preempt(sim, j, c) for c in clusters)

    def _borrows(self, sim: Engine, j: SimJob) -> bool:
        """The head's assignment borrows (Kueue's cycle tries those that do not first): on the manager's
        ClusterQueue with MultiKueue; else on its cluster's, for the first option whose quota fits (or the first
        usable option)."""
        if self.multi:
            return self.manager.needs_borrow(j.team, charged(self.manager, j, 0), amount(j, 0))
        c = self.home[j.id] or ""
        options = list(dict.fromkeys(o for o, _ in self._usable(sim, j, c)))
        if not options:
            return False
        o = next((o for o in options if self._fits(j, c, o)), options[0])
        return self.cqs[c].needs_borrow(j.team, charged(self.cqs[c], j, o), amount(j, o))

    def _fits(self, j: SimJob, c: str, o: int, borrow: bool = True) -> bool:
        """The option fits the quota of the cluster's ClusterQueue (and, with MultiKueue, the manager's);
        `borrow` False: within the ClusterQueue's nominal quota."""
        led, n = self.cqs[c], amount(j, o)
        key = charged(led, j, o)
        if led.shortfall(j.team, key, n) or (not borrow and led.needs_borrow(j.team, key, n)):
            return False
        return not self.multi or self.manager.shortfall(j.team, charged(self.manager, j, o), n) == 0

    def _usable(self, sim: Engine, j: SimJob, c: str) -> list[tuple[int, SimPool]]:
        return [(o, p) for o in range(len(j.options)) for p in sim.clusters[c].pools if sim.can_use(j, j.options[o], p)]

    def _place(self, sim: Engine, j: SimJob, o: int, p: SimPool) -> bool:
        n, per = sim.gang(j.options[o], p.rp, j.replicas)
        units = sim.free_units(p, n, per)
        if units is None or not sim.place(j, p, o, units, per):
            return False
        self._take(j, 1)
        return True

    def _admit(self, sim: Engine, j: SimJob, c: str) -> bool:
        return any(self._fits(j, c, o) and self._place(sim, j, o, p) for o, p in self._usable(sim, j, c))

    # --- preemption ------------------------------------------------------------------------------------------

    def _candidates(self, sim: Engine, j: SimJob, c: str, o: int) -> list[tuple[SimJob, bool]]:
        """The workloads Kueue's policies let `j` (option `o`) preempt in cluster `c`, in `CandidatesOrdering`'s
        order, each with whether it may go while the preemptor borrows (module docstring)."""
        led = self.cqs[c]
        key = charged(led, j, o)
        advantage = led.usage[(j.team, key)] + amount(j, o) <= led.limits(j.team, key)[0]
        domain = led.domain.get(j.team)
        out = []
        for v in sim.active.values():
            if v.pool is None or v.cluster != c or not v.preemptible or charged(led, v, v.option) != key:
                continue
            if v.team == j.team:
                ok = (self.within == "lower_priority" and v.value < j.value) or (
                    self.within == "lower_or_newer_equal_priority" and (v.value, -v.submit_s) < (j.value, -j.submit_s))
                if ok:
                    out.append((v, True))
            elif (domain is not None and led.domain.get(v.team) == domain and led.is_borrowing(v.team, key)
                  and (self.reclaim == "any" or (self.reclaim == "lower_priority" and v.value < j.value))):
                below = self.bwc and v.value < j.value and (self.threshold is None or v.value <= self.threshold)
                out.append((v, advantage or below))
        return sorted(out, key=lambda x: (x[0].team == j.team, x[0].value, -x[0].placed_s, x[0].id))

    def _targets(self, sim: Engine, j: SimJob, c: str, o: int) -> list[SimJob]:
        """Kueue's minimal set of victims for `j` (option `o`) in cluster `c`; empty if there is none."""
        led = self.cqs[c]
        key = charged(led, j, o)
        candidates = self._candidates(sim, j, c, o)
        n, used = led.limits(j.team, key)[0], led.usage[(j.team, key)]
        advantage = used + amount(j, o) <= n
        if all(v.team == j.team for v, _ in candidates) or (not self.bwc and used >= n):
            attempts: tuple[bool, ...] = (True,)
        elif not self.bwc and not advantage:
            attempts = (False, True)
        else:
            attempts = (True, False)
        for borrow in attempts:
            victims: list[SimJob] = []
            for v, while_borrowing in candidates:
                if v.team != j.team and ((borrow and not while_borrowing)
                                         or not led.is_borrowing(v.team, charged(led, v, v.option))):
                    continue
                self._take(v, -1)
                victims.append(v)
                if self._fits(j, c, o, borrow):
                    for x in reversed(victims[:-1]):          # the minimal set: add back what is not needed
                        self._take(x, 1)
                        if self._fits(j, c, o, borrow):
                            victims.remove(x)
                        else:
                            self._take(x, -1)
                    for x in victims:
                        self._take(x, 1)
                    return victims
            for x in victims:
                self._take(x, 1)
        return []

    def _preempt(self, sim: Engine, j: SimJob, c: str) -> bool:
        usable = self._usable(sim, j, c)
        if sim.clusters[c].down or any(self._fits(j, c, o) for o in {o for o, _ in usable}):
            return False                                      # quota fits (Kueue admits): nodes are short
        for o, p in usable:
            victims = self._targets(sim, j, c, o)
            n, per = sim.gang(j.options[o], p.rp, j.replicas)
            if not victims or not room_without(p, [(v.units, v.per_unit) for v in victims if v.pool is p], n, per):
                continue
            for v in victims:
                self._take(v, -1)
                sim.stop(v, "preempt")
                if self.multi:      # the worker evicts its copy: the manager's Workload, by its AdmissionCheck
                    v.evicted_s = sim.now
            if self._place(sim, j, o, p):
                return True
        return False

    def _take(self, v: SimJob, sign: int) -> None:
        """Add (1) or remove (-1) the job's quota use at its cluster's ClusterQueue and the manager's."""
        n = sign * amount(v, v.option)
        self.cqs[v.cluster].add(v.team, charged(self.cqs[v.cluster], v, v.option), n)
        self.manager.add(v.team, charged(self.manager, v, v.option), n)


def queued_at(j: SimJob) -> int:
    """The time Kueue orders a waiting workload by (`Ordering.GetQueueOrderTimestamp`): its eviction's, after a
    PodsReady-timeout eviction (requeuingStrategy.timestamp: Eviction, the default) or an AdmissionCheck one
    (MultiKueue's, when a worker evicts its copy); else its creation's (a preempted workload keeps its place).
    Before the forty-second session every workload kept its creation time: one whose node failed was admitted
    again ahead of a workload of its class that had waited longer (review finding)."""
    return j.submit_s if j.evicted_s is None else j.evicted_s


def draw(sim: Engine, *key: object) -> random.Random:
    """A random stream of its own for one choice of the baseline (the run's seed and `key`), so that it draws
    nothing from the engine's stream of faults: every policy of one seed meets the same faults."""
    return random.Random(":".join(map(str, (sim.seed, *key))))


def raced(sim: Engine, job: str, now_s: int, clusters: Iterable[str]) -> list[str]:
    """The order in which MultiKueue's workers admit a workload's copies this cycle: a race (each worker's Kueue
    admits on its own cycle, and the manager keeps the first that admits: `bestMatchByCondition`), drawn per
    workload and cycle. Before the forty-second session it was settled by cluster name, which on the Alibaba
    fleet always put the on-demand eks-use1 before the reserved gke-usc1 (review finding)."""
    order = sorted(clusters)
    draw(sim, job, now_s).shuffle(order)
    return order
