"""Reservations and backfill, and what every pending job's expected start reckons with (issue 22 item 3; the
starts themselves: starts.py). Pure: functions of a `PlanState`; time is hours from the plan's moment (the
snapshot's `now` with `--observed`, else when the plan is applied), so a plan needs no clock.

When running work ends (`end_hours`): `duration_hours` after it started (a kept job observed running, plan/live.py
`run_minutes`, has run that long already; any other placement counts its full duration); a job without
`duration_hours` never ends (as Slurm treats a job without a time limit). Reservations and expected starts
count only ends still to come (`CREDIBLE`): a job observed past its `duration_hours` is not counted as ending
now, since nothing says when it will (the preemption rule's `credible_earliest` reckons the same way).

Reservations (`hold`, called by greedy.py after each class's preemption step): the first blocked job of the class
in queue order (largest work first, ties by id) whose start can be told (not blocked by its budget) holds a
reservation. When only room blocks it (its quota would admit it): the pool, the units and the start at which its
gang fits once the work on that pool ends in end order (`earliest`), the earliest over its options and candidate
pools (ties: option index, then pool key). From then on a job of that class or lower may take those units only if
its run on the option it takes them with (`duration_hours` / its relative_speed, `resolve.run_hours`) ends by the
reservation's start (backfill, as Slurm's: `start <=`); a job without `duration_hours` never does
(`PlanState.backfill_until`, `reserved_units`), and a later start backfills only if the job, started then, still
ends by it (Slurm's reckoning). A higher class may take them (it comes first; the reserved job waits for it as for
any holder). Units outside the reservation stay free for anyone, so a reservation leaves idle only what the blocked
job will need, and holds them until its start: lower work cannot starve it. When its team's quota blocks it, the
hold is of quota (`quota_held`), and of the units its gang fits on at that start, which bind as a room-blocked
job's do (else other teams' long work took them while it waited for its quota, and its start slipped): at its start
(when the team's own work has ended enough, and a pool has room) the team's usage of that accelerator may be at
most what admits it, so the team's work of its class or lower that would still run then (or has no duration_hours)
waits; shorter work backfills. Where what it lacks is its cohort's lending (its team borrows, its borrowing limit
allows more, and the cohort has too little left to lend: a team with no quota of the accelerator borrows all of
it), its start also waits for the other teams of its lending domain to give lending back as their work ends (what a
borrower borrows, what a lender may lend more), and the hold is of the cohort's lending too (`Reservation.cohort`):
another team's work of its class or lower that would borrow the accelerator and still run at that start waits;
shorter work backfills; a team's use of its own nominal quota is never held (Kueue guarantees it), and running
borrowers are not evicted for it (reclaim is preemption's). A `duration_hours` is only compared and combined by + -
* / here, never converted or formatted: `fleet cost --history` relies on it (history_reuse.py).
"""

from __future__ import annotations

import copy
import heapq
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import replace
from operator import attrgetter

from ..resolve import ResolvedOption, run_hours
from . import drain, spend
from .capacity import Claim, Gang, PoolState
from .replicas import apart, held_by_siblings
from .state import JobInfo, Live, PlanState, amount, qkey
from .types import Reservation

INF = float("inf")
Event = tuple[float, int, str, tuple[int, ...], Gang | None]   # hours, 0 a job ends | 1 a reservation ends, id, units


Found = tuple[float, PoolState, tuple[int, ...], ResolvedOption]
"""When a job's gang fits (hours from now), the pool and units, and the option it fits with (`earliest`)."""
COHORT = "@cohort:"   # `PlanState.quota_holds` also lists each hold of a cohort's lending under (COHORT + domain, acc)
CREDIBLE = "credible"   # a cache holding this key reckons only ends still to come (`credible_earliest`)


