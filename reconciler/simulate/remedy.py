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

So now an option counts only where, once the team's lower-class preemptible work is gone, some pool the job can
use (`Engine.can_use`, in a cluster that is up) has the units for its gang (free, freed or still to provision:
`room_without`) and the team's budget pays for the job there (the hourly check the baselines admit by,
`Watch.fits`). The same condition for every policy.

The budget is reckoned with the spend freed of only the lower work the rules would stop for the job on that
pool: work on the pool (it frees room) or charged to the job's accelerator quota (it frees quota). No rule stops
running work to free budget (issue 22: a budget blocks new starts and never evicts; docs/concepts.md), so the
spend of the team's lower work elsewhere, on another accelerator, is not the job's to take. Until 2026-12-06
(twenty-ninth session) every lower job's spend counted: `serving/pretrain-02262` (512 v5p chips, generated seed
1) was counted for hours in which stopping the team's v5p work freed the quota it lacked but its budget still
needed the spend of the team's work on other accelerators (bench/why_not_preempted.py).
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
        acc = watch.ledger.charged(j.team, opt.accelerator, j.spot)
        quota_usd, here_usd = 0.0, defaultdict[int, float](float)    # freed for quota; by pool (id) for room
        for v in lower:
            for g in v.groups():
                usd = hourly_usd(g.pool, g.per_unit, len(g.units))
                if watch.ledger.charged(v.team, g.accelerator, v.spot) == acc:
                    quota_usd += usd
                else:
                    here_usd[id(g.pool)] += usd
        left_usd = watch.budget.get(j.team, float("inf")) - watch.spend[j.team] + quota_usd
        for c in sorted(sim.clusters):
            if sim.clusters[c].down:
                continue
            for p in sim.clusters[c].pools:
                if not sim.can_use(j, opt, p):
                    continue
                n, per = sim.gang(opt, p.rp, j.replicas)
                if hourly_usd(p, per, n) <= left_usd + here_usd[id(p)] and room_without(p, _on(p, lower), n, per):
                    return True
        return False


def _on(p: SimPool, jobs: list[SimJob]) -> list[tuple[tuple[int, ...], int]]:
    """The units and accelerators per unit that `jobs` hold on `p` (a spread service's groups too)."""
    return [(g.units, g.per_unit) for v in jobs for g in v.groups() if g.pool is p]
