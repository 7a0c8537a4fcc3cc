"""The planner's state: what one run of the planner reads (`Fleet`: jobs, teams, policies, indexed once) and
what it changes (`PlanState`: pools, quota ledger, live placements, spend), passed to every step as an
argument, as Kueue's preemptor takes a snapshot. Internal and mutable for the length of one `plan()` call.

The state keeps its invariants itself: `commit` and `evict` are the only ways a placement enters or leaves,
and they update the pool, the quota ledger, the team's spend and fair-share usage together; `put_back`
re-takes a placement's exact units. The steps (sticky.py, place.py, preempt.py, moves.py, improve.py,
reasons.py, summary.py) are functions of a state; `fork` gives an independent copy (`fleet explain` must
not change the state it reads)."""

from __future__ import annotations

import copy
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..models import Job, PlacementDoc, PrioritiesDoc, PriorityClass, Team
from ..resolve import ResolvedOption, ResolvedPool, away_from_data, gang_fit, residency_fit, run_hours, spot_policy
from ..validate import Validated
from . import oldcopy
from .capacity import Claim, Gang, PoolState, gang_for
from .live import LiveInputs
from .quota import SPOT, QuotaLedger, spot_charged
from .spread import domain, replica_id, spread_of
from .types import HOURS_PER_MONTH, NANO, LostWork, Plan, Preemption, Reservation, nano

BUDGET_EPS_USD = 1e-9   # budgets are checked on exact shares; this absorbs float noise in the sums

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
    """A job as the planner places it: the job itself, or one replica of a job whose replicas spread over
    failure domains (spread.py: then `id` is `<job id>#<replica>`, `job` has one replica, and `parent` is the
    job's id)."""

    job: Job
    id: str
    team: str
    priority: int
    preemptible: bool
    spot: str
    options: tuple[ResolvedOption, ...]
    parent: str = ""                    # the job's id (== id unless a spread replica)
    spread: str = "none"                # none | zone | cluster (spread.py)
    hard: bool = False                  # explicit `spread:` (a rule, not a preference)
    siblings: tuple[str, ...] = ()      # every replica's id, this one included (spread replicas only)
    order_work: int = 0                 # the whole job's work (keeps its replicas together in the queue order)
    pin: str = ""                       # a job group's place (plan/workloads.py): cluster:C, region:R or none
    spot_quota: frozenset[str] = frozenset()   # spot-only work: accelerators its team has a `spot:` quota of
    rank: tuple[int, str] = (0, "")     # the queue order's key, (-order_work, id): largest first (Fleet.of sets it)


def pin_fit(info: JobInfo, pool: ResolvedPool) -> str | None:
    """Why the job's group keeps it off `pool` (plan/workloads.py); None if it may run there."""
    if not info.pin:
        return None
    kind, _, where = info.pin.partition(":")
    if kind == "none":
        return f"its group `{info.job.group}` cannot start all together, so no member starts"
    if (pool.cluster if kind == "cluster" else pool.region) != where:
        return f"its group `{info.job.group}` runs together in {kind} {where}"
    return None


def work(info: JobInfo) -> int:
    """A job's work: accelerators of its first option * replicas, whichever option runs (the measure of the
    queue order, the improvement phase, the exact mode and bench/bench_quality.py). A spread replica's work
    is its share (one replica)."""
    return info.options[0].count * info.job.replicas


def outside(info: JobInfo, ps: PoolState) -> bool:
    """The pool is outside the job's data region (the greedy's first preference; `outside_data_region`)."""
    return away_from_data(info.job, ps.pool)


def amount(info: JobInfo, opt: ResolvedOption) -> int:
    """What the job takes of its team's `opt.accelerator` quota with this option."""
    return opt.count * info.job.replicas


def qkey(info: JobInfo, opt: ResolvedOption) -> str:
    """The quota the job is charged to with this option (`QuotaLedger.charged`: spot-only work apart)."""
    return opt.accelerator + SPOT if opt.accelerator in info.spot_quota else opt.accelerator


def split(info: JobInfo) -> list[JobInfo]:
    """The job as the planner places it: itself, or one JobInfo (one replica, knowing its siblings) per replica."""
    how = spread_of(info.job)
    if how == "none":
        return [info]
    one = info.job.model_copy(update={"replicas": 1})
    ids = tuple(replica_id(info.id, i) for i in range(info.job.replicas))
    hard = info.job.spread is not None
    # each field of the job's but job, id, spread, hard and siblings (faster than `replace`; Fleet.of ranks each)
    return [JobInfo(one, rid, info.team, info.priority, info.preemptible, info.spot, info.options, info.parent, how,
                    hard, ids, info.order_work, info.pin, info.spot_quota, info.rank) for rid in ids]


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