def end_hours(st: PlanState, lv: Live, credible: bool = False) -> float | None:
    """Hours from now until the placement ends (module docstring); None: it never ends in this reckoning. A job
    that outran its duration_hours ends now, or, `credible`, never (nothing says when it will)."""
    hours = run_hours(lv.info.job.duration_hours, lv.option.relative_speed)
    if hours is None:
        return None
    live = st.fleet.live
    ran = live.run_minutes.get(lv.info.parent) if live is not None and lv.kept else None
    left = hours - (ran or 0.0) / 60.0
    return None if credible and left <= 0 else max(0.0, left)


def _end(st: PlanState, lv: Live, cache: dict[object, object]) -> float | None:
    """`end_hours` as a reckoning with `cache` counts it: a preemptor ends late by its held victims' wait (drain.py)."""
    end = end_hours(st, lv, CREDIBLE in cache)
    return end + drain.delay(st, lv.info.id, cache) if end is not None else end


def _events(st: PlanState, ps: PoolState, cache: dict[object, object]) -> list[Event]:
    """The placements on `ps` that end, and the reservations there that end, in time order."""
    key = ps.pool.key
    found: list[Event] | None = cache.get(key)  # type: ignore[assignment]
    if found is None:
        found = []
        for job_id in st.on_pool.get(key, ()):
            lv = st.live[job_id]
            end = _end(st, lv, cache)
            if end is not None:
                found.append((end, 0, job_id, lv.units, lv.gang))
        found += [(s.hours, 0, s.lv.info.id, s.units, s.lv.gang) for s in drain.on_pool(st, key, cache)]  # stopped
        for r in st.reserved.get(key, ()):
            if r.end_hours is not None:
                found.append((r.end_hours, 1, r.job, r.units, None))
        found.sort(key=lambda e: (e[0], e[1], e[2]))
        cache[key] = found
    return found


def _fits_at(st: PlanState, info: JobInfo, ps: PoolState, gang: Gang, opt: ResolvedOption, bound: float, floor: float,
             cache: dict[object, object]) -> tuple[float, tuple[int, ...]] | None:
    """The first moment (< `bound`, not before `floor`: its quota or budget frees then) the gang fits on `ps` as its
    work ends, and its units; None if never. Units reserved for jobs `info` may not use, or that a replica's
    siblings hold (`held_by_siblings`), stay out until those end; units it may backfill, from the moment it would
    no longer end by the reservation's start (`PlanState.backfill_until`). Found once per pool, gang, replicas,
    floor and holds (`cache`), cut to bounds."""
    held: dict[str, tuple[float, frozenset[int]]] = {}
    for r in st.reserved.get(ps.pool.key, ()):
        if (last := st.backfill_until(info, r, opt)) is not None:
            held[r.job] = (last, frozenset(r.units))
    held.update((who, (-INF, units)) for who, units in held_by_siblings(st, info, ps, opt.index).items())
    claims = claims_on(st, info, ps.pool.key) if st.outcome.claims else ()
    key = (ps.pool.key, gang, info.job.replicas, floor, tuple((who, last) for who, (last, _) in held.items()),
           tuple(c.job for c in claims))
    if key not in cache:
        cache[key] = _first_fit(st, ps, gang, info.job.replicas, held, floor, cache, claims)
    found: tuple[float, tuple[int, ...]] | None = cache[key]    # type: ignore[assignment]
    return found if found is not None and found[0] < bound else None


def claims_on(st: PlanState, info: JobInfo, key: str) -> tuple[Claim, ...]:
    """The claims on pool `key` that `info`'s start reckons with (claims.py): other jobs' of its class or higher,
    not placed in this run, in start order."""
    return tuple(sorted((c for c in st.outcome.claims.values() if c.pool_key == key and c.job != info.parent
                         and info.priority <= c.priority and c.job not in st.live), key=attrgetter("start", "job")))


