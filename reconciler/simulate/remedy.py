"""Whether preempting a waiting job's own team's lower-class work could start it now: the condition under which
the priority row (rules.py `inverted`) counts the quota that work holds. Pure: reads the engine's state.

The row measures the rule `within_team: lower_priority` states: a team's waiting job preempts its own
lower-class preemptible work when that gives it what it lacks. Quota alone is not enough to start a job. Until
2026-12-06 (twenty-eighth session) the row asked nothing of room or budget, and it counted waits that no
preemption the rules allow could have ended:
- a 512-chip production job whose team's budget pace could not pay for it, even with all the team's lower work
  stopped (generated seed 1, 19,875 of `fleet`'s 73,308 accelerator-hours);
- a production job of a whole 8-GPU node whose pools' nodes all held other teams' work, which its team may not
  preempt (Alibaba seed 1, 186 of `fleet`'s 360).

So now an option counts only where, once the team's lower-class preemptible work is gone (every pool, and its
spend), some pool the job can use (`Engine.can_use`, in a cluster that is up) has the units for its gang (free,
freed or still to provision: `room_without`) and the team's budget pays for the job there (the hourly check the
baselines admit by, `Watch.fits`). The same condition for every policy.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

from ..resolve import ResolvedOption, ResolvedPool
from .cluster import SimCluster, SimPool, room_without
from .rules import Watch, hourly_usd
from .state import SimJob


class Sim(Protocol):
    """What `Remedy` reads of the engine (engine.py; named here, so the engine can import this module)."""

    active: dict[str, SimJob]
    watch: Watch
    clusters: dict[str, SimCluster]

    def can_use(self, j: SimJob, opt: ResolvedOption, p: SimPool) -> bool: ...

    def gang(self, opt: ResolvedOption, rp: ResolvedPool, replicas: int) -> tuple[int, int]: ...


class Remedy:
    """`could(j, opt)` (module docstring), for one measurement of the row: the engine's state does not change
    while it is asked, so each team's preemptible placed work is found once."""

    def __init__(self, sim: Sim) -> None:
        self.sim = sim
        self._work: dict[str, list[SimJob]] | None = None

    def _lower(self, j: SimJob) -> list[SimJob]:
        if self._work is None:
            self._work = defaultdict(list)
            for v in self.sim.active.values():
                if v.preemptible and v.pool is not None and v.state in ("starting", "running"):
                    self._work[v.team].append(v)
        return [v for v in self._work.get(j.team, ()) if v.value < j.value]

    def could(self, j: SimJob, opt: ResolvedOption) -> bool:
        sim, watch = self.sim, self.sim.watch
        lower = self._lower(j)
        freed_usd = sum(hourly_usd(g.pool, g.per_unit, len(g.units)) for v in lower for g in v.groups())
        room_usd = watch.budget.get(j.team, float("inf")) - watch.spend[j.team] + freed_usd
        for c in sorted(sim.clusters):
            if sim.clusters[c].down:
                continue
            for p in sim.clusters[c].pools:
                if not sim.can_use(j, opt, p):
                    continue
                n, per = sim.gang(opt, p.rp, j.replicas)
                if hourly_usd(p, per, n) <= room_usd and room_without(p, _on(p, lower), n, per):
                    return True
        return False


def _on(p: SimPool, jobs: list[SimJob]) -> list[tuple[tuple[int, ...], int]]:
    """The units and accelerators per unit that `jobs` hold on `p` (a spread service's groups too)."""
    return [(g.units, g.per_unit) for v in jobs for g in v.groups() if g.pool is p]
