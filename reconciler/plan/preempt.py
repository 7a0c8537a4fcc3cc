"""Step 5 of the planner: preemption of kept (running) work for a job that does not fit otherwise.

Victims are kept placements of preemptible classes that `policies/priorities.yaml` lets the job preempt:
its own team's lower-priority jobs (`within_team`), borrowers in its cohort when the job is within its
nominal quota (`reclaim_within_cohort`; with `any`, whatever their priority, as Kueue's reclaimWithinCohort:
Any "irrespective of priority"), or lower-priority jobs at or below `max_priority_threshold` when the
job must borrow (`borrow_within_cohort`). Victims may run in any pool: one on the pool the job would land on
frees capacity there, one anywhere frees the quota (its team's or its cohort's, same accelerator) the job needs;
a victim of its own team stopped for either frees its spend too, but none is stopped for budget alone (a budget
blocks new starts and never evicts: victims.py). For each option and candidate pool, victims are taken in order of least
work lost (`checkpoint_minutes`), then lowest priority, then id (and again largest first, which frees the
most quota per victim), each only if it remedies something still lacking, until the job fits; then every
victim the job turns out not to need goes back. The (option, pool)
needing the fewest victims wins (then least work lost, option index, pool), a pool in the job's
data_region before any outside it: fewest victims and least lost work first, in that greedy order, not a
global optimum. Planned from what runs (`--observed`, the reconcile
loop, `fleet simulate`), work lost is estimated from each victim's observed running time and its restart
(`at_risk`: the minutes since its checkpoint plus `repack.restart_minutes` of restore and warm-up, times its
accelerators) and comes before the count of victims: one 1,024-chip job 25 minutes past its checkpoint loses
more than three small ones that just checkpointed (issue 15), and a large gang that just checkpointed still
costs its restart (issue 22). Victims go back to the queue and may land elsewhere
in the final pass.
"""

from __future__ import annotations

import math
from bisect import bisect_right

from ..checkpoint import minutes_at_risk
from ..resolve import ResolvedOption
from . import victims
from .capacity import PoolState
from .claims import claim
from .place import place_at
from .reserve import exclude
from .state import JobInfo, Live, PlanState, amount, outside, qkey
from .types import Preemption

UNTIL = "; it keeps running until its next checkpoint in "
"""How a preemption's reason says its victim runs on to its checkpoint (greedy.py drops it from a stop that stands)."""
WITH = "; it keeps running while "
"""How it says a victim that loses nothing by running on runs on with a fellow victim held to its checkpoint."""


def allowed(st: PlanState, victim: Live, job: JobInfo, acc: str, need: int,
            within_nominal: bool | None = None) -> str | None:
    """Why `job` (needing `need` of `acc`) may preempt `victim` (the rule), or None. `within_nominal`: whether
    the job fits its team's nominal quota of `acc` (computed here when not given; the same for every victim)."""
    rules = st.fleet.prio.preemption
    v = victim.info
    if not v.preemptible:
        return None
    if v.team == job.team:
        if rules.within_team != "never" and v.priority < job.priority:
            return f"lower priority in team {job.team}"
        return None
    domain = st.quota.domain
    if domain.get(v.team) is None or domain.get(v.team) != domain.get(job.team):
        return None
    if within_nominal is None:
        within_nominal = not st.quota.needs_borrow(job.team, acc, need)
    if not borrows_past_new(st, v.team, qkey(v, victim.option), v.priority):
        return None     # Kueue never preempts a cohort-mate that is not borrowing (preemption.go findCandidates)
    if within_nominal:      # `any`: whatever the borrower's priority (Kueue's reclaimWithinCohort: Any)
        if rules.reclaim_within_cohort == "any" or (
                rules.reclaim_within_cohort == "lower_priority" and v.priority < job.priority):
            return f"reclaiming {acc} quota that team {v.team} borrowed"
        return None
    bw = rules.borrow_within_cohort
    if bw.policy == "lower_priority" and v.priority < job.priority and (
            bw.max_priority_threshold is None or v.priority <= bw.max_priority_threshold):
        return "borrowing within the cohort from lower-priority work"
    return None