def _first_fit(st: PlanState, ps: PoolState, gang: Gang, replicas: int,
               held: dict[str, tuple[float, frozenset[int]]], floor: float,
               cache: dict[object, object], claims: tuple[Claim, ...] = ()) -> tuple[float, tuple[int, ...]] | None:
    """`_fits_at`'s search: `held` maps a holder to the latest start at which its units may still be taken (-inf:
    never) and those units, until the holder ends. A fit found before `floor` starts at `floor` (work only ends
    meanwhile, so its units are still free then), and the holds are judged there. Each claim's gang takes its
    units from its start (once they are free) until its end."""
    scratch = copy.copy(ps)
    scratch.roomy = None
    scratch.free_acc, scratch.free_cpu, scratch.free_mem = list(ps.free_acc), list(ps.free_cpu), list(ps.free_mem)
    events = _events(st, ps, cache)
    waiting = list(claims)    # claims not started yet
    ending: list[tuple[float, str, Claim]] = []    # started claims' (end, job, claim), a heap
    i, t = 0, 0.0
    while True:
        start = max(t, floor)
        for c in [c for c in waiting if c.start <= start and scratch.take(c.units, c.gang)]:
            waiting.remove(c)
            if c.end is not None:
                heapq.heappush(ending, (c.end, c.job, c))
        exclude = frozenset().union(*(units for last, units in held.values() if start > last))
        units = scratch.find(gang, replicas, exclude=exclude)
        if units is not None:
            return start, units
        if ending and (i >= len(events) or ending[0][0] < events[i][0]):
            t, _, c = heapq.heappop(ending)
            scratch.release(c.units, c.gang)
            continue
        if i >= len(events):
            return None
        t, _, who, units_of, g = events[i]
        i += 1
        if g is not None:
            scratch.release(units_of, g)
        held.pop(who, None)   # a reservation ends, or a sibling


def earliest(st: PlanState, info: JobInfo, cache: dict[object, object], *, quota_wait: bool = False) -> Found | None:
    """The earliest (hours, pool, units, option) at which the job's gang fits (module docstring), over its options and
    their candidate pools; ties by option index, then pool key. With `quota_wait`, an option also waits for its
    team's own work on the accelerator to give back the quota it lacks."""
    best: Found | None = None
    for opt in info.options:
        floor = _quota_free_at(st, info, opt, cache) if quota_wait else 0.0
        spend = _budget_free_at(st, info, opt, cache)
        floor = None if floor is None or spend is None else max(floor, spend)
        floor = _past_hold(st, info, opt, floor) if floor is not None and quota_wait else floor
        if floor is None or (best is not None and floor >= best[0]):
            continue
        found = _option_earliest(st, info, opt, floor, cache)
        if found is not None and quota_wait and found[0] > floor and (then := _past_hold(st, info, opt, found[0])) \
                != found[0]:    # room puts its start later, into a hold: after the held jobs
            found = None if then is None else _option_earliest(st, info, opt, then, cache)
        if found is not None and (best is None or found[0] < best[0]):
            best = found
    return best


def _past_hold(st: PlanState, info: JobInfo, opt: ResolvedOption, at: float) -> float | None:
    """`at`, or, where a quota hold would keep the job out if it started then (`quota_hold_on`), when the held
    jobs end (None: one has no end). Before the forty-second session it was judged as if the job started now."""
    r = quota_hold_on(st, info, opt, at) if st.quota_holds else None
    if r is None:
        return at
    ends = [h.end_hours for h in st.quota_holds[(r.team, r.accelerator)] if h.job != info.parent]
    return None if None in ends else max([at, *(e for e in ends if e is not None)])


def credible_earliest(st: PlanState, info: JobInfo) -> float | None:
    """Hours until the job could start without preempting anyone, counting only running work that has not
    outrun its duration_hours (that work's end is not credible: it would put the start at now, every cycle):
    `earliest` with its team's quota and budget waited for. None: it cannot tell."""
    found = earliest(st, info, {CREDIBLE: True}, quota_wait=True)
    return None if found is None else found[0]