@dataclass(frozen=True, slots=True)
class Fleet:
    """What every run over one validated repository reads and never changes."""

    v: Validated
    prio: PrioritiesDoc
    placement: PlacementDoc
    teams: dict[str, Team]
    jobs: dict[str, JobInfo]
    pref: dict[str, int]        # capacity kind -> its rank in `capacity_preference`
    by_job: dict[str, JobInfo]  # job id -> its JobInfo, or its first replica's for a spread job
    live: LiveInputs | None = None   # what runs (`--observed`, plan/live.py): finished jobs are left out
    for_people: bool = True          # False: pending jobs get no measured reasons (planner.plan)

    @staticmethod
    def of(v: Validated, live: LiveInputs | None = None, pins: dict[str, str] | None = None) -> Fleet:
        loaded = v.loaded
        assert loaded.teams is not None and loaded.priorities is not None and loaded.placement is not None
        prio = loaded.priorities
        classes: dict[str, PriorityClass] = {c.name: c for c in prio.classes}
        teams = {t.name: t for t in loaded.teams.teams}
        jobs: dict[str, JobInfo] = {}
        done, pinned = live.done if live is not None else {}, pins or {}
        charged: dict[tuple[str, str], frozenset[str]] = {}   # (team, spot policy) -> `spot_charged`
        for job in loaded.jobs:
            job_id, team = job.id, job.team     # `id` is a property: made once
            if job_id not in v.options or team not in teams or job_id in done:
                continue
            cls = classes[job.priority or prio.default]
            spot = spot_policy(job, cls.spot)
            if (quota := charged.get((team, spot))) is None:
                quota = charged[team, spot] = spot_charged(teams[team], spot)
            info = JobInfo(job, job_id, team, cls.value, cls.preemptible, spot, v.options[job_id], parent=job_id,
                           pin=pinned.get(job_id, ""), spot_quota=quota)
            info.order_work = work(info)
            for p in split(info):
                p.rank = (-(p.order_work or work(p)), p.id)
                jobs[p.id] = p
        by_job: dict[str, JobInfo] = {}
        for info in jobs.values():
            by_job.setdefault(info.parent, info)
        return Fleet(v, prio, loaded.placement, teams, jobs,
                     {c: i for i, c in enumerate(loaded.placement.capacity_preference)}, by_job, live)


@dataclass(slots=True)
class Outcome:
    """What a run decided besides placements: who preempted whom, who left the base and why, why a kept job
    stays on a draining cluster or is re-created where it runs, why a job waits as recorded when decided."""

    forced: dict[str, str] = field(default_factory=dict)
    preemptions: list[Preemption] = field(default_factory=list)
    stay_reason: dict[str, str] = field(default_factory=dict)
    waits: dict[str, tuple[str, ...]] = field(default_factory=dict)
    lost_work: dict[str, LostWork] = field(default_factory=dict)   # jobs forced off failed units or lost clusters
    spared: dict[str, str] = field(default_factory=dict)   # job -> why its would-be victims were not preempted
    claims: dict[str, Claim] = field(default_factory=dict)   # job -> what it waits for instead (claims.py)
    restarts: dict[str, str] = field(default_factory=dict)   # sticky.py `restart_reason`
    left: set[str] = field(default_factory=set)   # taken out, not placed again: a reason naming one is measured anew


