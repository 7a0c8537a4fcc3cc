"""Steps 3-4 of the planner: the queue order and placing one job at its best candidate, on a `PlanState`.

A job takes the best candidate over its options and the pools that can hold it, by the key
(outside data_region, new spend per unit of work, capacity preference, attributed $ per unit of work,
option index, cluster/pool): cheapest useful work first, already-paid capacity first.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from operator import attrgetter

from ..resolve import ResolvedOption
from .capacity import PoolState
from .reserve import exclude, held_for_others, quota_held
from .spread import domain
from .state import Choice, JobInfo, PlanState, amount, outside, qkey


def best(st: PlanState, info: JobInfo, *, allow_borrow: bool, region_only: bool = False,
         avoid: set[str] | None = None) -> Choice | None:
    """The best (pool, option, units) for the job now, by the key in the module docstring.

    Candidates come in static order (locality, list price per accelerator, preference). The attributed
    cost of a pool (price per accelerator x accelerators taken) is known before `find` and rises along
    that order (within the data region, then outside it); it is also the least new spend the pool could
    cost. So the first pool over the team's budget ends the search, and once one pool fits by opening
    units, a later pool whose cost is no lower can only win by fitting without opening any: the search
    then visits only the pools of `roomy` (opened units with free accelerators), in the same order.
    With `region_only` (locality.py, and a replica of a default spread: `try_place`), only pools in the
    job's data_region are candidates. A spread replica (spread.py) skips pools in the domains of `avoid`,
    pools where a sibling runs another option, and its siblings' units."""
    region = info.job.data_region
    if region_only and region is None:
        return None
    memo = (info.id, allow_borrow, region_only, frozenset(avoid) if avoid else None)
    if st.no_fit.get(memo) == st.loosened:
        return None     # it found nothing, and nothing has been freed since (`PlanState.no_fit`)
    found = _search(st, info, allow_borrow=allow_borrow, region_only=region_only, avoid=avoid)
    if found is None:
        st.no_fit[memo] = st.loosened
    return found


def _search(st: PlanState, info: JobInfo, *, allow_borrow: bool, region_only: bool,
            avoid: set[str] | None) -> Choice | None:
    region = info.job.data_region
    if st.strategy.first_fit:
        return first_fit(st, info, allow_borrow=allow_borrow, avoid=avoid, region_only=region_only)
    best_key: tuple[object, ...] | None = None
    found: Choice | None = None
    replicas = info.job.replicas
    pref = st.fleet.pref
    spread = bool(info.siblings)
    budget = st.budget_room(info.team)
    if (lows := st.cheapest.get(info.id)) is None:
        lows = st.cheapest[info.id] = tuple(cheapest(st, info, o) for o in info.options)
    for opt, low in zip(info.options, lows, strict=True):
        n_acc = amount(info, opt)
        if region is None and low * n_acc > budget:
            continue  # even the cheapest pool per accelerator is over the team's budget (most waiting jobs)
        if st.quota.shortfall(info.team, qkey(info, opt), n_acc, allow_borrow=allow_borrow) \
                or (st.quota_holds and quota_held(st, info, opt)):
            continue
        room_key = st.room_key(info, opt)
        if room_key in st.no_room or (region_only and room_key in st.no_home):
            continue
        any_room = over_budget = away = False
        least_new = float("inf")   # the least new spend of this option so far
        cands, pos = st.live_candidates(info, opt, room_key)
        if cands and cands[0][2] * n_acc > budget and region is None:
            continue  # the same, over the pools not full
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
            if region_only and ps.pool.region != region:
                away = True   # not "no room": pools outside the region were not searched
                if rest is None:
                    break   # candidates come in-region first
                continue
            cost = per_acc * gang.accelerators * mult * replicas
            if cost > budget:
                over_budget = True
                if region is None:
                    break
                continue
            if cost >= least_new and rest is None and region is None:
                roomy = st.roomy[opt.accelerator]
                if len(roomy) < n - k:
                    rest = sorted((j for r in roomy if (j := pos.get(r, -1)) >= k), reverse=True)
                    continue
            if not ps.may_fit(gang, replicas):
                full += ps.is_full()
                continue
            if cost >= least_new and not ps.fits_without_opening(gang, replicas):
                continue
            if spread and off_spread(st, info, ps, opt, avoid):
                continue
            units = ps.find(gang, replicas, exclude=exclude(st, info, ps, spread, opt))
            if units is None:
                continue
            any_room = True
            new_spend = ps.new_units(units) * ps.unit_hourly_usd
            key = (region is not None and ps.pool.region != region, new_spend / opt.relative_speed,
                   pref.get(ps.pool.capacity, 99), cost / opt.relative_speed, opt.index, ps.pool.key)
            if best_key is None or key < best_key:
                best_key, found = key, (ps, opt, units)
            if new_spend == 0 and pref.get(ps.pool.capacity, 99) <= best_pref(st, info, opt, room_key):
                break  # later pools of this option are no cheaper per unit of work and no better paid
            least_new = min(least_new, new_spend)
        if not any_room and not over_budget and not spread:   # a replica's filters are not "no room"
            (st.no_home if away else st.no_room).add(room_key)
        if full > 8 and full * 4 > n:
            st.live_cands.pop(room_key, None)  # rebuild without the pools that filled up
    return found