def _option_earliest(st: PlanState, info: JobInfo, opt: ResolvedOption, floor: float,
                     cache: dict[object, object]) -> Found | None:
    """The earliest (hours, pool, units, `opt`) of one option, not before `floor`: the first candidate pool (in order)
    with the least. It depends on the candidates (they fix the gangs), the replicas, the floor and the
    reservations on those candidates the job may not use (and until when it may backfill) only, so jobs alike
    share it (`cache`)."""
    cands = st.candidates(info, opt)
    mine = st.candidate_set(info, opt) if st.reserved else frozenset()
    binds = tuple((r.job, st.backfill_until(info, r, opt)) for r in st.reservation_of.values()
                  if r.units and st.pools.get(r.pool_key) in mine)     # what they leave the job, when
    claims = (info.priority, info.parent in st.outcome.claims and info.parent, len(st.outcome.claims)) \
        if st.outcome.claims else ()
    key = ("option", id(cands), info.job.replicas, floor, binds, apart(st, info), claims)   # `claims_on` reads
    if key in cache:     # (the option is this job's: jobs alike share the rest)
        hit: tuple[float, PoolState, tuple[int, ...]] | None = cache[key]   # type: ignore[assignment]
        return None if hit is None else (*hit, opt)
    best: tuple[float, PoolState, tuple[int, ...]] | None = None
    for ps in cands:
        bound = best[0] if best is not None else INF
        if floor >= bound:
            break
        found = _fits_at(st, info, ps, st.gang(opt, ps), opt, bound, floor, cache)
        if found is not None and max(floor, found[0]) < bound:
            best = (max(floor, found[0]), ps, found[1])
    cache[key] = best
    return None if best is None else (*best, opt)


def _quota_free_at(st: PlanState, info: JobInfo, opt: ResolvedOption, cache: dict[object, object]) -> float | None:
    """When the team's own work on the option's accelerator, and, where the cohort's lending is what it lacks
    (`_cohort_cap`), its cohort-mates' work, has ended enough to cover the quota the job lacks now (0.0: it
    lacks none; None: never, in this reckoning)."""
    found = _quota_cover(st, info, opt, cache)
    return None if found is None else found[0]


def _quota_cover(st: PlanState, info: JobInfo, opt: ResolvedOption,
                 cache: dict[object, object]) -> tuple[float, int, int] | None:
    """(hours, quota short now, of it what the cohort-mates' ends give back by then) of `_quota_free_at`."""
    acc, need = qkey(info, opt), amount(info, opt)
    known = ("cover", info.team, acc, need)    # what it reads of the job: the same for its team's jobs alike
    if known in cache:
        found: tuple[float, int, int] | None = cache[known]   # type: ignore[assignment]
        return found
    found = cache[known] = _cover(st, info, opt, acc, need, cache)
    return found


def _cover(st: PlanState, info: JobInfo, opt: ResolvedOption, acc: str, need: int,
           cache: dict[object, object]) -> tuple[float, int, int] | None:
    short = st.quota.shortfall(info.team, acc, need, allow_borrow=True)
    if not short:
        return 0.0, 0, 0
    ends: list[tuple[float, int]] | None = cache.get(("quota", info.team, acc))  # type: ignore[assignment]
    if ends is None:
        ends = cache["quota", info.team, acc] = sorted(
            [(e, amount(lv.info, lv.option)) for j in st.holding.get((info.team, acc), ())
             if (e := _end(st, lv := st.live[j], cache)) is not None] + drain.quota_ends(st, info.team, acc, cache))
    cap = _cohort_cap(st, info, opt, short)
    if not cap:
        at = _covered_at(ends, short)
        return None if at is None else (at, short, 0)
    merged: Merged | None = cache.get(("cohort", info.team, acc))  # type: ignore[assignment]
    if merged is None:
        merged = cache["cohort", info.team, acc] = _merged(ends, _lending_ends(st, info.team, acc, cache))
    times, own, lent = merged
    # what the ends give back only grows: the first end by which it covers the shortfall, by bisection
    k = bisect_left(range(len(times)), True, key=lambda i: own[i] + min(cap, lent[i]) >= short)
    return None if k == len(times) else (times[k], short, min(cap, lent[k], short))


