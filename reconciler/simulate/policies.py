"""The policies `fleet simulate` compares, all on the same engine, trace and faults. Pure.

- `fleet`: the reconcile loop itself, observe, plan, decide, act (loop.py, which says what it simplifies).

The baselines obey the rules Fleet obeys (rules.py): `fifo` and `cheapest` admit a job only where its team's
quota (with cohort borrowing, the planner's ledger) and budget (the planner's hourly check) have room, and
take jobs by priority class, then arrival; neither preempts. `violations` in the results shows what any
policy broke (kueue.py has no budgets, so its budget hours are what Kueue alone would overspend).

- `fifo`: a strict FIFO queue per team (Kueue's StrictFIFO): first fit over the fleet's pools in file
  order; a team's queue stops at its first job that does not fit (head-of-line blocking), other teams go on.
- `kueue`, `kueue-multikueue`: kueue.py.
- `cheapest`: what a cloud broker gives: each job to the cheapest pool with room now over every option
  (dollars per unit of work: unit price x units / relative speed), relaunched in another region after a
  failure when one has room; a job that does not fit does not block the others. No fairness or preemption.
"""

from __future__ import annotations

from .cluster import SimPool
from .engine import Engine
from .kueue import Kueue
from .loop import FleetLoop
from .rules import hourly_usd
from .state import SimJob

POLICIES = ("fleet", "fifo", "kueue", "kueue-multikueue", "cheapest")


def _order(sim: Engine) -> list[SimJob]:
    """The waiting jobs by priority (highest first), then arrival."""
    return sorted(sim.waiting(), key=lambda j: (-j.value, j.submit_s, j.id))


def _try(sim: Engine, j: SimJob, candidates: list[tuple[int, SimPool]]) -> bool:
    """Place the job at the first candidate its team's quota and budget allow (rules.Watch.fits) and whose
    pool has the units."""
    for o, p in candidates:
        opt = j.options[o]
        n, per = sim.gang(opt, p.rp, j.replicas)
        if not sim.watch.fits(j.team, opt.accelerator, n * per, hourly_usd(p, per, n), j.spot):
            continue
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
        blocked: set[str] = set()
        for j in _order(sim):
            if j.team not in blocked and not _try(sim, j, _usable(sim, j, self.order)):
                blocked.add(j.team)


class Cheapest:
    name = "cheapest"

    def step(self, sim: Engine, now_s: int) -> None:
        if _idle(sim):
            return
        pools = list(sim.pools.values())
        for j in _order(sim):
            def key(c: tuple[int, SimPool], j: SimJob = j) -> tuple[bool, float, str, int]:
                o, p = c
                n, _ = sim.gang(j.options[o], p.rp, j.replicas)
                moved = j.interruptions > 0 and sim.clusters[p.rp.cluster].region == j.last_region
                return (moved, p.unit_hourly_usd * n / j.options[o].relative_speed, p.key, o)
            _try(sim, j, sorted(_usable(sim, j, pools), key=key))


def make(name: str, sim: Engine) -> Fifo | Cheapest | Kueue | FleetLoop:
    if name == "fifo":
        return Fifo(sim)
    if name == "cheapest":
        return Cheapest()
    if name in ("kueue", "kueue-multikueue"):
        return Kueue(sim, multi=name == "kueue-multikueue")
    return FleetLoop(sim)