def cheapest(st: PlanState, info: JobInfo, opt: ResolvedOption) -> float:
    """The lowest price per accelerator among the option's candidate pools (static; inf if none): for a job with
    no data_region the first candidate's, the least any pool not yet full can ask (`_search`'s budget test)."""
    cands = st.candidates(info, opt)
    return cands[0].unit_hourly_usd / cands[0].pool.unit_accelerators if cands else float("inf")


def best_pref(st: PlanState, info: JobInfo, opt: ResolvedOption, key: tuple[object, ...]) -> int:
    """The best rank in `capacity_preference` among the option's candidate pools (static): a pool that fits
    without new spend ends the search only at that rank. An open on-demand node with room costs nothing new,
    and neither does an idle owned or reserved one listed at a higher price: the prepaid one wins (issue 22).
    `key`: the option's `room_key` (`best` has it)."""
    found = st.best_prefs.get(key)
    if found is None:
        pref = st.fleet.pref
        found = st.best_prefs[key] = min((pref.get(ps.pool.capacity, 99) for ps in st.candidates(info, opt)),
                                         default=99)
    return found


def off_spread(st: PlanState, info: JobInfo, ps: PoolState, opt: ResolvedOption, avoid: set[str] | None) -> bool:
    """The pool is not for this spread replica now: in a domain of `avoid`, or a sibling runs another option
    there."""
    if avoid and domain(ps.pool, info.spread) in avoid:
        return True
    return any(lv.pool is ps and lv.option.index != opt.index for lv in st.siblings_placed(info))


def first_fit(st: PlanState, info: JobInfo, *, allow_borrow: bool, avoid: set[str] | None = None,
              region_only: bool = False) -> Choice | None:
    """First-fit decreasing's choice: the first option with quota, the first candidate pool (static
    order) within the team's budget that has room, its lowest-index units; with `region_only`, only pools
    in the job's data_region."""
    replicas = info.job.replicas
    spread = bool(info.siblings)
    for opt in info.options:
        if st.quota.shortfall(info.team, qkey(info, opt), amount(info, opt), allow_borrow=allow_borrow) \
                or (st.quota_holds and quota_held(st, info, opt)):
            continue
        budget = st.budget_room(info.team)
        for ps, gang, per_acc, mult in st.live_candidates(info, opt)[0]:
            if region_only and outside(info, ps):
                continue
            if per_acc * gang.accelerators * mult * replicas > budget:
                continue
            if spread and off_spread(st, info, ps, opt, avoid):
                continue
            units = ps.find(gang, replicas, first_fit=True, exclude=exclude(st, info, ps, spread, opt)) \
                if ps.may_fit(gang, replicas) else None
            if units is not None:
                return ps, opt, units
    return None