Merged = tuple[list[float], list[int], list[int]]
"""Ends in order (hours), and after each what the team's own ends and its cohort-mates' have given back in all."""


def _merged(own_ends: Sequence[tuple[float, int]], mate_ends: Sequence[tuple[float, int]]) -> Merged:
    times: list[float] = []
    own: list[int] = []
    lent: list[int] = []
    mine = theirs = 0
    for end, back, is_own in sorted([(e, a, True) for e, a in own_ends] + [(e, a, False) for e, a in mate_ends]):
        mine, theirs = (mine + back, theirs) if is_own else (mine, theirs + back)
        times.append(end)
        own.append(mine)
        lent.append(theirs)
    return times, own, lent


def _cohort_cap(st: PlanState, info: JobInfo, opt: ResolvedOption, short: int) -> int:
    """How much of the job's quota shortfall `short` more lending by its cohort-mates could cover: what its
    team's borrowing limit still allows beyond what the cohort lends now. 0 when that limit binds, when the
    team is in no cohort, or when the job fits its team's nominal quota (a shortfall there is quota the team
    lent and others borrow: reclaiming it is preemption's business)."""
    team, acc = info.team, qkey(info, opt)
    q = st.quota
    if q.domain.get(team) is None:
        return 0
    n, b, _ = q.limits(team, acc)
    used = q.usage[(team, acc)]
    if used + amount(info, opt) <= n:
        return 0
    headroom = INF if b is None else b - max(0, used - n)
    return int(max(0, min(short, headroom - q.available_to_borrow(team, acc))))


def _lending_ends(st: PlanState, team: str, acc: str, cache: dict[object, object]) -> list[tuple[float, int]]:
    """When the other teams of `team`'s lending domain give back lending of `acc` as their work ends, and how
    much each end gives: a borrower's ends give back what it borrows, a lender's ends what it may lend more
    (up to its lending limit), in end order per team."""
    q = st.quota
    d = q.domain.get(team)
    out: list[tuple[float, int]] = []
    for mate in q.teams_of.get(d, ()) if d is not None else ():
        if mate == team:
            continue
        n, _, lend = q.limits(mate, acc)
        used = q.usage[(mate, acc)]
        gives = max(0, used - n) + max(0, min(lend, n)) - max(0, min(lend, n - min(used, n)))
        if gives <= 0:
            continue
        freed = 0
        ends = [(e, amount(lv.info, lv.option)) for j in st.holding.get((mate, acc), ())
                if (e := _end(st, lv := st.live[j], cache)) is not None]
        for e, a in sorted(ends + drain.quota_ends(st, mate, acc, cache)):
            back = min(a, gives - freed)
            if back > 0:
                out.append((e, back))
                freed += back
            if freed >= gives:
                break
    return out


def _budget_free_at(st: PlanState, info: JobInfo, opt: ResolvedOption, cache: dict[object, object]) -> float | None:
    """When the team's own spend has ended enough for its budget's pace to pay for the option at the lowest
    price per accelerator of its candidate pools (0.0: it can now; None: never, in this reckoning). The team's
    placements end as work ends (`end_hours`)."""
    cands = st.candidates(info, opt)
    if not cands:
        return 0.0
    claims = spend.ahead(st, info, cache)    # jobs ahead claim spend (spend.py): no two jobs alike then
    known: tuple[object, ...] = ("budget", info.parent if claims else info.team, id(cands), amount(info, opt),
                                 (len(st.outcome.claims), opt.relative_speed) if claims else 0)   # alike: the same
    if known in cache:
        found: float | None = cache[known]   # type: ignore[assignment]
        return found
    price: float | None = cache.get(("price", id(cands)))   # type: ignore[assignment]   # the list: `candidates`'
    if price is None:
        price = cache["price", id(cands)] = min(ps.unit_hourly_usd / ps.pool.unit_accelerators for ps in cands)
    lack = price * amount(info, opt) - st.budget_room(info.team)
    if lack <= 0 and lack + sum(h for _, _, h in claims) <= 0:
        cache[known] = 0.0
        return 0.0
    key = ("spend", info.team)
    ends: list[tuple[float, float]] | None = cache.get(key)  # type: ignore[assignment]
    if ends is None:
        ends = cache[key] = sorted([(e, lv.hourly_usd) for lv in st.live.values()
                                    if lv.info.team == info.team and (e := _end(st, lv, cache)) is not None]
                                   + drain.spend_ends(st, info.team, cache))
    hours = run_hours(info.job.duration_hours, opt.relative_speed)
    found = cache[known] = spend.covered(ends, claims, lack, hours) if claims else _covered_at(ends, lack)
    return found