def borrows_past_new(st: PlanState, team: str, acc: str, priority: int) -> bool:
    """Whether `team` borrows `acc` beyond what this plan's new placements of the team of at most `priority`
    take: Kueue orders such work (admitted after any running victim, of no higher priority) before a running
    victim of `priority` among its candidates, and `minimalPreemptions` evicts it first, after which the team
    may borrow no more. The plan does not evict its new placements; it counts them out. Before the
    forty-second session a team that borrowed only by a 2-GPU research job this plan placed had its 24-GPU
    production job preempted "reclaiming ... quota that team b borrowed" for a research job that lacked room,
    not quota (review finding)."""
    over = st.quota.usage[(team, acc)] - st.quota.limits(team, acc)[0]
    if over <= 0:
        return False
    new = 0
    for j in st.holding[(team, acc)]:
        lv = st.live[j]
        if not lv.kept and lv.info.priority <= priority:
            new += amount(lv.info, lv.option)
    return over > new


def at_risk(st: PlanState, lv: Live) -> float:
    """The work `lv` loses if preempted now, the victims' first sort key (`checkpoint.minutes_at_risk`). A
    placement this plan made (not kept) has not started: nothing. Planned from what runs (plan/live.py),
    accelerator-minutes since its last checkpoint: its observed running minutes modulo `checkpoint_minutes`
    (checkpoints every that many minutes of running time; all it ran when it never checkpoints), or the whole
    interval when its running time is unknown; plus its restart (`victims.restart_cost`). From git alone (nothing
    observed), minutes: `checkpoint_minutes`, the most it loses. A job that never checkpoints and whose running
    time is unknown has an unknown loss: ranked last (infinite), never first as if it lost nothing."""
    if not lv.kept:
        return 0.0
    live = st.fleet.live
    minutes = minutes_at_risk(live.run_minutes.get(lv.info.parent) if live is not None else None,
                              lv.info.job.checkpoint_minutes)
    if minutes is None:
        return math.inf
    return minutes if live is None else minutes * amount(lv.info, lv.option) + victims.restart_cost(st, lv)


def _fits(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState) -> tuple[bool, bool, bool]:
    """Whether the job's gang finds units on `ps`, is within its team's quota, and within its budget."""
    gang = st.gang(opt, ps)
    units = ps.find(gang, job.job.replicas) if ps.may_fit(gang, job.job.replicas) else None
    quota_ok = st.quota.shortfall(job.team, qkey(job, opt), amount(job, opt)) == 0
    hourly = st.attributed(ps, gang, units) if units is not None else ps.least_charge(gang, job.job.replicas)
    return units is not None, quota_ok, hourly <= st.budget_room(job.team)


def _helps(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState, lv: Live,
           lacks: tuple[bool, bool, bool]) -> bool:
    """Whether evicting `lv` could remedy one of what the job lacks now: room on `ps`, or quota freed on `ps`
    (victims.py: a victim elsewhere is never evicted only for fleet-wide quota; none is evicted for budget)."""
    room, quota_ok, _ = lacks
    if lv.pool is ps and not room:
        return True
    if lv.pool is not ps and lv.pool in st.candidate_set(job, opt):
        return False     # the job could run where it runs: it preempts there or not at all (victims.py)
    return not quota_ok and qkey(lv.info, lv.option) == qkey(job, opt) and (
        lv.info.team == job.team or st.quota.domain.get(lv.info.team) == st.quota.domain.get(job.team))


