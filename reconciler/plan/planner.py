"""Stage 4, plan: where every job runs, what waits and why, what is preempted, how many units each pool
needs. Deterministic and pure: `plan(validated, base)` reads nothing else and returns a frozen `Plan`.

The algorithm is a priority-ordered greedy with explicit tie-breaks (Kueue's admission order, made global):

1. Index the pools (state per pool, units 0..min-1 already open) and the jobs' resolved options.
2. Stickiness: every job placed in the `base` plan keeps its exact units if its cluster is still active or
   cordoned and its pool and option still stand. Jobs in draining clusters try to move (at most
   `max_migrations_per_plan`); those that stay carry a quantified `reason` on their `kept` placement (what
   blocks every option elsewhere, or the migration limit). Jobs in down clusters, or whose pool or option
   changed, must move.
3. Order the rest: priority classes from high to low; within a class, teams by weighted dominant share
   (DRF over accelerator types, recomputed after every placement), each team's jobs by id.
4. For each class, pass A places jobs within their team's nominal quota, pass B lets the rest borrow in
   the cohort: nominal quota is guaranteed before anyone borrows it (Kueue's reclaim, without churn).
   A job takes the best candidate over its options and the pools that can hold it, by the key
   (outside data_region, new spend per unit of work, capacity preference, attributed $ per unit of work,
   option index, cluster/pool): cheapest useful work first, already-paid capacity first.
5. A job that still does not fit may preempt lower-priority kept work (`preempt.py`).
6. One more pass over pending jobs (capacity freed by preemption), then scale pools to what is used.
7. Per-cluster quotas, cost.
8. On small and medium fleets, the improvement phase (improve.py) runs the steps again under other orders
   (`Strategy`: largest first, first-fit decreasing, a re-pack of the best plan's jobs), moves placed jobs
   to make room for pending ones or to close capacity, and keeps the best plan by work per priority class
   (highest first), then capacity cost; this run wins ties.

Reclaim within the cohort, decided: the plan does not reclaim lent nominal quota from work it places itself.
Higher classes are placed first and may borrow what a lending team lends, even when that team's lower-class
jobs would need it within their nominal; those jobs then wait with the exact reason ("N of team T's nominal
A quota are lent to cohort-mates (U borrows M); reclaiming them needs preemption", `quota.why_short`).
Reclaiming at plan time as Kueue would under `reclaim_within_cohort: any` (all nominal work before any
borrowing) trades higher-class work for lower-class work, against the objective the improvement phase, the
exact mode (exact.py) and bench/bench_quality.py all share (work per class, highest first); doing it right
means changing all three together, not the greedy alone. Kept (running) borrowers are reclaimed by
preemption (step 5) as the policy allows.

Speed: candidates per option signature are computed once; a gang that found no room is remembered until
something is evicted; the search over candidates stops at the first pool over the team's budget, and once a
pool fits by opening units it visits only pools with free room on opened units (`best`).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass

from ..gcpause import paused_gc
from ..models import Job, PriorityClass
from ..resolve import ResolvedOption, gang_fit, residency_fit, spot_policy
from ..validate import Validated
from .capacity import Gang, PoolState, gang_for
from .quota import QuotaLedger
from .reasons import pending_reasons
from .summary import summarize
from .types import HOURS_PER_MONTH, Placement, Plan, Preemption

Cand = tuple[PoolState, Gang, float, int]   # pool, gang, price per accelerator, units per replica (>= 1)
Choice = tuple[PoolState, ResolvedOption, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Strategy:
    """How one run orders the queue and picks a pool (improve.py tries several and keeps the best plan).

    `order`: within a priority class, "fair" (teams in weighted-DRF order, each team's jobs largest first)
    or "size" (all jobs largest first, ties by id). `nominal_first`: pass A within nominal quota, then pass B
    borrowing (else one pass). `first_fit`: each job takes the first option, then the first pool in the
    static candidate order, then the lowest-index units with room (first-fit decreasing), instead of the
    best key. `lead`: jobs placed before everything else, largest first, whatever their class (to re-pack
    a set of jobs known to fit together); the rest follow class by class."""

    name: str = "fair"
    order: str = "fair"
    nominal_first: bool = True
    first_fit: bool = False
    lead: tuple[str, ...] = ()


FAIR = Strategy()


@dataclass(slots=True)
class JobInfo:
    job: Job
    id: str
    team: str
    priority: int
    preemptible: bool
    spot: str
    options: tuple[ResolvedOption, ...]


@dataclass(slots=True)
class Live:
    """A placement while planning (mutable until the plan is frozen)."""

    info: JobInfo
    pool: PoolState
    option: ResolvedOption
    gang: Gang
    units: tuple[int, ...]
    hourly_usd: float
    kept: bool
    reason: str = ""


class Planner:
    def __init__(self, v: Validated, base: Plan | None, strategy: Strategy = FAIR) -> None:
        loaded = v.loaded
        assert loaded.teams is not None and loaded.priorities is not None and loaded.placement is not None
        self.v = v
        self.base = base
        self.strategy = strategy
        self.placement_doc = loaded.placement
        self.prio = loaded.priorities
        self.classes: dict[str, PriorityClass] = {c.name: c for c in self.prio.classes}
        self.teams = {t.name: t for t in loaded.teams.teams}
        self.quota = QuotaLedger(loaded.teams)
        # 1. pools and jobs
        # pools per accelerator with free accelerators on opened units, kept up to date by PoolState
        self.roomy: dict[str, set[PoolState]] = defaultdict(set)
        self.pools = {p.key: PoolState(p, v.unit_prices[p.key].hourly_usd, self.roomy[p.accelerator])
                      for p in v.pools if p.key in v.unit_prices}
        self.pref: dict[str, int] = {c: i for i, c in enumerate(self.placement_doc.capacity_preference)}
        self.jobs: dict[str, JobInfo] = {}
        for job in loaded.jobs:
            if job.id not in v.options or job.team not in self.teams:
                continue
            cls = self.classes[job.priority or self.prio.default]
            self.jobs[job.id] = JobInfo(job, job.id, job.team, cls.value, cls.preemptible,
                                        spot_policy(job, cls.spot), v.options[job.id])
        self.live: dict[str, Live] = {}
        self.forced: dict[str, str] = {}     # jobs of the base that had to move, and why (set by run)
        self.reach: dict[str, dict[str, PoolState]] = {}   # improve.py's cache: a job's candidate pools
        self.preemptions: list[Preemption] = []
        self.failed: dict[str, list[str]] = {}
        self.moved_reason: dict[str, str] = {}
        self.stay_reason: dict[str, str] = {}  # kept jobs of draining clusters: why they stay (sticky.py)
        self.team_hourly: dict[str, float] = defaultdict(float)
        self.capacity_total: dict[str, int] = defaultdict(int)
        for ps in self.pools.values():
            if ps.pool.status == "active":
                self.capacity_total[ps.pool.accelerator] += ps.pool.max * ps.pool.unit_accelerators
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self._shares: dict[str, float] = {}
        self._candidates: dict[tuple[object, ...], list[PoolState]] = {}
        # Gangs that found no room in any candidate pool. Capacity only shrinks while jobs are placed, so the
        # answer holds until something is evicted (which clears it): pending jobs cost O(1) to re-check.
        self.no_room: set[tuple[object, ...]] = set()
        self.kept_by_pool: dict[str, set[str]] = defaultdict(set)
        self._gangs: dict[tuple[int, int], Gang] = {}
        self._live_cands: dict[tuple[object, ...], tuple[list[Cand], dict[PoolState, int]]] = {}

    # -- helpers -------------------------------------------------------------------------------------------

    def candidates(self, info: JobInfo, opt: ResolvedOption) -> list[PoolState]:
        """Pools in active clusters that could hold one gang at max, best static key first."""
        region = info.job.data_region
        sig = (opt.accelerator, opt.shape, opt.slices, opt.count, opt.cpus, opt.memory_gib, info.spot, region,
               info.job.data_residency)
        found = self._candidates.get(sig)
        if found is None:
            fits = [ps for ps in self.pools.values()
                    if ps.pool.status == "active" and gang_fit(opt, ps.pool, info.spot) is None
                    and residency_fit(info.job, ps.pool) is None]
            fits.sort(key=lambda ps: (region is not None and ps.pool.region != region,
                                      ps.unit_hourly_usd / ps.pool.unit_accelerators,
                                      self.pref.get(ps.pool.capacity, 99), ps.pool.key))
            self._candidates[sig] = found = fits
        return found

    def attributed(self, ps: PoolState, gang: Gang, units: tuple[int, ...]) -> float:
        return ps.unit_hourly_usd * gang.accelerators / ps.pool.unit_accelerators * len(units)

    def budget_left(self, team: str) -> float:
        budget = self.teams[team].budget_monthly_usd
        return float("inf") if budget is None else budget / HOURS_PER_MONTH - self.team_hourly[team]

    def commit(self, info: JobInfo, ps: PoolState, opt: ResolvedOption, units: tuple[int, ...], *,
               kept: bool, reason: str = "") -> None:
        gang = gang_for(opt, ps.pool)
        hourly = self.attributed(ps, gang, units)
        self.live[info.id] = Live(info, ps, opt, gang, units, hourly, kept, reason)
        amount = opt.count * info.job.replicas
        self.quota.add(info.team, opt.accelerator, amount)
        self.usage[info.team][opt.accelerator] += amount
        self._shares.pop(info.team, None)
        self.team_hourly[info.team] += hourly
        self.failed.pop(info.id, None)
        if kept:
            self.kept_by_pool[ps.pool.key].add(info.id)

    def evict(self, job_id: str) -> Live:
        lv = self.live.pop(job_id)
        lv.pool.release(lv.units, lv.gang)
        amount = lv.option.count * lv.info.job.replicas
        self.quota.remove(lv.info.team, lv.option.accelerator, amount)
        self.usage[lv.info.team][lv.option.accelerator] -= amount
        self._shares.pop(lv.info.team, None)
        self.kept_by_pool[lv.pool.pool.key].discard(job_id)
        self.no_room.clear()
        self._live_cands.clear()
        self.team_hourly[lv.info.team] -= lv.hourly_usd
        return lv

    def share(self, team: str) -> float:
        """Weighted dominant share: the largest fraction of any accelerator type the team holds / weight
        (cached until the team's usage changes)."""
        found = self._shares.get(team)
        if found is None:
            dominant = max((used / self.capacity_total[acc] for acc, used in self.usage[team].items()
                            if self.capacity_total.get(acc)), default=0.0)
            found = self._shares[team] = dominant / self.teams[team].weight
        return found

    # -- 4. placing one job ----------------------------------------------------------------------------------

    def room_key(self, info: JobInfo, opt: ResolvedOption) -> tuple[object, ...]:
        return (opt.accelerator, opt.shape, opt.slices, opt.count, opt.cpus, opt.memory_gib, info.spot,
                info.job.data_region, info.job.data_residency, info.job.replicas)

    def best(self, info: JobInfo, *, allow_borrow: bool) -> tuple[PoolState, ResolvedOption, tuple[int, ...]] | None:
        """The best (pool, option, units) for the job now, by the key in the module docstring.

        Candidates come in static order (locality, list price per accelerator, preference). The attributed
        cost of a pool (price per accelerator x accelerators taken) is known before `find` and rises along
        that order (within the data region, then outside it); it is also the least new spend the pool could
        cost. So the first pool over the team's budget ends the search, and once one pool fits by opening
        units, a later pool whose cost is no lower can only win by fitting without opening any: the search
        then visits only the pools of `roomy` (opened units with free accelerators), in the same order."""
        if self.strategy.first_fit:
            return self.first_fit(info, allow_borrow=allow_borrow)
        best_key: tuple[object, ...] | None = None
        best: tuple[PoolState, ResolvedOption, tuple[int, ...]] | None = None
        replicas = info.job.replicas
        region = info.job.data_region
        for opt in info.options:
            amount = opt.count * replicas
            if self.quota.shortfall(info.team, opt.accelerator, amount, allow_borrow=allow_borrow):
                continue
            room_key = self.room_key(info, opt)
            if room_key in self.no_room:
                continue
            budget = self.budget_left(info.team) + 1e-9
            any_room = over_budget = False
            least_new = float("inf")   # the least new spend of this option so far
            cands, pos = self.live_candidates(info, opt)
            if cands and cands[0][2] * amount > budget and region is None:
                continue  # even the cheapest pool per accelerator is over the team's budget
            full = 0
            n = len(cands)
            i = 0
            rest: list[int] | None = None   # indices still to visit once only roomy pools can win (descending)
            while True:
                if rest is None:
                    if i >= n:
                        break
                    k, i = i, i + 1
                elif rest:
                    k = rest.pop()
                else:
                    break
                ps, gang, per_acc, mult = cands[k]
                cost = per_acc * gang.accelerators * mult * replicas
                if cost > budget:
                    over_budget = True
                    if region is None:
                        break
                    continue
                if cost >= least_new and rest is None and region is None:
                    roomy = self.roomy[opt.accelerator]
                    if len(roomy) < n - k:
                        rest = sorted((j for r in roomy if (j := pos.get(r, -1)) >= k), reverse=True)
                        continue
                if not ps.may_fit(gang, replicas):
                    full += ps.is_full()
                    continue
                if cost >= least_new and not ps.fits_without_opening(gang, replicas):
                    continue
                units = ps.find(gang, replicas)
                if units is None:
                    continue
                any_room = True
                new_spend = sum(1 for u in units if u >= ps.target) * ps.unit_hourly_usd
                key = (region is not None and ps.pool.region != region, new_spend / opt.relative_speed,
                       self.pref.get(ps.pool.capacity, 99), cost / opt.relative_speed, opt.index, ps.pool.key)
                if best_key is None or key < best_key:
                    best_key, best = key, (ps, opt, units)
                if new_spend == 0:
                    break  # later pools of this option are no cheaper per unit of work and no better paid
                least_new = min(least_new, new_spend)
            if not any_room and not over_budget:
                self.no_room.add(room_key)
            if full > 8 and full * 4 > n:
                self._live_cands.pop(room_key, None)  # rebuild without the pools that filled up
        return best

    def first_fit(self, info: JobInfo, *, allow_borrow: bool) -> Choice | None:
        """First-fit decreasing's choice: the first option with quota, the first candidate pool (static
        order) within the team's budget that has room, its lowest-index units."""
        replicas = info.job.replicas
        for opt in info.options:
            if self.quota.shortfall(info.team, opt.accelerator, opt.count * replicas, allow_borrow=allow_borrow):
                continue
            budget = self.budget_left(info.team) + 1e-9
            for ps, gang, per_acc, mult in self.live_candidates(info, opt)[0]:
                if per_acc * gang.accelerators * mult * replicas > budget:
                    continue
                units = ps.find(gang, replicas, first_fit=True) if ps.may_fit(gang, replicas) else None
                if units is not None:
                    return ps, opt, units
        return None

    def live_candidates(self, info: JobInfo, opt: ResolvedOption) -> tuple[list[Cand], dict[PoolState, int]]:
        """`candidates` minus the pools that are full, each with its gang, price per accelerator and units
        per replica; and each pool's index in that list."""
        key = self.room_key(info, opt)
        found = self._live_cands.get(key)
        if found is None:
            cands = []
            for ps in self.candidates(info, opt):
                if not ps.is_full():
                    gang = self.gang(opt, ps)
                    cands.append((ps, gang, ps.unit_hourly_usd / ps.pool.unit_accelerators, max(1, gang.whole_units)))
            found = self._live_cands[key] = (cands, {c[0]: j for j, c in enumerate(cands)})
        return found

    def gang(self, opt: ResolvedOption, ps: PoolState) -> Gang:
        key = (id(opt), ps.pool.unit_accelerators)
        g = self._gangs.get(key)
        if g is None:
            g = self._gangs[key] = gang_for(opt, ps.pool)
        return g

    def try_place(self, info: JobInfo, *, allow_borrow: bool, status_reason: str = "",
                  defer_borrowing: bool = False) -> bool:
        """Place the job at its best candidate. With `defer_borrowing` (pass A), a job whose best candidate
        needs borrowed quota waits for pass B instead of settling for a dearer option within its nominal."""
        if defer_borrowing and all(
                self.quota.needs_borrow(info.team, o.accelerator, o.count * info.job.replicas) for o in info.options):
            return False   # every option needs borrowing: pass B
        found = self.best(info, allow_borrow=allow_borrow or defer_borrowing)
        if found is None:
            return False
        ps, opt, units = found
        if defer_borrowing and self.quota.needs_borrow(info.team, opt.accelerator, opt.count * info.job.replicas):
            return False
        ps.find(gang_for(opt, ps.pool), info.job.replicas, dry_run=False, first_fit=self.strategy.first_fit)
        self.commit(info, ps, opt, units, kept=False, reason=status_reason)
        return True

    # -- the steps -------------------------------------------------------------------------------------------

    def run(self) -> Plan:
        from .preempt import try_preempt
        from .sticky import keep_base

        queue, forced = keep_base(self)                                        # 2.
        self.forced = forced
        lead = set(self.strategy.lead)
        by_class: dict[int, list[JobInfo]] = defaultdict(list)
        for info in queue:
            if info.id not in lead:
                by_class[info.priority].append(info)
        leftover = self.in_order([i for i in queue if i.id in lead], allow_borrow=True, fair=False)
        for info in leftover:
            by_class[info.priority].append(info)
        for level in sorted(by_class, reverse=True):                          # 3.
            fair = self.strategy.order == "fair"
            waiting = by_class[level]
            if self.strategy.nominal_first:
                waiting = self.in_order(waiting, allow_borrow=False, fair=fair)   # 4. pass A
            waiting = self.in_order(waiting, allow_borrow=True, fair=fair)        #    pass B
            for info in waiting:                                              # 5.
                if not try_preempt(self, info):
                    self.failed[info.id] = []
        for job_id in sorted(self.failed, key=lambda j: (-self.jobs[j].priority, j)):   # 6.
            self.try_place(self.jobs[job_id], allow_borrow=True, status_reason=forced.get(job_id, ""))
        for job_id, why in forced.items():
            if job_id in self.live and not self.live[job_id].kept and not self.live[job_id].reason:
                self.live[job_id].reason = why
        return self.freeze(forced)

    def in_order(self, infos: list[JobInfo], *, allow_borrow: bool, fair: bool) -> list[JobInfo]:
        """Place `infos`, each team's jobs largest first (first-fit decreasing: big gangs before the small
        ones that would strand the capacity they need), then by id; with `fair`, teams take turns in
        weighted-DRF order (lowest dominant share next), else all jobs go largest first. Pass A
        (`allow_borrow` False) defers jobs that would borrow. Returns the ones that did not fit, by id."""
        def size(i: JobInfo) -> tuple[int, str]:
            return -i.options[0].count * i.job.replicas, i.id

        left: list[JobInfo] = []
        defer = not allow_borrow
        if not fair:
            for info in sorted(infos, key=size):
                if not self.try_place(info, allow_borrow=allow_borrow, defer_borrowing=defer):
                    left.append(info)
            return sorted(left, key=lambda i: i.id)
        per_team: dict[str, list[JobInfo]] = defaultdict(list)
        for info in sorted(infos, key=size, reverse=True):   # popped from the end
            per_team[info.team].append(info)
        heap = [(self.share(t), t) for t in sorted(per_team)]
        heapq.heapify(heap)
        while heap:
            _, team = heapq.heappop(heap)
            info = per_team[team].pop()
            if not self.try_place(info, allow_borrow=allow_borrow, defer_borrowing=defer):
                left.append(info)
            if per_team[team]:
                heapq.heappush(heap, (self.share(team), team))
        return sorted(left, key=lambda i: i.id)

    def freeze(self, forced: dict[str, str]) -> Plan:
        placements = []
        base = {p.job: p for p in self.base.placements} if self.base else {}
        for job_id, lv in self.live.items():
            before = base.get(job_id)
            same = before is not None and (before.cluster, before.pool, before.units) == (
                lv.pool.pool.cluster, lv.pool.pool.name, lv.units)
            status = "kept" if lv.kept or same else ("moved" if before is not None else "new")
            reason = lv.reason if status == "moved" else self.stay_reason.get(job_id, "") if lv.kept else ""
            placements.append(Placement(job_id, lv.pool.pool.cluster, lv.pool.pool.name, lv.option.index, lv.units,
                                        lv.gang.accelerators, status, lv.hourly_usd, reason))
        pending = pending_reasons(self, forced)
        return summarize(self, sorted(placements, key=lambda p: p.job), pending)


def plan(v: Validated, base: Plan | None = None) -> Plan:
    """Plan the validated repository; `base` is the plan of the base commit, for stickiness."""
    return plan_with_state(v, base)[0]


def plan_with_state(v: Validated, base: Plan | None = None) -> tuple[Plan, Planner]:
    """The plan and the final state of the run that made it, for `fleet explain`: the default run, or a
    strictly better alternative run of the improvement phase (improve.py)."""
    from .improve import improve

    with paused_gc():
        planner = Planner(v, base)
        return improve(planner, planner.run())
