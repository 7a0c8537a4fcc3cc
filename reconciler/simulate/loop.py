"""The `fleet` policy: the reconcile loop's own cycle, against the simulated clusters. Pure.

Each loop interval of simulated time, the same cycle as `fleet reconcile` (reconcile/loop.py): one call of
`reconcile.step.step` (steps 1 to 4), with the simulated fleet in place of the real one:

    1. observe   the simulated clusters as a `Snapshot` (cluster.observe), with what an earlier snapshot
                 knows carried over (`observe.model.carry_over`) and each unreachable cluster's
                 `unreachable_since` from the loop's memory
    2. load      the repository as it would be at this moment: the trace's jobs submitted and not finished
    3. plan      `pipeline.plan(head, base=last plan, observed=fenced_view(snapshot, memory), now=)`
    4. decide    `reconcile.decide.decide(plan, snapshot, memory, knobs, now, jobs=job_facts(head))`
    5. act       `reconcile.act.execute(decision, SimActuator)`; the memory settles as in the real loop

The planner and the decision are not copied: they are the modules `fleet reconcile` runs. What is the
simulation's own: the actuator (below), and that a job's work and its interruptions happen in the engine.
Simplifications, and why: every node carries its unit index (GPU nodes too; the real observe knows unit
indices only for TPU slices), so a failed GPU node is avoided by index rather than by a capacity count;
Kueue quotas are the planner's (the `kueue` action is accepted and changes nothing); an interrupted job
(fault, reclaim, outage) has no copy left in the snapshot, so the planner places it again as a new one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ..observe.model import Snapshot
from ..plan.types import Placement, Plan
from ..plan.units import interchangeable
from ..reconcile.act import Outcome, execute
from ..reconcile.decide import Action, Knobs, LoopMemory, ask_again_at, settle
from ..reconcile.step import step
from ..suggest import unit_list
from ..validate import Validated
from .cluster import ABSENT, EPOCH, FAILED, READY, SimPool, at
from .engine import Engine
from .state import Group, SimJob


class SimActuator:
    """The reconciler's five calls (reconcile/act.py `Actuator`) against the simulated clusters."""

    def __init__(self, sim: Engine, plan: Plan) -> None:
        self.sim = sim
        self.placed: dict[str, list[Placement]] = {}     # a spread service: one placement per pool it runs in
        for p in plan.placements:
            self.placed.setdefault(p.job, []).append(p)
        for job, pls in self.placed.items():     # a service's nodes named as the plan names them (`_relabel`)
            j = sim.by_id.get(job)
            if j is not None and j.pool is not None and j.job.kind == "inference":
                _relabel(sim, j, pls)

    def resize(self, cluster: str, actions: Sequence[Action]) -> Outcome:
        """Grow: provision absent units, those the plan places jobs on first (a new node of a pool serves any pod the
        kube-scheduler puts there; here a job runs on the units the plan names), then lowest index. Shrink: release
        idle units, idle longest first (ties: highest index first), as the decision counts them (units idle for its
        window). What it could not do (no absent unit left; a unit failed, holding a job, or owned or reserved)
        fails the call, naming the units and why: the loop asks again after its backoff, as it would after a failed
        stack."""
        short: list[str] = []
        for a in actions:
            p = self.sim.pools.get(f"{cluster}/{a.pool}")
            if p is None or a.target is None:
                short.append(f"no pool {cluster}/{a.pool}")
                continue
            have = sorted(p.present)
            if a.target > len(have):
                absent = self._to_provision(p)[: a.target - len(have)]
                for i in absent:
                    self.sim.provision(p, i)
                if len(have) + len(absent) < a.target:
                    short.append(f"{p.key}: provisioned {len(absent)} of {a.target - len(have)} unit(s) asked "
                                 f"(the pool has {p.rp.max} at most)")
            elif a.target < len(have):
                # the units idle longest first: the decision counts units idle for the scale-down window
                # (pools.size_pools), and those are the ones it releases, as the engine's own rule does
                idle = sorted((i for i in have if not p.units[i].jobs and p.units[i].state != FAILED
                               and i >= p.rp.min), key=lambda i: (p.units[i].idle_since_s, -i))
                for i in idle[: len(have) - a.target]:
                    self.sim.release(p, i)
                if len(p.present) > a.target:
                    kept = [_kept(p, i) for i in sorted(p.present) if not p.units[i].jobs]
                    busy = sum(1 for i in p.present if p.units[i].jobs)
                    kept += [f"{busy} unit(s) hold jobs"] if busy else []
                    short.append(f"{p.key}: released {len(have) - len(p.present)} of {len(have) - a.target} "
                                 f"unit(s) asked; not released: " + "; ".join(kept))
        return Outcome(False, ", ".join(short)) if short else Outcome(True)

    def _to_provision(self, p: SimPool) -> list[int]:
        """The pool's absent units, those the plan's placements name first (in index order), then the rest."""
        absent = [i for i in range(p.rp.max) if p.units[i].state == ABSENT]
        named = {u for pls in self.placed.values() for x in pls if x.pool_key == p.key for u in x.units}
        return [i for i in absent if i in named] + [i for i in absent if i not in named]

    def kueue(self, action: Action) -> Outcome:
        return Outcome(True)

    def stop(self, action: Action) -> Outcome:
        """Stop the job's copy where the action names it. A spread service that leaves one of its pools while
        the plan keeps it in others is placed again on the plan's groups (its groups start and stop together
        here); before, a stop naming a group outside the service's first cluster did nothing and said done,
        so the plan counted that group's quota free while it ran (a start then took the cohort over quota)."""
        j = self.sim.by_id.get(action.job or "")
        if j is None or j.pool is None:
            return Outcome(True)
        here = [g for g in j.groups() if g.pool.rp.cluster == action.from_cluster]
        if len(j.groups()) > 1 and action.from_pool:        # a spread service: the group of that pool
            here = [g for g in here if g.pool.rp.name == action.from_pool]
        if here and len(here) < len(j.groups()) and action.job in self.placed:
            return self.start(action)
        if here:
            self.sim.stop(j, "preempt" if "preempt" in action.reason else "requeue")
        return Outcome(True)

    def start(self, action: Action) -> Outcome:
        """Run the job as the plan places it: in every pool of a spread service at once (its replica groups
        start and stop together here, a simplification: a real service moves one group at a time)."""
        j = self.sim.by_id.get(action.job or "")
        pls = self.placed.get(action.job or "")
        if j is None or not pls:
            return Outcome(False, f"{action.job} is not in the plan")
        pl, rest = pls[0], pls[1:]
        extra = tuple(Group(self.sim.pools[x.pool_key], _bound(self.sim, self.sim.pools[x.pool_key], x.units,
                                                               x.accelerators_per_unit),
                            x.accelerators_per_unit, j.options[x.option].accelerator) for x in rest)
        if j.pool is not None:
            if [(g.pool.key, g.units) for g in j.groups()] == [(x.pool_key, x.units) for x in pls]:
                return Outcome(True)
            if _relabel(self.sim, j, pls):
                return Outcome(True)
            self.sim.stop(j, "move")
        pool = self.sim.pools[pl.pool_key]
        units = _bound(self.sim, pool, pl.units, pl.accelerators_per_unit)
        if not self.sim.place(j, pool, pl.option, units, pl.accelerators_per_unit, extra):
            where = "; ".join(f"units {unit_list(x.units)} of {x.pool_key}" for x in pls)
            down = sorted({x.cluster for x in pls if self.sim.clusters[x.cluster].down})
            if down:
                return Outcome(False, f"cluster {', '.join(down)} does not answer")
            return Outcome(False, f"{where}: failed or taken", refused=True)   # the cluster answers: this job waits
        return Outcome(True)

    def move(self, action: Action) -> Outcome:
        return self.start(action)