def _covered_at(ends: Sequence[tuple[float, float]], lack: float) -> float | None:
    """The first end (hours) by which what the ends give back, in order, covers `lack`; None: never."""
    freed = 0.0
    for end, amount_back in ends:
        freed += amount_back
        if freed >= lack:
            return end
    return None


def _room_blocked(st: PlanState, info: JobInfo) -> bool:
    """Only room blocks the job: some option's quota admits it now and its team's budget would allow it."""
    return any(not st.quota.shortfall(info.team, qkey(info, o), amount(info, o), allow_borrow=True)
               for o in info.options) and _budget_covers(st, info)


def _budget_covers(st: PlanState, info: JobInfo) -> bool:
    """The team's budget pays for some option of the job now: a job its budget blocks holds no reservation."""
    return st.budget_left(info.team) > 0 and any(_budget_free_at(st, info, o, {}) == 0.0 for o in info.options)


def hold(st: PlanState, level: int, blocked: Iterable[JobInfo]) -> None:
    """Give the first blocked job of `blocked` (the jobs of class `level` that found no place) whose start can be
    told its reservation: units when only room blocks it, its team's quota when quota does (module docstring)."""
    if any(r.priority == level for r in st.reservation_of.values()):
        return   # the class holds one already (a run seeded with the default run's: improve.py)
    for info in sorted(blocked, key=attrgetter("rank")):
        if info.siblings or info.pin or info.parent in st.reservation_of or not _budget_covers(st, info):
            continue
        room = _room_blocked(st, info)
        found = earliest(st, info, {CREDIBLE: True}, quota_wait=not room)   # ends still to come
        if found is None or found[0] <= 0.0:
            continue   # never fits in this reckoning (holders without duration_hours), or fits now: no hold
        start, ps, units, opt = found
        hours = run_hours(info.job.duration_hours, opt.relative_speed)
        end = None if hours is None else start + hours
        if room:
            st.reserve(Reservation(info.parent, ps.pool.cluster, ps.pool.name, units, start, end, info.priority))
            return
        key = qkey(info, opt)
        cover = _quota_cover(st, info, opt, {CREDIBLE: True})
        short, lent = (cover[1], cover[2]) if cover is not None else (0, 0)
        limit = sum(amount(st.live[j].info, st.live[j].option) for j in st.holding.get((info.team, key), ())) \
            - (short - lent)
        cohort = (st.quota.domain.get(info.team) or "") if lent else ""
        _reserve(st, Reservation(info.parent, ps.pool.cluster, ps.pool.name, units, start, end, info.priority,
                                 info.team, key, limit, cohort))
        return


def _reserve(st: PlanState, r: Reservation) -> None:
    """Hold `r`; a hold of a cohort's lending is also listed under its domain (`COHORT`)."""
    st.reserve(r)
    if r.cohort:
        st.quota_holds[(COHORT + r.cohort, r.accelerator)].append(r)


def quota_held(st: PlanState, info: JobInfo, opt: ResolvedOption) -> bool:
    """A quota hold keeps the job out of the option (`quota_hold_on`)."""
    return quota_hold_on(st, info, opt) is not None