class PlanState:
    """Pools, quota ledger and live placements of one run (module docstring), with the caches that make
    the search fast. `PlanState(v, base, strategy)` opens every pool's min units and places nothing."""

    def __init__(self, v: Validated | Fleet, base: Plan | None, strategy: Strategy = FAIR) -> None:
        self.fleet = v if isinstance(v, Fleet) else Fleet.of(v)
        self.base = base
        self.strategy = strategy
        assert self.fleet.v.loaded.teams is not None
        self.quota = QuotaLedger(self.fleet.v.loaded.teams)
        # pools per accelerator with free accelerators on opened units, kept up to date by PoolState
        self.roomy: dict[str, set[PoolState]] = defaultdict(set)
        prices = self.fleet.v.unit_prices
        self.pools = {p.key: PoolState(p, prices[p.key].hourly_usd, self.roomy[p.accelerator])
                      for p in self.fleet.v.pools if p.key in prices}
        if self.fleet.live is not None:       # failed units (plan/live.py) take no work
            for key, units in self.fleet.live.failed_units.items():
                if key in self.pools:
                    self.pools[key].block(units)
            for key, why in self.fleet.live.failed_nodes.items():      # the highest units, one per node
                if key in self.pools:
                    top = self.pools[key].pool.max
                    self.pools[key].block(range(max(0, top - len(why)), top))
        self.live: dict[str, Live] = {}
        self.on_pool: dict[str, set[str]] = defaultdict(set)              # pool key -> jobs placed there
        self.holding: dict[tuple[str, str], set[str]] = defaultdict(set)  # (team, accelerator) -> its jobs
        self.version = 0     # changes with every commit and evict (what caches of derived facts check)
        self.kept_by_pool: dict[str, set[str]] = defaultdict(set)
        self.kept_by_team: dict[str, set[str]] = defaultdict(set)
        self.kept_low: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))   # team -> priority ->
        # its kept preemptible jobs (preempt.py: victims have at most the preemptor's priority)
        self.team_hourly: dict[str, int] = defaultdict(int)    # team -> its spend per hour, in nano-dollars (`nano`):
        # whole numbers, so a placement tried and undone leaves it exactly as it was (a float total drifted)
        self.old_copy: dict[str, int] = {}  # moved service -> its old copy's charge in team_hourly (oldcopy.py)
        self.paid_at: dict[str, tuple[str, tuple[int, ...], int]] = {}     # running service -> where, its charge
        self.capacity_total: dict[str, int] = defaultdict(int)
        for ps in self.pools.values():
            if ps.pool.status == "active":
                self.capacity_total[ps.pool.accelerator] += ps.pool.max * ps.pool.unit_accelerators
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.outcome = Outcome()
        self.failed: set[str] = set()     # jobs that found no place in their class (retried in step 6)
        self._shares: dict[str, float] = {}
        self._candidates: dict[tuple[object, ...], list[PoolState]] = {}
        self._reach: dict[str, dict[str, PoolState]] = {}
        self._cand_sets: dict[int, frozenset[PoolState]] = {}
        # Gangs that found no room in any candidate pool, until an eviction clears it (placing only takes room)
        self.no_room: set[tuple[object, ...]] = set()
        self.no_home: set[tuple[object, ...]] = set()   # the same, for room in the job's data region only
        # Searches that found nothing (place.best) fail again until `loosened` moves (an eviction, a reserved job
        # placed, a reservation's units swapped: moves.compact): placing and reserving only take room and quota.
        self.loosened = 0
        self.no_fit: dict[tuple[object, ...], int] = {}
        self.no_preempt: dict[tuple[object, ...], int] = {}   # preempt.py: failures, per version
        self.victim_facts: dict[tuple[str, bool, int, bool], tuple[str | None, float]] = {}  # preempt.py, per placement
        self.victim_pools: dict[tuple[object, ...], tuple[int, Any]] = {}   # preempt.py, per version
        self.why_cache: dict[tuple[object, ...], tuple[int, list[str]]] = {}   # reasons.py, per version
        self.reason_parts: dict[tuple[object, ...], tuple[int, Any]] = {}     # reasons.option_reasons, per version
        self._gangs: dict[tuple[int, int, int | None, int | None, bool], Gang] = {}
        self.live_cands: dict[tuple[object, ...], tuple[list[Cand], dict[PoolState, int]]] = {}
        self.preempt_pools: dict[tuple[object, ...], tuple[list[float], list[int]]] = {}   # preempt.py, static
        self.best_prefs: dict[tuple[object, ...], int] = {}   # place.best_pref, static
        self.cheapest: dict[str, tuple[float, ...]] = {}        # job id -> place.cheapest of each option, static
        self.reserved: dict[str, list[Reservation]] = defaultdict(list)   # pool key -> its reservations (reserve.py)
        self.reservation_of: dict[str, Reservation] = {}                   # job id -> the units held for it
        self.quota_holds: dict[tuple[str, str], list[Reservation]] = defaultdict(list)   # (team, acc) -> holds
        self.draining: dict[str, Live] = {}   # victims running until their checkpoint (victims.hold_until_checkpoint)
        oldcopy.start(self)

    @property
    def jobs(self) -> dict[str, JobInfo]:
        return self.fleet.jobs

    @property
    def teams(self) -> dict[str, Team]:
        return self.fleet.teams

    # -- what a job could use ----------------------------------------------------------------------------

    def candidates(self, info: JobInfo, opt: ResolvedOption) -> list[PoolState]:
        """Pools in active clusters that could hold one gang at max, best static key first."""
        region = info.job.data_region
        sig = (opt.accelerator, opt.shape, opt.slices, opt.count, opt.cpus, opt.memory_gib, info.spot, region,
               info.job.data_residency, info.job.kind == "inference", info.pin)
        found = self._candidates.get(sig)
        if found is None:
            pref = self.fleet.pref
            fits = [ps for ps in self.pools.values()   # the accelerator first: `gang_fit` would say why not, in words
                    if ps.pool.accelerator == opt.accelerator and ps.pool.status == "active"
                    and gang_fit(opt, ps.pool, info.spot, info.job.kind) is None
                    and residency_fit(info.job, ps.pool) is None and pin_fit(info, ps.pool) is None]
            fits.sort(key=lambda ps: (region is not None and ps.pool.region != region,
                                      ps.unit_hourly_usd / ps.pool.unit_accelerators,
                                      pref.get(ps.pool.capacity, 99), ps.pool.key))
            self._candidates[sig] = found = fits
        return found

    def reach(self, info: JobInfo) -> dict[str, PoolState]:
        """Every candidate pool of every option of the job, by key."""
        mine = self._reach.get(info.id)
        if mine is None:
            mine = self._reach[info.id] = {ps.pool.key: ps for opt in info.options for ps in self.candidates(info, opt)}
        return mine

    def room_key(self, info: JobInfo, opt: ResolvedOption) -> tuple[object, ...]:
        """What `candidates` keys pools by (a job's kind too: no service on Slurm), and the reservations on those
        pools whose units it may not take: all that is found or remembered under the key reads (`live_candidates`,
        `no_room`, `no_home`, `preempt_pools`, the reasons' caches; quota holds are asked apart, `quota_held`).
        So it asks no duration_hours it does not need (history_reuse.py reuses points across the others)."""
        mine = self.candidate_set(info, opt) if self.reserved else None
        held = tuple(r.job for r in self.reservation_of.values() if r.units and self.pools.get(r.pool_key) in mine
                     and self.may_not_use(info, r, opt)) if mine is not None else None
        return (opt.accelerator, opt.shape, opt.slices, opt.count, opt.cpus, opt.memory_gib, info.spot, info.pin,
                info.job.data_region, info.job.data_residency, info.job.kind == "inference", info.job.replicas, held)

    # -- reservations (reserve.py) -------------------------------------------------------------------------

    def reserve(self, r: Reservation) -> None:
        if r.quota_limit is not None:
            self.quota_holds[(r.team, r.accelerator)].append(r)
        if r.units:     # a quota hold holds the units its job fits on at its start too (reserve.py)
            self.reserved[r.pool_key].append(r)
        self.reservation_of[r.job] = r
        self.no_room.clear()    # room keys now say who may use reserved units
        self.no_home.clear()
        self.live_cands.clear()

    def may_not_use(self, info: JobInfo, r: Reservation, opt: ResolvedOption) -> bool:
        """The reservation's units are not for `info` on `opt` now: another job's (not placed in this run), of its
        class or higher, and `info` has no duration_hours or does not end by the reservation's start (backfill)."""
        last = self.backfill_until(info, r, opt)
        return last is not None and last < 0.0

    def backfill_until(self, info: JobInfo, r: Reservation, opt: ResolvedOption) -> float | None:
        """The latest start (hours from now) at which `info` may still take the reservation's units with `opt`,
        ending by its start (backfill: it runs `resolve.run_hours` on `opt`; -inf: never, it has no duration_hours);
        None: the reservation does not bind `info` (its own, of a lower class, or its job placed in this run). A
        forced move is running work: it may take them now, not later (by then it waits as any job)."""
        if r.job == info.parent or info.priority > r.priority or r.job in self.live:
            return None
        hours = run_hours(info.job.duration_hours, opt.relative_speed)
        last = float("-inf") if hours is None else r.start_hours - hours
        return max(last, 0.0) if info.id in self.outcome.forced else last

    def live_candidates(self, info: JobInfo, opt: ResolvedOption,
                        key: tuple[object, ...] | None = None) -> tuple[list[Cand], dict[PoolState, int]]:
        """`candidates` minus the pools that are full, each with its gang, price per accelerator and units per
        replica; and each pool's index in that list. `key`: the option's `room_key`, if the caller has it."""
        if key is None:
            key = self.room_key(info, opt)
        found = self.live_cands.get(key)
        if found is None:
            cands = []
            for ps in self.candidates(info, opt):
                if not ps.is_full():
                    gang = self.gang(opt, ps)
                    cands.append((ps, gang, ps.unit_hourly_usd / ps.pool.unit_accelerators, max(1, gang.whole_units)))
            found = self.live_cands[key] = (cands, {c[0]: j for j, c in enumerate(cands)})
        return found

    def candidate_set(self, info: JobInfo, opt: ResolvedOption) -> frozenset[PoolState]:
        """`candidates` as a set (preempt.py: a victim on a pool the job could use frees room there only)."""
        cands = self.candidates(info, opt)      # cached for the state's life: its identity is the key
        found = self._cand_sets.get(id(cands))
        if found is None:
            found = self._cand_sets[id(cands)] = frozenset(cands)
        return found

    def gang(self, opt: ResolvedOption, ps: PoolState) -> Gang:
        pool = ps.pool     # what `gang_for` reads: a pod's default requests are its node's (not on Slurm)
        key = (id(opt), pool.unit_accelerators, pool.node_cpus, pool.node_memory_gib, pool.provider == "slurm")
        if (g := self._gangs.get(key)) is None:
            g = self._gangs[key] = gang_for(opt, pool)
        return g

    # -- spread replicas (spread.py) ---------------------------------------------------------------------------

    def siblings_placed(self, info: JobInfo) -> list[Live]:
        """The placements of the job's other replicas (none for a job that does not spread)."""
        return [lv for s in info.siblings if s != info.id and (lv := self.live.get(s)) is not None]

    def sibling_domains(self, info: JobInfo) -> set[str]:
        return {domain(lv.pool.pool, info.spread) for lv in self.siblings_placed(info)}

    def spread_avoid(self, info: JobInfo) -> tuple[set[str], bool]:
        """(the domains a replica tries to avoid first, whether it may still go there when nothing else has
        room): its siblings' domains; a rule (`hard`) lets it join them only once they span two domains."""
        doms = self.sibling_domains(info)
        return doms, not info.hard or len(doms) >= 2

    def spread_blocks(self, info: JobInfo, ps: PoolState, opt: ResolvedOption) -> bool:
        """Placing the replica on `ps` with `opt` breaks the spread rules: its siblings all sit in the
        pool's domain (so every replica would be in one domain), or a sibling runs another option in the
        pool (a pool's replicas share one placement, of one option)."""
        if not info.siblings:
            return False
        lives = self.siblings_placed(info)
        if any(lv.pool is ps and lv.option.index != opt.index for lv in lives):
            return True
        doms = {domain(lv.pool.pool, info.spread) for lv in lives}
        return doms == {domain(ps.pool, info.spread)}

    def sibling_units(self, info: JobInfo, ps: PoolState) -> frozenset[int]:
        """Units of `ps` the job's other replicas hold (a replica goes to distinct units)."""
        if not info.siblings:
            return frozenset()
        return frozenset(u for lv in self.siblings_placed(info) if lv.pool is ps for u in lv.units)

    # -- money ---------------------------------------------------------------------------------------------

    @staticmethod
    def attributed(ps: PoolState, gang: Gang, units: tuple[int, ...]) -> float:
        """A placement's exact share of its units' hourly cost (what the team's budget is charged)."""
        return ps.charge(gang, len(units))

    def budget_left(self, team: str) -> float:
        """Hourly budget the team has left (inf without a budget)."""
        budget = self.teams[team].budget_monthly_usd
        return float("inf") if budget is None else budget / HOURS_PER_MONTH - self.team_hourly[team] / NANO

    def budget_room(self, team: str, freed_usd: float = 0.0) -> float:
        """The most a new placement of the team may cost per hour, `freed_usd` of its spend released (the check)."""
        return self.budget_left(team) + freed_usd + BUDGET_EPS_USD

    # -- placing and taking out ----------------------------------------------------------------------------

    def commit(self, info: JobInfo, ps: PoolState, opt: ResolvedOption, units: tuple[int, ...], *,
               kept: bool, reason: str = "", gang: Gang | None = None) -> None:
        """Record a placement whose units the pool gave (`find(dry_run=False)`, `take`; `gang`: `take_as_runs`)."""
        gang = gang or gang_for(opt, ps.pool)
        hourly = self.attributed(ps, gang, units)
        self.live[info.id] = Live(info, ps, opt, gang, units, hourly, kept, reason)
        n = amount(info, opt)
        self.quota.add(info.team, qkey(info, opt), n)
        self.usage[info.team][opt.accelerator] += n
        self._shares.pop(info.team, None)
        self.team_hourly[info.team] += nano(hourly)
        oldcopy.placed(self, info, ps, units)    # a moved service's old copy, paid until its new one is up
        self.failed.discard(info.id)
        self.outcome.left.discard(info.id)
        if info.parent in self.reservation_of:
            self.loosened += 1      # its reservation no longer binds anyone (`may_not_use`, `quota_hold_on`)
        self.outcome.waits.pop(info.id, None)
        self.on_pool[ps.pool.key].add(info.id)
        self.holding[(info.team, qkey(info, opt))].add(info.id)
        self.version += 1
        if kept:
            self.kept_by_pool[ps.pool.key].add(info.id)
            self.kept_by_team[info.team].add(info.id)
            if info.preemptible:
                self.kept_low[info.team][info.priority].add(info.id)

    def evict(self, job_id: str, *, stop: bool = False) -> Live:
        """Take a placement out: its units, quota and spend (`stop`: a running copy's too) are free. For `put_back`."""
        lv = self.live.pop(job_id)
        self.outcome.left.add(job_id)
        lv.pool.release(lv.units, lv.gang)
        n = amount(lv.info, lv.option)
        self.quota.remove(lv.info.team, qkey(lv.info, lv.option), n)
        self.usage[lv.info.team][lv.option.accelerator] -= n
        self._shares.pop(lv.info.team, None)
        self.kept_by_pool[lv.pool.pool.key].discard(job_id)
        self.kept_by_team[lv.info.team].discard(job_id)
        self.kept_low[lv.info.team][lv.info.priority].discard(job_id)
        self.on_pool[lv.pool.pool.key].discard(job_id)
        self.holding[(lv.info.team, qkey(lv.info, lv.option))].discard(job_id)
        self.version += 1
        self.loosened += 1
        self.no_room.clear()
        self.no_home.clear()
        self.live_cands.clear()
        self.team_hourly[lv.info.team] -= nano(lv.hourly_usd)
        oldcopy.removed(self, job_id, lv.info.team, (lv.pool.pool.key, lv.units), stop)
        return lv

    def put_back(self, lv: Live, *, kept: bool | None = None) -> None:
        """Place an evicted placement again on its exact units (kept as it was, unless `kept` says)."""
        if not lv.pool.take(lv.units, lv.gang):   # pragma: no cover - the units were freed by its eviction
            raise RuntimeError(f"planner: could not put {lv.info.id} back on {lv.pool.pool.key} {lv.units}")
        self.commit(lv.info, lv.pool, lv.option, lv.units, kept=lv.kept if kept is None else kept, reason=lv.reason,
                    gang=lv.gang)

    def share(self, team: str) -> float:
        """Weighted dominant share: the largest fraction of an accelerator type the team holds / weight (cached)."""
        found = self._shares.get(team)
        if found is None:
            dominant = max((used / self.capacity_total[acc] for acc, used in self.usage[team].items()
                            if self.capacity_total.get(acc)), default=0.0)
            found = self._shares[team] = dominant / self.teams[team].weight
        return found

    def fork(self) -> PlanState:
        """An independent copy (pools, ledger, placements, outcome), sharing only the read-only `fleet`."""
        memo: dict[int, object] = {id(self.fleet): self.fleet, id(self.base): self.base}
        memo.update((id(info), info) for info in self.fleet.jobs.values())
        memo.update((id(ps.pool), ps.pool) for ps in self.pools.values())
        # search caches: `cheapest` is static, shared; the memos of failed searches and reasons start afresh
        memo.update({id(self.cheapest): self.cheapest, id(self.no_fit): {}, id(self.reason_parts): {}})
        other = copy.deepcopy(self, memo)
        other._cand_sets = {}      # keyed by the identity of lists the copy does not share
        return other