def _affordable(st: PlanState, job: JobInfo, opt: ResolvedOption, budget_freed: float) -> list[PoolState]:
    """The candidate pools (in `candidates` order) whose budget a preemption could meet: the job's charge
    there (its `least_charge`, exactly what `find`'s units would charge) is within `budget_freed` (the most its
    team could have once every victim is out). Each pool's least charge depends on the pool and the job's
    shape only, so it is computed once per plan and shape; a team out of budget skips its pools by bisection
    instead of one by one. `_victims_for` judges the rest: room, quota, and the budget the victims it keeps
    out really free."""
    cands = st.candidates(job, opt)
    key = st.room_key(job, opt)
    found = st.preempt_pools.get(key)
    if found is None:
        least = sorted((ps.least_charge(st.gang(opt, ps), job.job.replicas), i) for i, ps in enumerate(cands))
        found = st.preempt_pools[key] = ([b for b, _ in least], [i for _, i in least])
    bounds, order = found
    k = bisect_right(bounds, budget_freed)
    if k == len(order):
        return cands
    return [cands[i] for i in sorted(order[:k])]


def _victims_for(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState,
                 allowed_here: list[tuple[float, int, str, str]]) -> list[victims.Victim] | None:
    """The victims that make room for the job on `ps` (with the quota and budget it needs), or None: evict
    in order (least work lost, lowest priority, id) each one that remedies something still lacking, until
    the job fits; then put back every victim, most work lost first, that the job does not need after all.
    The state is as before on return (its search caches too: a simulation leaves nothing changed)."""
    no_room, live_cands, version = st.no_room, st.live_cands, st.version
    st.no_room, st.live_cands = set(), {}
    try:
        return _simulate(st, job, opt, ps, allowed_here)
    finally:   # the version too: what caches keyed by it (the failure memo of `try_preempt`) knew still holds
        st.no_room, st.live_cands, st.version = no_room, live_cands, version


def _simulate(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState,
              allowed_here: list[tuple[float, int, str, str]]) -> list[victims.Victim] | None:
    evicted: list[tuple[str, str, float, Live]] = []
    fits = False
    lacks = _fits(st, job, opt, ps)     # what it lacks changes only with an eviction
    for lost, _, job_id, why in allowed_here:
        if all(lacks):
            fits = True
            break
        if lacks[0] and lacks[1]:
            break   # only budget lacks: no victim is evicted for budget (victims.py)
        lv = st.live[job_id]
        if lv.info.team != job.team and not borrows_past_new(st, lv.info.team, qkey(lv.info, lv.option),
                                                             lv.info.priority):
            continue    # its team no longer borrows once the victims before it stop (Kueue's minimalPreemptions)
        if _helps(st, job, opt, ps, lv, lacks):
            evicted.append((job_id, why, lost, st.evict(job_id, stop=True)))
            lacks = _fits(st, job, opt, ps)
    fits = fits or (bool(evicted) and all(lacks))
    chosen: list[victims.Victim] | None = None
    if fits:
        needed = []
        for job_id, why, lost, lv in sorted(evicted, key=lambda e: (-e[2], e[0])):
            st.put_back(lv)
            if all(_fits(st, job, opt, ps)):
                continue    # not needed: it stays back for now
            st.evict(job_id, stop=True)
            needed.append((job_id, why, lost, lv))
        chosen = sorted(_stopping(st, job, opt, ps, needed), key=lambda e: e[0])
        evicted = needed
    for _, _, _, lv in reversed(evicted):
        st.put_back(lv)
    return chosen


def _stopping(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState,
              needed: list[tuple[str, str, float, Live]]) -> list[victims.Victim]:
    """The needed victims (evicted from the state, and no others) as they will stop: one that would keep running
    until its checkpoint (lost: its restart) stops at once where the units the job then takes on `ps`
    (`place_at`'s) share one with it (`victims.shares_unit`), and loses its work since its checkpoint too."""
    gang, units, out = st.gang(opt, ps), None, []
    for job_id, why, lost, lv in needed:
        if lv.pool is ps and victims.after_minutes(st, lv) is not None:
            units = units or ps.find(gang, job.job.replicas,
                                     exclude=exclude(st, job, ps, bool(job.siblings), opt))
            if victims.shares_unit(lv, gang.accelerators, units, ps):
                out.append(victims.Victim(job_id, why, at_risk(st, lv), True))
                continue
        out.append(victims.Victim(job_id, why, lost))
    return out