def quota_hold_on(st: PlanState, info: JobInfo, opt: ResolvedOption, at: float = 0.0) -> Reservation | None:
    """The quota hold that keeps the job out of the option, if one does: a hold for another job of its class or
    higher, not placed in this run, whose start the job would still run at, started `at` hours from now (or it
    has no duration_hours), and
    - of its own team on the accelerator: the team's usage at that start would then exceed what admits the
      held job;
    - of its cohort's lending (`Reservation.cohort`, another team of its lending domain): the job would borrow
      the accelerator, taking lending that the held job's start counts on."""
    key = qkey(info, opt)
    holds = st.quota_holds.get((info.team, key))
    if info.id in st.outcome.forced:   # running work that must move (sticky.py) is never held back
        return None
    hours = run_hours(info.job.duration_hours, opt.relative_speed)
    for r in holds or ():
        assert r.quota_limit is not None
        if r.job == info.parent or info.priority > r.priority or r.job in st.live \
                or (hours is not None and at + hours <= r.start_hours):
            continue
        then = sum(amount(lv.info, lv.option) for j in st.holding.get((info.team, key), ())
                   if (e := end_hours(st, lv := st.live[j])) is None or e > r.start_hours)
        if then + amount(info, opt) > r.quota_limit:
            return r
    d = st.quota.domain.get(info.team)
    for r in st.quota_holds.get((COHORT + d, key), ()) if d is not None else ():
        if r.team == info.team or info.priority > r.priority or r.job in st.live \
                or (hours is not None and at + hours <= r.start_hours):
            continue
        if st.quota.needs_borrow(info.team, key, amount(info, opt)):
            return r
    return None


def seed(st: PlanState, held: tuple[Reservation, ...]) -> None:
    """Hold another run's reservations from the start (improve.py: every run obeys the default run's)."""
    for r in held:
        _reserve(st, r)


def swap_reserved(st: PlanState, key: str, a: int, b: int) -> None:
    """Units `a` and `b` of pool `key` trade labels (moves.compact renumbers a node group's units)."""
    for i, r in enumerate(st.reserved.get(key, ())):
        if a in r.units or b in r.units:
            units = tuple(sorted(b if u == a else a if u == b else u for u in r.units))
            st.reserved[key][i] = st.reservation_of[r.job] = replace(r, units=units)


def held_back(st: PlanState, info: JobInfo) -> bool:
    """A quota hold bars every option of the job: it waits by design, whatever moves do (improve.py and moves.py
    do not try to make room for it)."""
    return bool(st.quota_holds) and all(quota_held(st, info, o) for o in info.options)


def exclude(st: PlanState, info: JobInfo, ps: PoolState, spread: bool, opt: ResolvedOption) -> frozenset[int]:
    """Units of `ps` that `info` may not take with `opt`: its siblings' (a spread replica) and reserved ones."""
    held = reserved_units(st, info, ps, opt) if st.reserved else frozenset()
    return st.sibling_units(info, ps) | held if spread else held


def reserved_units(st: PlanState, info: JobInfo, ps: PoolState, opt: ResolvedOption) -> frozenset[int]:
    """Units of `ps` that reservations keep from `info` on `opt` (how long it runs there: `backfill_until`)."""
    rs = st.reserved.get(ps.pool.key)
    if not rs:
        return frozenset()
    return frozenset(u for r in rs if st.may_not_use(info, r, opt) for u in r.units)


def held_for_others(st: PlanState, info: JobInfo, ps: PoolState) -> frozenset[int]:
    """Units of `ps` that any reservation of another waiting job holds, whatever its class or `info`'s duration
    (a re-pack saves money: it does not take units a waiting job is to start on, repack.py)."""
    return frozenset(u for r in st.reserved.get(ps.pool.key, ()) if r.job != info.parent and r.job not in st.live
                     for u in r.units)
