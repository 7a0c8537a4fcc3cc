"""Step 4 of the reconcile decision (`decide.py`): pool sizes, with hysteresis, re-asserted until observed. Pure.

A pool whose plan target exceeds its observed units grows at once; a unit no planned job occupies and no copy runs
on (`occupied`) is idle from the first cycle it is seen idle, and the pool shrinks only by units idle for
`scale_down_after_minutes`. A resize is done when the observed pool has the size, not when it was asked: the size
asked is remembered (`LoopMemory.targets`) and asked again after a backoff (`ask_again_at`) while the pool shows
another size. A `provisioning: queued` pool is never resized: its nodes are granted per admitted workload through
Kueue's ProvisioningRequest and removed by GKE's autoscaler (its stack spec has no node count to set; a resize
would re-run the stack for nothing and, asked again and again, never see its size). `decide.py`'s module docstring
states the rules in full.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime, timedelta

from ..observe.model import ClusterObservation, Snapshot
from ..observe.occupancy import pod_units
from ..plan.types import Placement, Plan, PoolPlan
from .model import Action, Asked, Decision, Knobs, LoopMemory


def observed_units(c: ClusterObservation) -> dict[str, set[int]]:
    """pool -> the units its nodes show: a TPU slice's index, else one unit per node (numbered 0..n-1, as the
    plan numbers a GPU pool's interchangeable nodes)."""
    slices: dict[str, set[int]] = {}
    nodes: dict[str, int] = {}
    for n in c.nodes:
        if n.pool is None:
            continue
        if n.unit is not None:
            slices.setdefault(n.pool, set()).add(n.unit)
        else:
            nodes[n.pool] = nodes.get(n.pool, 0) + 1
    out = {p: set(range(k)) for p, k in nodes.items()}
    for p, s in slices.items():
        out[p] = out.get(p, set()) | s
    return out


def size_pools(plan: Plan, snapshot: Snapshot, mem: LoopMemory, knobs: Knobs, reachable: set[str],
               now: datetime, held: Collection[str] = ()) -> tuple[list[Action], dict[str, datetime], dict[str, Asked]]:
    """Rule 4 of decide.py. `held`: placed jobs the loop does not start this cycle (finished.maybe_finished): a
    pool grows for none of them (before, it grew for a job that then waited)."""
    hold = frozenset(held)
    used: dict[tuple[str, str], set[int]] = {}
    placed: dict[tuple[str, str], list[Placement]] = {}
    for p in plan.placements:
        used.setdefault((p.cluster, p.pool), set()).update(p.units)
        placed.setdefault((p.cluster, p.pool), []).append(p)
    seen = {c.name: observed_units(c) for c in snapshot.clusters if c.name in reachable}
    for c in snapshot.clusters:                 # units a copy still runs on are not idle, planned or not
        if c.name in seen:
            for pool, units in occupied(c).items():
                used.setdefault((c.name, pool), set()).update(units)
    idle: dict[str, datetime] = {}
    # what was asked of a cluster not read now is kept; a read cluster's pools are decided again below
    targets = {k: t for k, t in mem.targets.items() if k.split("/", 1)[0] not in seen}
    actions: list[Action] = []
    budget = max(0, knobs.max_released_units_per_cycle)
    window_s = knobs.scale_down_after_minutes * 60
    for pp in sorted(plan.pools, key=lambda x: (x.cluster, x.pool)):
        if pp.cluster not in seen or pp.provisioning == "queued":     # queued: granted, never sized (above)
            continue
        units = seen[pp.cluster].get(pp.pool, set())
        busy = used.get((pp.cluster, pp.pool), set())
        free = sorted(units - busy)
        for u in free:
            key = f"{pp.cluster}/{pp.pool}/{u}"
            idle[key] = mem.idle_since.get(key, now)
        current = len(units)
        key = f"{pp.cluster}/{pp.pool}"
        release = 0
        if pp.target > current:                   # grow at once, for the jobs placed on units it lacks
            want = pp.target
            here = placed.get((pp.cluster, pp.pool), [])
            lacking = {p.job for p in here if not set(p.units) <= units}
            if lacking & hold:                    # not for jobs held back: only as far as the others need
                want = max([current, pp.min, *(max(p.units) + 1 for p in here if p.units and p.job not in hold)])
                if want <= current:
                    continue
            jobs = sorted(lacking - hold)
            why = f"{want - current} more unit(s) for " + (
                ", ".join(jobs[:5]) + (f" and {len(jobs) - 5} more" if len(jobs) > 5 else "") if jobs
                else f"the pool's planned size ({pp.target}, min {pp.min})")
        else:                                     # shrink by units idle for the whole window
            ripe = [u for u in free if (now - idle[f"{pp.cluster}/{pp.pool}/{u}"]).total_seconds() >= window_s]
            release = min(len(ripe), current - pp.target, budget)
            if release <= 0:
                continue                          # nothing to change: nothing stays asked
            want = current - release
            first = min(idle[f"{pp.cluster}/{pp.pool}/{u}"] for u in ripe)
            why = (f"{release} unit(s) idle since {first.isoformat()} (at least {knobs.scale_down_after_minutes:g} "
                   f"min; idle: unit(s) {_units(ripe)})")
        asked = mem.targets.get(key)
        if asked is not None and asked.units == want:      # asked before, and the pool does not show it yet
            due = ask_again_at(asked, knobs, grow=want > current)
            if due is not None and now < due:
                targets[key] = asked              # its nodes may still be coming: not asked again before `due`
                continue
            when = f"at {asked.first.isoformat()}" if asked.first else "in an earlier cycle"
            failed = f" (the last attempt failed: {asked.failed})" if asked.failed else ""
            why = (f"asked for {want} unit(s) {when}, the pool still has {current}{failed}: asking again "
                   f"(attempt {asked.attempts + 1}); {why}")
            targets[key] = Asked(units=want, first=asked.first or now, last=now, attempts=asked.attempts + 1)
        else:
            targets[key] = Asked(units=want, first=now, last=now)
        budget -= release
        actions.append(_resize(pp, current, want, why))
    return actions, idle, targets