def _victim_groups(st: PlanState, job: JobInfo, opt: ResolvedOption, need: int,
                   within_nominal: bool) -> list[tuple[set[str], int, str]]:
    """The kept jobs the job may preempt for this option, as groups (ids, their priority, the rule that
    allows them), found through indexes: its team's lower-priority preemptible ones (any accelerator: they
    also free its budget), and its cohort-mates' preemptible ones on the job's accelerator when they borrow it
    and the job is within its nominal quota (reclaim: of any priority with `any`, else of at most its own) or
    the policy lets the job borrow from them (of at most its priority). `allowed` reads of a victim only its
    team, priority, preemptibility and accelerator, the same for a whole group (its team's kept jobs of one
    priority; for a cohort-mate, those on `opt.accelerator`), so it is asked once per group; whom the indexes
    leave out it refuses anyway."""
    rules = st.fleet.prio.preemption
    low, prio, acc, live = st.kept_low, job.priority, qkey(job, opt), st.live
    groups: list[tuple[set[str], int, str]] = []

    def add(ids: set[str], p: int) -> None:
        why = allowed(st, live[next(iter(ids))], job, acc, need, within_nominal)
        if why is not None:
            groups.append((ids, p, why))

    if rules.within_team != "never" and (mine := low.get(job.team)):
        for p, kept in mine.items():
            if p < prio and kept:
                add(kept, p)
    d = st.quota.domain.get(job.team)
    if d is None:
        return groups
    if rules.reclaim_within_cohort != "never" and (within_nominal
                                                   or rules.borrow_within_cohort.policy == "lower_priority"):
        teams = [t for t in st.quota.teams_of.get(d, ()) if t != job.team and st.quota.is_borrowing(t, acc)]
    else:
        teams = []
    any_reclaim = within_nominal and rules.reclaim_within_cohort == "any"     # borrowers of any priority
    for t in teams:
        holding = st.holding.get((t, acc))
        if not holding or not (theirs := low.get(t)):
            continue
        for p, kept in theirs.items():
            if (p <= prio or any_reclaim) and kept and (ids := kept & holding):
                add(ids, p)
    return groups


def _victim_facts(st: PlanState, lv: Live, now: bool = False) -> tuple[str | None, float]:
    """Why `lv` is too young to preempt (or None) and the work it loses if preempted now: facts of the victim
    alone, the same for every preemptor, so found once per plan (per placement: its option and keptness).
    `now`: the preemptor already runs (`take`: its victims stop at once, not at their checkpoint)."""
    key = (lv.info.id, lv.kept, id(lv.option), now)
    found = st.victim_facts.get(key)
    if found is None:
        young = victims.protected(st, lv)
        lost = 0.0 if young is not None else \
            victims.restart_cost(st, lv) if not now and victims.after_minutes(st, lv) is not None else at_risk(st, lv)
        found = st.victim_facts[key] = (young, lost)
    return found


Young = tuple[tuple[str, Live], ...]
"""The victims too young to preempt (victims.protected) on the job's accelerator: why, and the placement."""
VictimPools = tuple[int, float, Young, dict[PoolState, list[tuple[float, int, str, str]]]]


