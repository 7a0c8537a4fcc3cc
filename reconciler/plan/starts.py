"""Every pending job's expected start (issue 22 item 3), from the final state of the run that made the plan;
reservations and backfill are reserve.py's.

Expected start (`annotate`, once on the final state): a reserved job starts at its reservation; any other
pending job at the earliest (over options and candidate pools) moment its gang fits once work ends (only work
that has not outrun its duration_hours: nothing says when a job past its duration will end, and counting it as
ending now told a job it would start within minutes, cycle after cycle, for hours), not
taking units reserved for another job (until that job's own expected end; backfill only where the job,
started then, ends by the reservation's start), not before its team's own
work on that accelerator has ended enough to give back the quota it lacks, and not before enough of the team's
spend has ended for its budget to pay for it (at the option's lowest price per accelerator). It is an estimate:
new work of a higher class, preemption and jobs that outrun their duration_hours move it. A job that waits rather
than preempt is told the start it decided on, and jobs of its class or lower reckon with its claim (claims.py).
The first `QUEUED` other jobs are reckoned in queue order, each claiming its start for those after it (as Slurm's
`squeue --start`: alike jobs queued together were all told the first one's start); the rest apart, alike jobs
sharing one reckoning (`memo`). Tried in the twenty-ninth session as reservations, before jobs that could preempt
claimed what they waited for: those ahead started by preempting, and the starts told were too late.

A reserved job starts at its reservation's start, or later where the final state says so (`_reserved`: work placed
after the reservation took quota it counts on, and the reason says so). A victim held until its checkpoint frees
what it holds then, and its preemptor ends that much later (drain.py; reservations are made without it, so a
reserved job that can start sooner elsewhere is reckoned as not reserved).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from ..resolve import run_hours
from .capacity import Gang, PoolState
from .claims import claim_at
from .drain import DRAINS
from .reasons import QUEUED_BEHIND
from .replicas import apart, waiting_replica
from .reserve import CREDIBLE, Found, _budget_free_at, _quota_free_at, earliest, end_hours, quota_hold_on
from .spend import SPENDS
from .state import JobInfo, PlanState
from .summary import node_numbers
from .types import Pending, Plan, Reservation


def annotate(st: PlanState, plan: Plan) -> Plan:
    """The plan with every pending job's expected start (hours from now, None: cannot tell) and its
    reservation, from the final state of the run that made it."""
    if not plan.pending:
        return plan
    cache: dict[object, object] = {CREDIBLE: True}   # running work past its duration_hours: no end to promise
    cache[SPENDS] = True     # jobs ahead spend their team's budget from their start (spend.py)
    if st.draining:
        cache[DRAINS] = True     # victims stop at their checkpoint, their preemptors start then (drain.py)
    kept = st.reserved, st.reservation_of, st.quota_holds
    try:
        return _annotate(st, plan, cache, _reserved(st, plan, cache))
    finally:
        st.reserved, st.reservation_of, st.quota_holds = kept


def _reserved(st: PlanState, plan: Plan, cache: dict[object, object]) -> dict[str, tuple[float | None, str]]:
    """Each reserved job's start as reckoned on the final state, by job, and why it is later than its reservation's
    ("" when it is not): a reservation is made when its class is placed, and holds units (and, for a job its quota
    blocks, quota), so what starts after it may still delay it (a lower class taking the team's quota that a
    job only room blocked then counts on: its start waits for the team's work to give it back, and the job
    cannot preempt it where its class may not). A reserved job that can start sooner on the final state, once
    victims held until their checkpoint stop (reservations are made without them), or where work that outlasts
    its start took its reserved units (`_taken`: a later move, `moves.eject_pairs`, put a job that never ends
    there), is reckoned, while the plan is annotated, as not reserved: in queue order with the rest
    (`_queued`), the jobs after it seeing what it starts on. Before the forty-second session's review a job was
    told 10 h on a node a job without an end then held, though another node freed at 5 h."""
    lifted = set()
    told: dict[str, tuple[float | None, str]] = {}
    for p in plan.pending:
        r = st.reservation_of.get(p.job)
        info = waiting_replica(st, st.fleet.by_job.get(p.job)) if r is not None else None
        if r is None or info is None or info.siblings:
            continue
        found = earliest(st, info, {k: True for k in (CREDIBLE, DRAINS) if k in cache}, quota_wait=True)
        if found is not None and found[0] < r.start_hours and (DRAINS in cache or _taken(st, r)):
            lifted.add(r.job)
        elif found is None or found[0] > r.start_hours:
            told[r.job] = (None if found is None else found[0], _later(st, info, r, found, cache))
    if lifted:
        st.reservation_of = {j: r for j, r in st.reservation_of.items() if j not in lifted}
        st.reserved = defaultdict(list, {k: [r for r in rs if r.job not in lifted] for k, rs in st.reserved.items()})
        st.quota_holds = defaultdict(list, {k: [r for r in rs if r.job not in lifted]
                                            for k, rs in st.quota_holds.items()})
    return told


def _taken(st: PlanState, r: Reservation) -> bool:
    """Whether work on the reservation's units outlasts its start on the final state (or never ends)."""
    mine = set(r.units)
    for j in st.on_pool.get(r.pool_key, ()):
        lv = st.live[j]
        if mine.intersection(lv.units) and ((e := end_hours(st, lv, True)) is None or e > r.start_hours):
            return True
    return False