class FleetLoop:
    name = "fleet"

    def __init__(self, sim: Engine) -> None:
        sim.autoscale = False                   # pools change by the loop's resizes (queued: grants, `_scale_down`)
        self.memory = LoopMemory()
        self.last_plan: Plan | None = None
        self.last_snapshot: Snapshot | None = None
        self.knobs = replace(Knobs.of(sim.v.loaded.placement), interval_seconds=sim.interval_s)   # its own interval
        self.cycles = 0
        self.due_s = 0

    def step(self, sim: Engine, now_s: int) -> None:
        """One cycle, unless nothing happened since the last, the last did nothing, and no clock of the loop runs
        out before now: then the plan and the decision would be the same as last time, all of it already done. A
        cycle that acted is followed by the next (`fleet reconcile` runs every interval): what it did is what
        the next one reads (jobs it started run first in the Kueue quota split, an elastic gang grows once it
        runs). Before the forty-second session the simulator skipped that cycle where nothing else happened, and
        what it would have done waited for the next event (5 to 60 minutes on a sparse trace; review finding)."""
        if not sim.changed and now_s < self.due_s:
            return
        now = at(now_s)
        thought = step(_head(sim), sim.observe(), self.memory, last_snapshot=self.last_snapshot,          # 1.-4.
                       last_plan=self.last_plan, knobs=self.knobs, now=now)
        snapshot, planned, decision = thought.snapshot, thought.plan, thought.decision
        results = execute(decision, SimActuator(sim, planned))                                            # 5.
        undone = [r.action for r in results if r.status != "done"]
        refused = [(r.action, r.message) for r in results if r.status == "failed" and r.action.kind == "resize"]
        self.memory = settle(self.memory, decision.memory, undone, refused=refused)
        self.last_plan = planned
        self.last_snapshot = snapshot
        self.cycles += 1
        sim.changed = False
        asked_later = {a for a, _ in refused}                 # a refused resize is asked when its backoff ends
        again = [a for a in undone if a not in asked_later]
        acted = any(r.status == "done" for r in results)  # what it did (a start, a quota, a size) the next cycle
        busy = acted or again or decision.progress or decision.deferred   # reads; deferred: a victim at its checkpoint
        self.due_s = now_s + sim.interval_s if busy else self._due(sim, now_s)

    def _due(self, sim: Engine, now_s: int) -> int:
        """When a clock of the loop next runs out: an idle unit's scale-down, a failed node's grace time, an
        unreachable cluster's time to count as lost, a pool size asked and not shown yet to be asked again
        (the cycles in between would decide nothing new)."""
        k = self.knobs
        times = [int((t - EPOCH).total_seconds() + k.scale_down_after_minutes * 60)
                 for t in self.memory.idle_since.values()]
        for key, asked in self.memory.targets.items():
            p = sim.pools.get(key)
            if p is not None and len(p.present) != asked.units:     # else the next cycle finds it done
                due = ask_again_at(asked, k, grow=asked.units > len(p.present))
                times.append(now_s + 1 if due is None else max(now_s + 1, math.ceil((due - EPOCH).total_seconds())))
        times += [int((t - EPOCH).total_seconds() + k.cluster_lost_after_minutes * 60)
                  for t in self.memory.unreachable_since.values()]
        times += [u.since_s + int(k.node_failed_after_minutes * 60)
                  for p in sim.pools.values() for i in p.present if (u := p.units[i]).state == FAILED]
        return min((t for t in times if t > now_s), default=1 << 62)