def _victim_pools(st: PlanState, job: JobInfo, opt: ResolvedOption, need: int, nominal: bool) -> VictimPools | None:
    """Every victim the job may preempt for this option (None: none), as (the quota of its accelerator they
    free together, the hourly spend of its team's, the first one too young to preempt, the others by pool in
    order (victims.py): borrowers first, then least work lost, only its restart for one stopped at its next checkpoint
    (unless the job already runs: then they stop at once)).
    They depend on the job's team, priority, quota key and whether it is within nominal quota only, so jobs
    alike share them until the state changes (its version)."""
    acc = qkey(job, opt)
    now = any(s.kept for s in st.siblings_placed(job))     # a running preemptor's victims stop at once (`take`)
    key = (job.team, job.priority, acc, nominal, now)
    cached = st.victim_pools.get(key)
    if cached is not None and cached[0] == st.version:
        hit: VictimPools | None = cached[1]
        return hit
    groups = _victim_groups(st, job, opt, need, nominal)
    found: VictimPools | None = None
    if groups:
        live = st.live
        victims_all = [live[j] for ids, _, _ in groups for j in ids]
        by_pool: dict[PoolState, list[tuple[float, int, str, str]]] = {}
        young_ones: list[tuple[str, Live]] = []
        for ids, p, why in groups:
            for j in sorted(ids):
                lv = live[j]
                young, lost = _victim_facts(st, lv, now)
                if young is not None:   # another accelerator frees neither room nor quota the job needs
                    if lv.option.accelerator == opt.accelerator:
                        young_ones.append((young, lv))
                    continue
                by_pool.setdefault(lv.pool, []).append((lost, p, j, why))
        found = (sum(amount(lv.info, lv.option) for lv in victims_all if qkey(lv.info, lv.option) == acc),
                 sum(lv.hourly_usd for lv in victims_all if lv.info.team == job.team), tuple(young_ones), by_pool)
    st.victim_pools[key] = (st.version, found)
    return found


def _orders(st: PlanState, by_pool: dict[PoolState, list[tuple[float, int, str, str]]], cands: frozenset[PoolState],
            ps: PoolState, need: int) -> tuple[list[tuple[float, int, str, str]], ...]:
    """The victims a job may take for a gang on `ps` (those on `ps`, then those on pools it cannot use, which
    free only quota), in the two orders `_victims_for` tries: borrowers first, and the snuggest first. Jobs alike
    share `by_pool` and `cands` (`_victim_pools`, `candidate_set`), so their orders too, until the state changes."""
    key = ("orders", id(by_pool), id(cands), ps.pool.key, need)
    hit = st.victim_pools.get(key)
    if hit is not None and hit[0] == st.version:
        found: tuple[list[tuple[float, int, str, str]], ...] = hit[1]
        return found
    mine = _keyed(st, by_pool.get(ps, []), need)
    far = _foreign_keyed(st, by_pool, cands, need)
    # the victims on pools the job cannot use are most of them and the same for every pool: sorted once
    # (`_foreign_keyed`); sorting them again after this pool's few is a merge of two runs
    found = ([a for _, a in sorted(mine[0] + far[0])], [a for _, a in sorted(mine[1] + far[1])])
    st.victim_pools[key] = (st.version, found)
    return found


Victim = tuple[float, int, str, str]
Keyed = tuple[list[tuple[bool, Victim]], list[tuple[tuple[bool, bool, int], Victim]]]


def _keyed(st: PlanState, victims_: list[tuple[float, int, str, str]], need: int) -> Keyed:
    """Each victim with its key in the two orders of `_orders`: (not borrowing, victim) and (snug, victim). A victim
    tuple names its job, so no two keys tie unless their victims are equal: sorting the keyed pairs gives the
    order sorting by the key gives. Whether a team borrows is found once per team, quota key and priority."""
    live = st.live
    borrows: dict[tuple[str, str, int], bool] = {}
    by_borrowing: list[tuple[bool, Victim]] = []
    by_size: list[tuple[tuple[bool, bool, int], Victim]] = []
    for a in victims_:
        lv = live[a[2]]
        team, acc = lv.info.team, qkey(lv.info, lv.option)
        if (b := borrows.get((team, acc, lv.info.priority))) is None:
            b = borrows[(team, acc, lv.info.priority)] = borrows_past_new(st, team, acc, lv.info.priority)
        by_borrowing.append((not b, a))
        by_size.append((victims.snug(need, amount(lv.info, lv.option)), a))
    return by_borrowing, by_size


