"""The discrete-event engine of `fleet simulate`. Pure: a trace, a fleet, a policy, a fault model and a seed
in; the run's accounting out. No wall clock, no I/O; one `random.Random(seed)` draws every fault, in event
order, so equal inputs give equal results.

Events, in time order (ties by the order they were scheduled): a job arrives; the loop ticks every
`interval_s` (the policy observes and acts, faults for the next interval are drawn, idle units released);
a unit finishes provisioning or repair; a fault, a spot reclaim, an outage starts or ends; a job finishes.

Jobs. A job is waiting until a policy places it: the engine reserves its units (provisioning absent ones)
and the job is starting; its gang runs only once every unit is ready (work never progresses on part of a
gang). Running, it progresses at its option's `relative_speed` (work is counted in hours of the first
option), checkpoints every `checkpoint_minutes` of running time counted from the start of the run, its
warm-up included (0: continuously; none: never; state.py `kept_hours`), and finishes after `actual_hours` of
work. An interruption (fault, reclaim, outage, preemption, move) loses the work since the last checkpoint
and the job waits again; a policy places it anew; its next run first spends its restart cost (restore and
warm-up, faults.py) without progress, and is interrupted again then loses it.

Accounting, integrated between events: accelerators paid (units provisioning, ready, or failed when owned or
reserved), accelerators occupied (by running gangs), dollars (paid units x their unit price). Goodput counts
accelerator-hours of work kept (checkpointed, or finished); lost accelerator-hours are those redone, plus
the restart time spent. Quota and budget use of what is placed, and what of it breaks the rules, are kept
by `rules.Watch` (the `violations` of every policy).
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import bisect_right
from typing import Any, Protocol

from ..observe.model import Snapshot
from ..resolve import ResolvedOption, ResolvedPool, gang_fit, residency_fit, spot_policy
from ..validate import Validated
from .cluster import (
    ABSENT,
    FAILED,
    PROVISIONING,
    READY,
    Running,
    SimCluster,
    SimPool,
    Unit,
    provision_seconds,
    snapshot,
)
from .faults import FaultModel, poisson
from .remedy import Remedy
from .rules import Watch, hourly_usd
from .state import Counters, Group, Sample, SimJob, kept_hours
from .trace import Trace

ARRIVE, FINISH, READY_EV, REPAIRED, FAULT, SPOT, OUTAGE_ON, OUTAGE_OFF, SAMPLE, TICK = range(10)
SAMPLE_S = 3600
SCALE_DOWN_S = 30 * 60


class Policy(Protocol):
    name: str

    def step(self, sim: Engine, now_s: int) -> None:
        """Observe the simulated fleet and act on it (place, stop) through the engine."""


class Engine:
    def __init__(self, trace: Trace, faults: FaultModel, seed: int, days: float, interval_s: int) -> None:
        v = trace.validated
        self.v: Validated = v
        self.faults = faults
        self.rng, self.seed = random.Random(seed), seed     # the faults' stream; the baselines draw their own
        self.end_s = int(days * 86400)
        self.interval_s = interval_s
        prio = v.loaded.priorities
        assert prio is not None and v.loaded.teams is not None
        self.classes = {c.name: c for c in prio.classes}
        self.class_order = [c.name for c in sorted(prio.classes, key=lambda c: (-c.value, c.name))]
        namespaces = {t.name: t.queue_namespace for t in v.loaded.teams.teams}
        self.clusters: dict[str, SimCluster] = {}
        self.pools: dict[str, SimPool] = {}
        regions = {c.name: c.region for c in v.loaded.clusters}
        for rp in v.pools:
            c = self.clusters.setdefault(rp.cluster, SimCluster(rp.cluster, regions[rp.cluster], []))
            pool = SimPool(rp, v.unit_prices[rp.key].hourly_usd if rp.key in v.unit_prices else 0.0,
                           provision_seconds(rp), [Unit() for _ in range(rp.max)])
            c.pools.append(pool)
            self.pools[rp.key] = pool
        for doc in v.loaded.clusters:
            if doc.status == "down" and doc.name in self.clusters:
                self.clusters[doc.name].down = True
        self.jobs: list[SimJob] = []
        for i, tj in enumerate(trace.jobs):
            j = tj.job
            cls = self.classes[j.priority or prio.default]
            restart = faults.restart_minutes if tj.restart_minutes is None else tj.restart_minutes
            self.jobs.append(SimJob(i, j.id, j.team, namespaces.get(j.team, j.team), cls.name, cls.value,
                                    cls.preemptible, round(tj.submit_minutes * 60), tj.actual_hours,
                                    j.checkpoint_minutes, v.options.get(j.id, ()), spot_policy(j, cls.spot),
                                    j.replicas, j.data_region, j, restart_h=restart / 60))
        self.watch = Watch(v.loaded.teams, prio.preemption.reclaim_within_cohort, prio.preemption.within_team)
        self.by_id = {j.id: j for j in self.jobs}
        self.c = Counters()
        self.samples: list[Sample] = []
        self.events: list[tuple[int, int, int, int, Any]] = []
        self.seq = 0
        self.now = 0
        self.last_s = 0
        self.paid_acc = 0
        self.paid_usd_h = 0.0
        self.busy_acc = 0
        self.active: dict[str, SimJob] = {}         # waiting, starting or running, by id
        self.changed = True                         # something a policy must look at happened since its step
        self.autoscale = True                       # idle units released by the engine (not `fleet`; queued: always)

    # --- the loop -------------------------------------------------------------------------------------------

    def run(self, policy: Policy) -> None:
        self.policy = policy
        for j in self.jobs:
            if j.submit_s < self.end_s:
                self._at(j.submit_s, ARRIVE, j.idx)
        for o in self.faults.outages:
            self._at(int(o.start_hours * 3600), OUTAGE_ON, 0, (o.cluster, int((o.start_hours + o.hours) * 3600)))
        for p in self.pools.values():
            for i in range(p.rp.min):
                self._provision(p, i, instant=True)
        self._at(0, TICK, 0)
        self._at(0, SAMPLE, 0)
        while self.events:
            t, _, kind, a, b = heapq.heappop(self.events)
            if t > self.end_s:
                break
            self._accrue(t)
            self.now = t
            self._handle(kind, a, b)
        self._accrue(self.end_s)
        self.now = self.end_s
        for j in self.active.values():
            if j.state == "running":
                elapsed_h = (self.end_s - j.run_start_s) / 3600
                spent = min(elapsed_h, j.overhead_h)
                self.c.good_acc_h += kept_hours(j, elapsed_h) * j.accelerators
                self._lose("restart", spent * j.accelerators)

    def _at(self, t: int, kind: int, a: int, b: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, a, b))

    def _accrue(self, t: int) -> None:
        dt_h = (t - self.last_s) / 3600
        if dt_h > 0:
            self.c.paid_acc_h += self.paid_acc * dt_h
            self.c.busy_acc_h += self.busy_acc * dt_h
            self.c.cost_usd += self.paid_usd_h * dt_h
            self.watch.accrue(self.c, dt_h)
            self.last_s = t

    def _handle(self, kind: int, a: int, b: Any) -> None:
        if kind == ARRIVE:
            j = self.jobs[a]
            j.state = "waiting"
            self.active[j.id] = j
            self.changed = True
        elif kind == TICK:
            self.policy.step(self, self.now)
            self.watch.look(self.waiting(), Remedy(self).could)
            self._draw_faults()
            self._scale_down()
            self._at(self.now + self.interval_s, TICK, 0)
        elif kind == FINISH:
            j = self.jobs[a]
            if j.version == b and j.state == "running":
                self._finish(j)
        elif kind in (READY_EV, REPAIRED):
            key, version = b
            p = self.pools[key]
            u = p.units[a]
            if u.version == version and u.state in (PROVISIONING, FAILED):
                self._set(p, a, READY)
                for jid in list(u.jobs):
                    self._try_start(self.by_id[jid])
                self.changed = True
        elif kind == FAULT:
            key, what = b
            self._fail(self.pools[key], a, what)
        elif kind == SPOT:
            self._reclaim(self.pools[b], a)
        elif kind == OUTAGE_ON:
            name, until = b
            self._outage(self.clusters[name], until)
        elif kind == OUTAGE_OFF:
            self.clusters[b].down = False
            self.changed = True
        elif kind == SAMPLE:
            self._sample()
            self._at(self.now + SAMPLE_S, SAMPLE, 0)

    # --- units ----------------------------------------------------------------------------------------------

    def _set(self, p: SimPool, i: int, state: str, until_s: int = 0) -> None:
        u = p.units[i]
        was_paid = p.paid(u)
        u.state, u.until_s, u.since_s = state, until_s, self.now
        u.version += 1
        now_paid = p.paid(u)
        if was_paid != now_paid:
            sign = 1 if now_paid else -1
            self.paid_acc += sign * p.rp.unit_accelerators
            self.paid_usd_h += sign * p.unit_hourly_usd
        if state == ABSENT:
            p.present.discard(i)
        else:
            p.present.add(i)

    def release(self, p: SimPool, i: int) -> None:
        """Give a unit back (a pool shrinking): only one no job holds."""
        if not p.units[i].jobs and p.units[i].state != FAILED:
            self._set(p, i, ABSENT)

    def provision(self, p: SimPool, i: int) -> None:
        self._provision(p, i)

    def _provision(self, p: SimPool, i: int, instant: bool = False) -> None:
        u = p.units[i]
        if u.state != ABSENT:
            return
        u.idle_since_s = self.now
        if instant or p.provision_s == 0:
            self._set(p, i, READY)
            return
        self._set(p, i, PROVISIONING, self.now + p.provision_s)
        self._at(self.now + p.provision_s, READY_EV, i, (p.key, u.version))

    def _scale_down(self) -> None:
        """Release units no job holds, idle for SCALE_DOWN_S (reconcile.scale_down_after_minutes' default),
        beyond the pool's min: in every pool where the engine's own rule scales (`autoscale`), and in queued
        pools always, under `fleet` too (GKE's autoscaler removes the nodes a ProvisioningRequest granted once
        they are unneeded; the reconcile loop never resizes a queued pool)."""
        for p in self.pools.values():
            if not (self.autoscale or p.rp.queued):
                continue
            for i in sorted(p.present):
                u = p.units[i]
                if (i >= p.rp.min and u.state in (READY, PROVISIONING) and not u.jobs
                        and self.now - u.idle_since_s >= SCALE_DOWN_S):
                    self._set(p, i, ABSENT)

    # --- jobs -----------------------------------------------------------------------------------------------

    def gang(self, opt: ResolvedOption, rp: ResolvedPool, replicas: int) -> tuple[int, int]:
        """(units, accelerators per unit) one placement of the option takes in the pool."""
        if opt.shape is not None:
            return opt.slices * replicas, rp.unit_accelerators
        if opt.count <= rp.unit_accelerators:
            return replicas, opt.count
        return opt.count // rp.unit_accelerators * replicas, rp.unit_accelerators

    def can_use(self, j: SimJob, opt: ResolvedOption, p: SimPool) -> bool:
        """The pool could ever hold the option (accelerator, shape, spot, residency): the validator's rule."""
        return gang_fit(opt, p.rp, j.spot, j.job.kind) is None and residency_fit(j.job, p.rp) is None

    def free_units(self, p: SimPool, count: int, per_unit: int, best_first: bool = False) -> tuple[int, ...] | None:
        """`count` distinct units that can take `per_unit` more accelerators now (ready ones first, then
        provisioning, then absent ones to provision), or None. A down cluster has none. `best_first`: those
        there are, up to `count`, in the order they are chosen."""
        if self.clusters[p.rp.cluster].down:
            return () if best_first else None
        cap, absent = p.rp.unit_accelerators, []
        ready: list[tuple[int, int]] = []
        later: list[tuple[int, int]] = []
        for i, u in enumerate(p.units):
            if u.state == FAILED or u.used + per_unit > cap:
                continue
            if u.state == READY:
                ready.append((-u.used, i))
            elif u.state == PROVISIONING:
                later.append((-u.used, i))
            else:
                absent.append(i)
            if len(ready) >= count and per_unit == cap:
                break
        chosen = [i for _, i in sorted(ready)] + [i for _, i in sorted(later)] + absent
        return tuple(chosen[:count]) if best_first else tuple(sorted(chosen[:count])) if len(chosen) >= count else None

    def place(self, j: SimJob, p: SimPool, option: int, units: tuple[int, ...], per_unit: int,
              extra: tuple[Group, ...] = ()) -> bool:
        """Reserve the units for the job (provisioning absent ones); it runs once all are ready. `extra`: a
        spread service's other replica groups, held and run together with the first."""
        groups = [Group(p, units, per_unit, j.options[option].accelerator), *extra]
        if j.state != "waiting" or any(self.clusters[g.pool.rp.cluster].down for g in groups):
            return False
        for g in groups:
            if any(g.pool.units[i].state == FAILED or g.pool.units[i].used + g.per_unit > g.pool.rp.unit_accelerators
                   for i in g.units):
                return False
        j.state, j.pool, j.cluster, j.option, j.units, j.per_unit = "starting", p, p.rp.cluster, option, units, per_unit
        j.extra, j.placed_s = tuple(extra), self.now
        for g in groups:
            self._hold(j, g, 1)
            for i in g.units:
                g.pool.units[i].used += g.per_unit
                g.pool.units[i].jobs.append(j.id)
                self._provision(g.pool, i)
        self._try_start(j)
        return True

    def _try_start(self, j: SimJob) -> None:
        if j.state != "starting" or j.pool is None or self.clusters[j.cluster].down:
            return
        if any(g.pool.units[i].state != READY or self.clusters[g.pool.rp.cluster].down
               for g in j.groups() for i in g.units):
            return
        j.state = "running"
        j.run_start_s = self.now
        if j.first_start_s is None:
            j.first_start_s = self.now
        self.busy_acc += j.accelerators
        rate = j.options[j.option].relative_speed * self._elastic_speedup(j)
        left_h = max(0.0, j.work_h - j.done_h) / rate + j.overhead_h
        j.version += 1
        self._at(self.now + max(1, math.ceil(left_h * 3600)), FINISH, j.idx, j.version)

    def _elastic_speedup(self, j: SimJob) -> float:
        """An elastic job (`workers:`) works at units / `workers.max` of its rate: its `duration_hours` is at
        `max` (docs/workloads.md); linear scaling is the simulator's assumption."""
        if j.job.workers is None or not j.units:
            return 1.0
        return len(j.units) / j.job.workers.max

    def _hold(self, j: SimJob, g: Group, sign: int) -> None:
        """The team's quota and budget use of a group placed (1) or released (-1): rules.Watch."""
        self.watch.change(j.team, g.accelerator, sign * g.per_unit * len(g.units),
                          sign * hourly_usd(g.pool, g.per_unit, len(g.units)), j.spot,
                          j.value if j.preemptible else None)

    def _release(self, j: SimJob) -> None:
        if j.state == "running":
            self.busy_acc -= j.accelerators
        for g in j.groups():
            self._hold(j, g, -1)
            for i in g.units:
                u = g.pool.units[i]
                u.used -= g.per_unit
                u.jobs.remove(j.id)
                if not u.jobs:
                    u.idle_since_s = self.now
        j.last_region = self.clusters[j.cluster].region
        j.pool, j.units, j.per_unit, j.extra = None, (), 0, ()
        self.changed = True

    def _lose(self, why: str, acc_h: float) -> None:
        if acc_h > 0:
            self.c.lost_acc_h += acc_h
            self.c.lost_by[why] = self.c.lost_by.get(why, 0.0) + acc_h

    def _finish(self, j: SimJob) -> None:
        spent_acc_h = j.overhead_h * j.accelerators
        self.c.good_acc_h += (self.now - j.run_start_s) / 3600 * j.accelerators - spent_acc_h
        self._lose("restart", spent_acc_h)
        j.overhead_h = 0.0
        self.c.completed_acc_h += j.work_h * j.asked
        j.done_h = j.work_h
        self._release(j)
        j.state, j.finish_s = "done", self.now
        j.version += 1
        del self.active[j.id]

    def stop(self, j: SimJob, why: str) -> None:
        """Interrupt or un-place the job: work since its last checkpoint is lost; it waits again.
        `why`: fault | spot | outage (counted as faults by the caller), preempt, move, requeue."""
        if j.state not in ("starting", "running"):
            return
        j.evicted_s = None
        if j.state == "running":
            elapsed_h = (self.now - j.run_start_s) / 3600
            spent = min(elapsed_h, j.overhead_h)                   # restoring and warming up, no progress
            kept = kept_hours(j, elapsed_h)
            j.done_h = min(j.work_h, j.done_h + kept * j.options[j.option].relative_speed * self._elastic_speedup(j))
            self.c.good_acc_h += kept * j.accelerators
            self._lose("restart", spent * j.accelerators)
            self._lose(why, (elapsed_h - spent - kept) * j.accelerators)
            j.overhead_h = j.restart_h                               # the next run restores and warms up again
            j.interruptions += 1
            if why in ("fault", "spot", "outage"):
                # Kueue evicts a Workload whose pods lost their node (PodsReadyTimeout) and requeues it with
                # backoff (kueue PR #1709: 60 s doubling with `requeueState.count`, at most an hour); a preempted
                # one at once, counting nothing. Only the `kueue` policies read `requeue_at_s` and `evicted_s`.
                j.pods_ready_evictions += 1
                backoff = min(3600, 60 * 2 ** min(j.pods_ready_evictions - 1, 6))
                j.requeue_at_s = self.now + backoff
                j.evicted_s = self.now      # Kueue orders it by this time (kueue.py `queued_at`)
        if why == "preempt":
            self.c.preemptions += 1
        elif why == "move":
            self.c.migrations += 1
        self._release(j)
        j.state = "waiting"
        j.version += 1

    # --- faults ---------------------------------------------------------------------------------------------

    def _draw_faults(self) -> None:
        """Faults and reclaims in (now, now + interval], drawn from the ready units of clusters that are up."""
        f = self.faults
        window_h = self.interval_s / 3600
        ready: list[tuple[SimPool, int]] = []
        weights: list[float] = []
        spot: list[tuple[SimPool, int]] = []
        total = 0.0
        for p in self.pools.values():
            if self.clusters[p.rp.cluster].down:
                continue
            for i in sorted(p.present):
                if p.units[i].state == READY:
                    total += p.rp.unit_accelerators
                    ready.append((p, i))
                    weights.append(total)
                    if p.rp.capacity == "spot":
                        spot.append((p, i))
        if f.node_failures_per_acc_hour > 0 and ready:
            for _ in range(poisson(self.rng.random(), f.node_failures_per_acc_hour * total * window_h)):
                p, i = ready[min(len(ready) - 1, bisect_right(weights, self.rng.random() * total))]
                when = self.now + 1 + int(self.rng.random() * (self.interval_s - 1))
                self._at(when, FAULT, i, (p.key, "slice" if p.rp.shape is not None else "node"))
        if f.spot_reclaims_per_hour > 0 and spot:
            for _ in range(poisson(self.rng.random(), f.spot_reclaims_per_hour * len(spot) * window_h)):
                p, i = spot[int(self.rng.random() * len(spot))]
                when = self.now + 1 + int(self.rng.random() * (self.interval_s - 1))
                self._at(when, SPOT, i, p.key)

    def schedule_fault(self, at_s: int, pool_key: str, unit: int) -> None:
        """A node or slice fault at a chosen time (what `_draw_faults` draws at random), for tests and what-ifs."""
        p = self.pools[pool_key]
        self._at(at_s, FAULT, unit, (pool_key, "slice" if p.rp.shape is not None else "node"))

    def _interrupt_unit(self, p: SimPool, i: int, why: str) -> None:
        for jid in list(p.units[i].jobs):
            self.stop(self.by_id[jid], why)

    def _fail(self, p: SimPool, i: int, what: str) -> None:
        if p.units[i].state != READY or self.clusters[p.rp.cluster].down:
            return
        self.c.faults[what] += 1
        self._interrupt_unit(p, i, "fault")
        if not p.fixed:                     # cloud capacity: the node or slice is re-created, not repaired
            self._set(p, i, ABSENT)
            self._provision(p, i)
            return
        repair_s = int(self.faults.tpu_repair_hours * 3600 if p.rp.shape is not None
                       else self.faults.gpu_repair_minutes * 60)
        self._set(p, i, FAILED, self.now + repair_s)
        self._at(self.now + repair_s, REPAIRED, i, (p.key, p.units[i].version))

    def _reclaim(self, p: SimPool, i: int) -> None:
        if p.units[i].state != READY or self.clusters[p.rp.cluster].down:
            return
        self.c.faults["spot"] += 1
        self._interrupt_unit(p, i, "spot")
        self._set(p, i, ABSENT)

    def _outage(self, c: SimCluster, until_s: int) -> None:
        if c.down:
            return
        self.c.faults["cluster"] += 1
        for p in c.pools:
            for i in sorted(p.present):
                self._interrupt_unit(p, i, "outage")
                u = p.units[i]
                if u.state != FAILED or u.until_s < until_s:
                    self._set(p, i, FAILED, until_s)
                    self._at(until_s, REPAIRED, i, (p.key, u.version))
        c.down = True
        self._at(until_s, OUTAGE_OFF, 0, c.name)
        self.changed = True

    # --- views for policies and results ---------------------------------------------------------------------

    def waiting(self) -> list[SimJob]:
        return [j for j in self.active.values() if j.state == "waiting"]

    def running_view(self) -> dict[str, list[Running]]:
        out: dict[str, list[Running]] = {}
        for j in self.active.values():
            for g in j.groups():                # a spread service: a copy per pool it holds units in
                out.setdefault(g.pool.rp.cluster, []).append(Running(
                    j.team, j.namespace, j.id.split("/", 1)[1], g.pool.rp.name, j.value, j.state == "running",
                    j.submit_s, j.placed_s, j.run_start_s, j.interruptions, g.units))
        return out

    def observe(self) -> Snapshot:
        """The simulated fleet as `fleet observe` reads a real one (observe.model.Snapshot)."""
        return snapshot(list(self.clusters.values()), self.running_view(), self.now)

    def _sample(self) -> None:
        queued = {c: 0 for c in self.class_order}
        for j in self.active.values():
            if j.state in ("waiting", "starting"):
                queued[j.cls] += 1
        self.samples.append(Sample(self.now // 3600, queued, self.busy_acc, self.paid_acc, self.c.cost_usd,
                                   sum(self.c.faults.values())))