def _later(st: PlanState, info: JobInfo, r: Reservation, found: Found | None,
           flags: dict[object, object]) -> str:
    """Why the reserved job `info` starts later than its reservation `r` (`found`: when it does; None: unknown)."""
    ps = st.pools[r.pool_key]
    opt = next((o for o in info.options if ps in st.candidate_set(info, o)), info.options[0])
    at = "it cannot tell when" if found is None else f"only in {found[0]:g} h"
    cache: dict[object, object] = {k: True for k in (CREDIBLE, DRAINS) if k in flags}
    quota = _quota_free_at(st, info, opt, cache)
    if quota is None or quota > r.start_hours:
        return (f"team {info.team}'s {opt.accelerator} quota admits it {at}, as the team's work ends, not at the "
                f"start of the units reserved for it ({r.start_hours:g} h): its reservation holds units, and work "
                "placed since uses that quota")
    spend = _budget_free_at(st, info, opt, cache)
    if spend is None or spend > r.start_hours:
        return (f"team {info.team}'s budget pays for it {at}, as the team's spend ends, not at the start of the "
                f"units reserved for it ({r.start_hours:g} h)")
    if (held := quota_hold_on(st, info, opt, r.start_hours)) is not None:
        return (f"started at {r.start_hours:g} h, when the units reserved for it are free, it would still run at "
                f"{held.start_hours:g} h, from which team {info.team}'s {opt.accelerator} quota is held for "
                f"{held.job}: it starts {at}")
    return f"the units reserved for it from {r.start_hours:g} h are free {at}"


def _annotate(st: PlanState, plan: Plan, cache: dict[object, object],
              told: dict[str, tuple[float | None, str]]) -> Plan:
    memo: dict[tuple[object, ...], float | None] = {}
    held: dict[tuple[object, ...], str] = {}    # `_held_from`, by the memo's key
    shapes: dict[int, int] = {}     # the options tuple's id -> the number of what the memo reads of the options
    numbers: dict[tuple[tuple[object, ...], ...], int] = {}
    out: list[Pending] = []
    renumber = node_numbers(st)
    held_memo = _HeldMemo()
    ahead = _queued(st, plan, cache)
    for p in plan.pending:
        info = waiting_replica(st, st.fleet.by_job.get(p.job))
        r = st.reservation_of.get(p.job)
        if r is not None:   # its own reservation; another's may keep it from room it fits now (a later start)
            why = _held_from(st, info, held_memo) if info is not None else ""
            units = (r.cluster, r.pool, _written(st, r, renumber)) if r.units else None
            start, late = told.get(p.job, (r.start_hours, ""))
            reasons = _told(p.reasons, why, late)
            out.append(Pending(p.job, reasons, p.group, None if start is None else round(start, 2), units))
            continue
        hours: float | None = None
        why = ""
        if p.job in ahead:
            hours = ahead[p.job]
            why = _held_from(st, info, held_memo) if info is not None else ""
        elif info is not None:
            if (shape := shapes.get(id(info.options))) is None:    # jobs with equal options share the tuple
                fields = tuple((o.accelerator, o.shape, o.slices, o.count, o.cpus, o.memory_gib, o.relative_speed)
                               for o in info.options)    # the speed too: how long it runs there (backfill)
                shape = shapes[id(info.options)] = numbers.setdefault(fields, len(numbers))
            key = (apart(st, info) or info.team, info.priority, info.job.duration_hours, info.job.replicas,
                   info.spot, info.pin, info.job.data_region, info.job.data_residency, info.job.kind, shape,
                   info.id in st.outcome.forced)   # a forced move may take reserved units now (backfill_until)
            if (hours := memo.get(key, -1.0)) == -1.0:     # -1: not reckoned yet (a start is never negative)
                found = earliest(st, info, cache, quota_wait=True)
                hours = memo[key] = None if found is None else round(found[0], 2)
            if (known := held.get(key)) is None:     # the key holds all `_held_from` reads of the job
                known = held[key] = _held_from(st, info, held_memo)
            why = known
        out.append(Pending(p.job, _told(p.reasons, why), p.group, hours))
    return Plan(plan.placements, tuple(out), plan.preemptions, plan.pools, plan.quotas, plan.cost, plan.live)