def _foreign_keyed(st: PlanState, by_pool: dict[PoolState, list[tuple[float, int, str, str]]],
                   cands: frozenset[PoolState], need: int) -> Keyed:
    """`_foreign`'s victims keyed as `_keyed` keys them, each order sorted; shared like `_orders`, for every pool."""
    key = ("foreign keyed", id(by_pool), id(cands), need)
    hit = st.victim_pools.get(key)
    if hit is None or hit[0] != st.version:
        by_borrowing, by_size = _keyed(st, _foreign(st, by_pool, cands), need)
        hit = st.victim_pools[key] = (st.version, (sorted(by_borrowing), sorted(by_size)))
    found: Keyed = hit[1]
    return found


def _foreign(st: PlanState, by_pool: dict[PoolState, list[tuple[float, int, str, str]]],
             cands: frozenset[PoolState]) -> list[tuple[float, int, str, str]]:
    """The victims on pools the job cannot use (they free only quota: victims.py), in order; shared like `_orders`."""
    key = ("foreign", id(by_pool), id(cands))
    hit = st.victim_pools.get(key)
    if hit is None or hit[0] != st.version:
        hit = st.victim_pools[key] = (st.version, sorted(a for pool, mine in by_pool.items() if pool not in cands
                                                         for a in mine))
    found: list[tuple[float, int, str, str]] = hit[1]
    return found


def _young_in_the_way(st: PlanState, job: JobInfo, opt: ResolvedOption, need: int, young: Young) -> str | None:
    """Why the first victim too young to preempt keeps the job waiting, where one does: it would free quota the
    job's team lacks (its quota key), or room on a pool the job could use that lacks room. None where only the
    budget lacks (no victim is evicted for budget) or the young ones free nothing the job lacks (before the
    forty-first session's review, such a victim was named as why the job waits)."""
    quota_short = st.quota.shortfall(job.team, qkey(job, opt), need) > 0
    cands = st.candidate_set(job, opt)
    for why, lv in young:
        if (quota_short and qkey(lv.info, lv.option) == qkey(job, opt)) or (
                lv.pool in cands and not _fits(st, job, opt, lv.pool)[0]):
            return why
    return None


def try_preempt(st: PlanState, job: JobInfo) -> bool:
    """Make room for `job` by preempting kept work (module docstring); True if it was placed."""
    best: tuple[tuple[object, ...], list[victims.Victim], ResolvedOption, PoolState] | None = None
    if not any(st.kept_by_team.values()):
        return False  # nothing is running: nothing to preempt
    memo = (job.team, job.priority, tuple(st.room_key(job, o) for o in job.options))
    if st.no_preempt.get(memo) == st.version:
        return False  # a job like this one found no victims, and nothing changed since
    for opt in job.options:
        need = amount(job, opt)
        acc = qkey(job, opt)
        nominal = not st.quota.needs_borrow(job.team, acc, need)   # fits its nominal (Kueue: may reclaim)
        found = _victim_pools(st, job, opt, need, nominal)
        if found is None:
            continue
        freed_quota, freed_usd, young, by_pool = found
        if st.quota.shortfall(job.team, acc, need) > freed_quota:
            continue    # all the victims together do not free the quota it lacks, on any pool
        if young and (why := _young_in_the_way(st, job, opt, need, young)) is not None:
            st.outcome.spared.setdefault(job.id, why)
        cands = st.candidate_set(job, opt)     # victims where the job cannot run free only quota (victims.py)
        for ps in _affordable(st, job, opt, st.budget_room(job.team, freed_usd)):
            if not (by_pool.get(ps) or _foreign(st, by_pool, cands)):
                continue
            for order in _orders(st, by_pool, cands, ps, need):
                chosen = _victims_for(st, job, opt, ps, order)
                if chosen:
                    key = rank(st, job, chosen, opt, ps)
                    if best is None or key < best[0]:
                        best = (key, chosen, opt, ps)
    if best is None:
        st.no_preempt[memo] = st.version
        return False
    wait = victims.cheaper_to_wait(st, job, best[2], best[1])
    if wait is not None:
        st.outcome.spared[job.id] = wait
        claim(st, job)      # the next job alike reckons past what it waits for
        return False
    st.outcome.spared.pop(job.id, None)
    return take(st, job, best[1], best[2], best[3])