def _bound(sim: Engine, p: SimPool, units: tuple[int, ...], per_unit: int) -> tuple[int, ...]:
    """The units a job's pods are bound to in `p`: on a pool of interchangeable nodes (`units.interchangeable`:
    GPU and Trainium node groups), the kube-scheduler binds each pod to any node of the pool with room (the
    render selects the pool's nodes, never one node: render/pods.py), and the plan's unit numbers are its
    bookkeeping (`summary.node_numbers` renumbers the used ones), so a node the plan names that has no room for
    the pod is another node with room, as `Engine.free_units` picks them. Before, the start failed ("failed or
    taken"), and with it every later action on the cluster that cycle (reconcile/act.py), cycle after cycle
    while the plan's numbers and the simulated nodes disagreed: on seed 3 of the generated benchmark, a
    service's start failed for 15 hours from hour 384.7 and held back every start on two clusters. A TPU
    slice is a place: its index stays, and a taken slice still fails the start."""
    if not interchangeable(p.rp):
        return units
    cap, taken = p.rp.unit_accelerators, dict.fromkeys(units, 0)
    out: list[int] = []
    for i in units:               # a node the plan names keeps the pod where it has room (the plan's place)
        u = p.units[i]
        if u.state != FAILED and u.used + taken[i] + per_unit <= cap:
            taken[i] += per_unit
            out.append(i)
    if len(out) == len(units):
        return units
    spare = sim.free_units(p, p.rp.max, per_unit, best_first=True) or ()
    out += [i for i in spare if i not in taken][: len(units) - len(out)]
    return tuple(sorted(out)) if len(out) == len(units) else units