def _told(reasons: tuple[str, ...], held: str, *more: str) -> tuple[str, ...]:
    """A pending job's reasons with `held` (`_held_from`: whose hold keeps it out) and `more`, empty ones left
    out; with `held`, not also that it is lower in the queue than jobs that took the capacity (before the
    forty-first session's review, both were said of a job with room and quota that only a quota hold kept out)."""
    return (*(r for r in reasons if not held or r != QUEUED_BEHIND), *(x for x in (held, *more) if x))


QUEUED = 200
"""How many pending jobs, first in queue order, are reckoned one after another (`_queued`)."""


def _queued(st: PlanState, plan: Plan, cache: dict[object, object]) -> dict[str, float | None]:
    """The expected starts of the jobs that claimed what they wait for (the start each decided on), and of the
    first `QUEUED` other pending jobs without a reservation, in queue order (class, then largest work first),
    each reckoned after those before it, which claim what their starts count on (claims.py) while the rest are
    reckoned; those claims are gone again on return."""
    infos = [i for p in plan.pending if p.job not in st.reservation_of and p.job not in st.outcome.claims
             and (i := waiting_replica(st, st.fleet.by_job.get(p.job))) is not None and not i.siblings]
    claims = st.outcome.claims
    st.outcome.claims = dict(claims)
    try:
        out: dict[str, float | None] = {j: _still(st, j, c.start, cache) for j, c in claims.items()
                                        if j not in st.live}
        for info in heapq.nsmallest(QUEUED, infos, key=lambda i: (-i.priority, i.rank)):   # = sorted(...)[:QUEUED]
            found = earliest(st, info, cache, quota_wait=True)
            out[info.parent] = None if found is None else round(found[0], 2)
            if found is not None:
                claim_at(st, info, found)
        return out
    finally:
        st.outcome.claims = claims


def _still(st: PlanState, job: str, start: float, cache: dict[object, object]) -> float | None:
    """A claimed job's expected start: the start its claim counts on, or the later one the plan's final state gives
    it where work placed after its claim took what it counted on (its own claim is not among those `earliest`
    reckons with). Before the forty-first session's review, the claim's start was told though a job alike had
    since preempted the work it waited for and taken its node for 5 hours."""
    info = waiting_replica(st, st.fleet.by_job.get(job))
    found = earliest(st, info, cache, quota_wait=True) if info is not None else None
    return None if found is None else round(max(start, found[0]), 2)


def _written(st: PlanState, r: Reservation, renumber: dict[str, dict[int, int]]) -> tuple[int, ...]:
    """The reservation's units as the plan writes units: a pool of interchangeable nodes numbers its used nodes
    0..k-1 (summary.node_numbers), and a reserved node no job uses now takes the next numbers, in order."""
    numbers = renumber.get(r.pool_key)
    if numbers is None:
        return r.units
    fresh = iter(range(len(numbers), st.pools[r.pool_key].pool.max))
    return tuple(sorted(numbers[u] if u in numbers else next(fresh) for u in r.units))