def rank(st: PlanState, job: JobInfo, chosen: list[victims.Victim], opt: ResolvedOption,
         ps: PoolState) -> tuple[object, ...]:
    """How good a set of victims is, smallest best: a pool in the job's data_region first (the greedy's first
    preference: fewer victims never take the job out of its data region); then a set without a victim larger
    than twice the job's need (victims.py); then, planned from what runs, least work lost before fewest
    victims; from git alone, fewest victims first; then the option's order and the pool's (cheapest first)."""
    lost = sum(v.lost for v in chosen)
    first = (lost, len(chosen)) if st.fleet.live is not None else (len(chosen), lost)
    big = victims.oversized(st, [v.job for v in chosen], amount(job, opt), opt.accelerator)
    return (outside(job, ps), big, *first, opt.index, st.candidates(job, opt).index(ps), ps.pool.key)


def take(st: PlanState, job: JobInfo, chosen: list[victims.Victim], opt: ResolvedOption,
         ps: PoolState) -> bool:
    """Evict the chosen victims and place the job on `ps` with `opt` (the pool the victims free), recording
    each preemption, why, and when a victim stops at its next checkpoint; all put back (and False) if the job
    does not fit after all."""
    removed = [st.evict(c.job, stop=True) for c in chosen]
    # Not covered by the tests, but reached in runs: the victim search (`_fits`) counts units
    # reserved for another job as free, so it can choose victims whose room that job holds (docs/benchmarks.md,
    # thirtieth session: excluding them was measured and not kept); the job then waits, no victim stopped
    if not place_at(st, job, opt.index, ps, ""):  # pragma: no cover
        for lv in removed:
            st.put_back(lv)
        return False
    # A victim kept running until its checkpoint holds its quota and the units the job does not take until then
    # (`victims.hold_until_checkpoint`), unless the job already runs (a spread service's replica, which the loop
    # does not hold back): then its victims stop now. Its fellow victims that lose nothing by running on run on
    # with it and stop with it, as the loop has them (`victims.runs_on`), held the same.
    placed, runs = st.live[job.id], any(s.kept for s in st.siblings_placed(job))
    afters = [None if runs else victims.after_minutes(st, lv) for lv in removed]
    afters = [a if a is None or victims.hold_until_checkpoint(st, lv, placed) else None
              for lv, a in zip(removed, afters, strict=True)]
    last = max((a for a in afters if a is not None), default=None)
    held = next((c.job for c, a in zip(chosen, afters, strict=True) if a is not None and a == last), "")
    fellows = {i for i, lv in enumerate(removed) if last is not None and afters[i] is None
               and victims.runs_on(st, lv) and victims.hold_until_checkpoint(st, lv, placed)}
    by = job.parent     # a spread job's replica (`lang/r#0`) is named by its job, as the plan's JSON names it
    for i, ((job_id, why, _, _), after) in enumerate(zip(chosen, afters, strict=True)):
        when = "" if after is None else f"{UNTIL}{after:g} min, its units reserved for {by}"
        if i in fellows:
            after, when = last, (f"{WITH}{st.jobs[held].parent} runs to its checkpoint, {last:g} min, and stops with "
                                 f"it (it loses nothing by running on), its units reserved for {by}")
        st.outcome.preemptions.append(Preemption(job_id, job.id, f"preempted by {by} (priority {job.priority}): "
                                                 f"{why}{when}", after))
        st.failed.add(job_id)
    return True