def try_place(st: PlanState, info: JobInfo, *, allow_borrow: bool, status_reason: str = "",
              defer_borrowing: bool = False, region_only: bool = False) -> bool:
    """Place the job at its best candidate. With `defer_borrowing` (pass A), a job whose best candidate
    needs borrowed quota waits for pass B instead of settling for a dearer option within its nominal."""
    if defer_borrowing and all(st.quota.needs_borrow(info.team, qkey(info, o), amount(info, o)) for o in info.options):
        return False   # every option needs borrowing: pass B
    borrow = allow_borrow or defer_borrowing
    if info.siblings:   # a spread replica: first away from its siblings' domains (spread.py)
        avoid, may_join = st.spread_avoid(info)
        found = None
        if avoid and not info.hard and info.job.data_region is not None and not region_only:
            # the default spread yields to the job's data_region: a pool there, in another domain if one has
            # room, before any pool outside it (a rule, `spread:` in the job file, does not yield)
            found = best(st, info, allow_borrow=borrow, region_only=True, avoid=avoid) \
                or best(st, info, allow_borrow=borrow, region_only=True)
        if found is None:
            found = best(st, info, allow_borrow=borrow, region_only=region_only, avoid=avoid)
        if found is None and avoid and may_join:
            found = best(st, info, allow_borrow=borrow, region_only=region_only)
    else:
        found = best(st, info, allow_borrow=borrow, region_only=region_only)
    if found is None:
        return False
    ps, opt, units = found
    if defer_borrowing and st.quota.needs_borrow(info.team, qkey(info, opt), amount(info, opt)):
        return False
    ps.find(st.gang(opt, ps), info.job.replicas, dry_run=False, first_fit=st.strategy.first_fit,
            exclude=exclude(st, info, ps, bool(info.siblings), opt))
    st.commit(info, ps, opt, units, kept=False, reason=status_reason)
    return True


def place_at(st: PlanState, info: JobInfo, opt_index: int, ps: PoolState, reason: str, *,
             keep_reserved: bool = False) -> bool:
    """Place the job with this option on this pool (best-fit units), under the greedy's checks: the pool is a
    candidate of the option, the team's quota (borrowing allowed) and its budget. False if it does not fit.
    `keep_reserved`: not on units any other waiting job's reservation holds, whatever its class (a re-pack)."""
    opt = info.options[opt_index]
    replicas = info.job.replicas
    if st.quota.shortfall(info.team, qkey(info, opt), amount(info, opt), allow_borrow=True) \
            or (st.quota_holds and quota_held(st, info, opt)):
        return False
    if st.spread_blocks(info, ps, opt):
        return False   # moves never put every replica of a spread job in one domain
    gang = st.gang(opt, ps)
    if not ps.may_fit(gang, replicas):
        return False
    held = exclude(st, info, ps, bool(info.siblings), opt)
    if keep_reserved:
        held |= held_for_others(st, info, ps)
    units = ps.find(gang, replicas, exclude=held)
    if units is None or st.attributed(ps, gang, units) > st.budget_room(info.team):
        return False
    ps.find(gang, replicas, dry_run=False, exclude=held)
    st.commit(info, ps, opt, units, kept=False, reason=reason)
    return True


def in_order(st: PlanState, infos: list[JobInfo], *, allow_borrow: bool, fair: bool,
             region_only: bool = False) -> list[JobInfo]:
    """Place `infos`, each team's jobs largest first (first-fit decreasing: big gangs before the small
    ones that would strand the capacity they need), then by id; with `fair`, teams take turns in
    weighted-DRF order (lowest dominant share next), else all jobs go largest first. Pass A
    (`allow_borrow` False) defers jobs that would borrow; `region_only` places only in the job's data_region.
    Returns the ones that did not fit, by id."""
    size = attrgetter("rank")     # the whole work, then id (a spread job's replicas: its whole work, together)
    by_id = attrgetter("id")
    left: list[JobInfo] = []
    defer = not allow_borrow
    if not fair:
        for info in sorted(infos, key=size):
            if not try_place(st, info, allow_borrow=allow_borrow, defer_borrowing=defer, region_only=region_only):
                left.append(info)
        return sorted(left, key=by_id)
    per_team: dict[str, list[JobInfo]] = defaultdict(list)
    for info in sorted(infos, key=size, reverse=True):   # popped from the end
        per_team[info.team].append(info)
    heap = [(st.share(t), t) for t in sorted(per_team)]
    heapq.heapify(heap)
    while heap:
        _, team = heapq.heappop(heap)
        info = per_team[team].pop()
        if not try_place(st, info, allow_borrow=allow_borrow, defer_borrowing=defer, region_only=region_only):
            left.append(info)
        if per_team[team]:
            heapq.heappush(heap, (st.share(team), team))
    return sorted(left, key=by_id)