def occupied(c: ClusterObservation) -> dict[str, set[int]]:
    """pool -> the units Fleet's workloads occupy now on the cluster: where their pods run (observe/occupancy.py),
    and the units a JobSet that is neither suspended nor finished was given (`fleet.dev/units`). A copy the plan
    no longer places (a victim stopping at its checkpoint, a running job left pending) still holds its units:
    their idle time starts when it leaves, not when the plan stopped placing it."""
    out: dict[str, set[int]] = {}
    for (_, pool), units in pod_units(c).items():
        out.setdefault(pool, set()).update(units)
    for js in c.jobsets:
        if js.pool is not None and js.units and not js.suspended and js.terminal_state is None:
            out.setdefault(js.pool, set()).update(js.units)
    return out


def _units(units: list[int]) -> str:
    return ", ".join(map(str, units[:8])) + (f" and {len(units) - 8} more" if len(units) > 8 else "")


RETRY_CAP_MINUTES = 30.0
"""The longest wait before a pool size asked for and not observed is asked again."""


NODES_COME_MINUTES = 15.0
"""How long new nodes may take to join before a grow reported done is asked again: a TPU slice joins in about
15 minutes, a GPU node in about 10 (the simulator's assumed `PROVISION_MINUTES`). Asking sooner would re-run
every growing pool's stack while its nodes boot, changing nothing."""


def ask_again_at(asked: Asked, knobs: Knobs, *, grow: bool = False) -> datetime | None:
    """When a size asked for, and not yet observed, is asked again: one loop interval after the first ask (for
    a grow the actuator reported done, `NODES_COME_MINUTES`: its nodes are booting), then twice as long after
    each further one, at most `RETRY_CAP_MINUTES` (None: at once; an older memory file kept no time). Asking
    again for the size a stack already has changes nothing; it re-sends what a failed stack, a failed slice or
    a change lost on the way dropped."""
    if asked.last is None:
        return None
    first = max(knobs.interval_seconds, 1.0, NODES_COME_MINUTES * 60 if grow and not asked.failed else 0.0)
    wait = min(first * 2.0 ** min(asked.attempts - 1, 30), RETRY_CAP_MINUTES * 60)
    return asked.last + timedelta(seconds=wait)


def _resize(pp: PoolPlan, current: int, target: int, why: str) -> Action:
    return Action(kind="resize", cluster=pp.cluster, pool=pp.pool, current=current, target=target, reason=why)


def pool_targets(plan: Plan, decision: Decision, snapshot: Snapshot) -> Plan:
    """The plan with each pool's target as this decision leaves it: grown where it grows, a size asked in an
    earlier cycle and not yet observed kept asked, and idle units not yet released kept (the stack specs are
    rendered from this, so hysteresis holds there too, and another pool's resize never undoes a pending one),
    less the placements of jobs held back (`Decision.held`: no slice is made for them)."""
    decided = {(a.cluster, a.pool): a.target for a in decision.actions if a.kind == "resize"}
    seen = {c.name: observed_units(c) for c in snapshot.clusters if c.status != "unreachable"}
    pending = decision.memory.targets
    pools = []
    for pp in plan.pools:
        have = len(seen.get(pp.cluster, {}).get(pp.pool, set()))
        target = decided.get((pp.cluster, pp.pool))
        asked = pending.get(f"{pp.cluster}/{pp.pool}")
        if target is None and asked is not None and pp.cluster in seen:
            target = asked.units
        if target is None:   # kept as it is (max(target, have) = have: a growth is always decided, unless held)
            target = have if pp.cluster in seen else pp.target
        pools.append(replace(pp, target=target, hourly_usd=pp.unit_hourly_usd * target))
    held = set(decision.held)
    placements = tuple(p for p in plan.placements if p.job not in held) if held else plan.placements
    return replace(plan, pools=tuple(pools), placements=placements)