@dataclass
class _HeldMemo:
    """What `_held_from` finds again for jobs alike while the plan is annotated (the state does not change then):
    per candidate list (by identity, as `candidates` keeps it), its pools with reservations in its order; per
    pool, gang, replicas and the reservations that bind the job there (their places in the pool's list), those
    that keep it out of room it fits now (empty: none do)."""

    reserved_in: dict[int, list[PoolState]] = field(default_factory=dict)
    blocking: dict[tuple[PoolState, Gang, int, tuple[int, ...]], tuple[Reservation, ...]] = \
        field(default_factory=dict)


def _held_from(st: PlanState, info: JobInfo, memo: _HeldMemo) -> str:
    """Why a reservation keeps the job out of room or quota it would fit in now ("" when none does)."""
    for opt in info.options:
        r = quota_hold_on(st, info, opt) if st.quota_holds else None
        if r is not None and r.team != info.team:
            return (f"the cohort's {opt.accelerator} lending is held for {r.job} (team {r.team}), expected to start "
                    f"in {r.start_hours:g} h: {_why(info, opt.relative_speed)}, so it cannot borrow it")
        if r is not None:
            return (f"team {info.team}'s {opt.accelerator} quota is held for {r.job}, expected to start in "
                    f"{r.start_hours:g} h: {_why(info, opt.relative_speed)}, so it cannot backfill it")
    replicas = info.job.replicas
    for opt in info.options:
        if not st.reserved:
            break
        order = st.candidates(info, opt)
        pools = memo.reserved_in.get(id(order))
        if pools is None:   # only pools with reservations, in the candidates' order
            pools = memo.reserved_in[id(order)] = [ps for ps in order if st.reserved.get(ps.pool.key)]
        for ps in pools:
            rs = st.reserved[ps.pool.key]
            binding = tuple(i for i, r in enumerate(rs) if st.may_not_use(info, r, opt) and r.units)
            if not binding:
                continue
            gang = st.gang(opt, ps)
            key = (ps, gang, replicas, binding)
            if (blocking := memo.blocking.get(key)) is None:
                blocking = memo.blocking[key] = _blocking(ps, gang, replicas, [rs[i] for i in binding])
            if blocking:
                held = "; ".join(f"{_units(r.units)} of {ps.pool.key} {'is' if len(r.units) == 1 else 'are'} "
                                 f"reserved for {r.job}, expected to start in {r.start_hours:g} h" for r in blocking)
                return f"{held}: {_why(info, opt.relative_speed)}, so it cannot backfill " \
                       f"{'it' if _one(blocking) else 'them'}"
    return ""


def _blocking(ps: PoolState, gang: Gang, replicas: int, binding: list[Reservation]) -> tuple[Reservation, ...]:
    """The reservations whose units keep the gang out of room it fits now: the first whose units alone do, else
    (they do only together) all that bind it; () when it does not fit now, or fits without their units."""
    if ps.find(gang, replicas) is None:
        return ()
    if ps.find(gang, replicas, exclude=frozenset(u for r in binding for u in r.units)) is not None:
        return ()
    alone = next((r for r in binding if ps.find(gang, replicas, exclude=frozenset(r.units)) is None), None)
    return (alone,) if alone is not None else tuple(binding)


def _units(units: tuple[int, ...]) -> str:
    return f"unit {units[0]}" if len(units) == 1 else f"units {', '.join(map(str, units))}"


def _one(rs: tuple[Reservation, ...]) -> bool:
    return len(rs) == 1 and len(rs[0].units) == 1


def _why(info: JobInfo, speed: float) -> str:
    """Why the job cannot take what a reservation holds: it would still run at the reservation's start, running
    at `speed` (`resolve.run_hours`)."""
    own = info.job.duration_hours
    if own is None:
        return "it has no duration_hours"
    if speed == 1.0:
        return f"its duration_hours {own:g} end after that"
    return f"it runs {run_hours(own, speed):.4g} h there ({own:g} h at relative_speed {speed:g}), ending after that"