def _relabel(sim: Engine, j: SimJob, pls: list[Placement]) -> bool:
    """A spread service the plan keeps in the same GPU pools with as many nodes, on other node indices: GPU
    nodes of a pool are interchangeable (the real observe counts them and knows no index; only the simulation
    numbers them, and the plan knows a spread service's other groups by the base plan's indices), so the nodes
    are renamed, not the service moved: each of its nodes trades what it holds with the ready node the plan
    names (a job on that one takes the service's old index). Anything else (a TPU slice, another pool or
    size, a node not ready, replicas that share a node on either side) is a move."""
    have = [(g.pool, g.units) for g in j.groups()]
    if j.job.kind != "inference" or [(q.key, len(us)) for q, us in have] != [(x.pool_key, len(x.units)) for x in pls]:
        return False
    if any(len(set(us)) != len(us) for _, us in have) or any(len(set(x.units)) != len(x.units) for x in pls):
        return False        # nodes shared by replicas: no one node to trade for one
    pairs = [(q, a, b) for (q, us), x in zip(have, pls, strict=True)
             for a, b in zip(sorted(set(us) - set(x.units)), sorted(set(x.units) - set(us)), strict=True)]
    if any(q.rp.shape is not None or q.units[a].state != READY or q.units[b].state != READY for q, a, b in pairs):
        return False
    for q, a, b in pairs:
        ua, ub = q.units[a], q.units[b]
        ua.used, ub.used, ua.jobs, ub.jobs = ub.used, ua.used, ub.jobs, ua.jobs
        ua.idle_since_s, ub.idle_since_s = ub.idle_since_s, ua.idle_since_s
        for jid in set(ua.jobs) | set(ub.jobs):
            o = sim.by_id[jid]
            swap = {a: b, b: a}
            o.units = tuple(sorted(swap.get(i, i) for i in o.units)) if o.pool is q else o.units
            o.extra = tuple(g._replace(units=tuple(sorted(swap.get(i, i) for i in g.units))) if g.pool is q else g
                            for g in o.extra)
    return [(g.pool.key, g.units) for g in j.groups()] == [(x.pool_key, x.units) for x in pls]


def _kept(p: SimPool, i: int) -> str:
    """Why idle unit `i` of `p` could not be released."""
    u = p.units[i]
    if u.state == FAILED:
        return f"unit {i} is failed (repaired at hour {u.until_s / 3600:g}), so it cannot be released"
    return f"unit {i} is owned or reserved (the pool's min is {p.rp.min})"


def _head(sim: Engine) -> Validated:
    """The repository at this moment: its fleet and policies, and the jobs submitted and not finished."""
    v = sim.v
    active = sorted(sim.active)
    loaded = replace(v.loaded, jobs=tuple(sim.by_id[i].job for i in active))
    return replace(v, loaded=loaded, options={i: v.options[i] for i in active if i in v.options})
