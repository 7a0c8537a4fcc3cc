"""Data locality (issue 11, defect 1): jobs place where their data is before jobs without a data region take
that site's capacity.

Within a priority class, before the class's passes A and B (place.py), the jobs with a `data_region` are
placed, in the class's order, only on pools in their data region (within nominal quota when the strategy
places nominal quota first). Jobs that find no room there go on with the rest of the class, where the
candidate key still prefers their region. A job without a data region may still land in any region, but no
longer takes the owned capacity of a site whose data-bound jobs then run elsewhere. First-fit decreasing
(the unimproved baseline of the improvement phase) keeps its plain order.

After the improvement phase's runs, `bring_home` moves each job still placed outside its data region into
it when the jobs without that data region that fill a pool there fit elsewhere (they may take another
option, say a TPU instead of the site's owned GPUs): the same work, less of it away from its data.

`state.outside` says whether a placement runs outside its job's data region (`outside_data_region`, the
flag of the plan's JSON, the cost report and the pull-request comment).
"""

from __future__ import annotations

from .capacity import PoolState
from .moves import compact, compact_usd, eject_and_insert
from .place import in_order
from .state import JobInfo, PlanState, outside, work


def data_region_first(st: PlanState, waiting: list[JobInfo], *, fair: bool) -> list[JobInfo]:
    """Place the class's data-bound jobs in their data region first; return the jobs still to place, in the
    order given."""
    local = [i for i in waiting if i.job.data_region is not None]
    if not local or st.strategy.first_fit:
        return waiting
    left = {i.id for i in in_order(st, local, allow_borrow=not st.strategy.nominal_first, fair=fair,
                                   region_only=True)}
    return [i for i in waiting if i.job.data_region is None or i.id in left]


def bring_home(st: PlanState, budget: int) -> bool:
    """For each job placed outside its data region (not kept; highest class, largest, id first), and each
    pool of its region it could use (candidate order): take it out with one placed job on that pool that is
    not bound to that region (not kept; largest first), or with all of them; place it at its best candidate
    and put the others back at theirs (`moves.eject_and_insert`: each must fit again, never leaving its own
    data region). Only jobs of the same class or lower, and of the default class or lower, are taken out:
    production and critical work is placed by the greedy's order and never displaced for locality (moved, it
    could end on quota a cohort-mate reclaims). Of the tries where the job lands in its region and no team
    borrows more quota than before, the cheapest (capacity cost) is kept; else
    the state is restored exactly. Work is unchanged and work outside data regions falls. At most `budget`
    tries. Returns whether anything changed."""
    changed = False
    attempts = 0
    every_pool = list(st.pools.values())
    prio = st.fleet.prio
    movable = next(c.value for c in prio.classes if c.name == prio.default)
    away = sorted((lv.info for lv in st.live.values() if not lv.kept and outside(lv.info, lv.pool)),
                  key=lambda i: (-i.priority, -work(i), i.id))
    for info in away:
        home = [ps for opt in info.options for ps in st.candidates(info, opt) if not outside(info, ps)]
        tries: list[list[str]] = []
        for ps in dict.fromkeys(home):
            others = sorted((lv for lv in st.live.values() if lv.pool is ps and not lv.kept
                             and lv.info.job.data_region != ps.pool.region
                             and lv.info.priority <= min(info.priority, movable)),
                            key=lambda lv: (-work(lv.info), lv.info.id))
            tries += [[lv.info.id] for lv in others] + ([[lv.info.id for lv in others]] if len(others) > 1 else [])
        best: tuple[float, int] | None = None
        for k, move in enumerate(tries[: max(0, budget - attempts)]):
            attempts += 1
            cost = _try_home(st, info, move, every_pool, keep=False)
            if cost is not None and (best is None or cost < best[0]):
                best = (cost, k)
        if best is not None and _try_home(st, info, tries[best[1]], every_pool, keep=True) is not None:
            changed = True
    return changed


def _try_home(st: PlanState, info: JobInfo, move: list[str], pools: list[PoolState], *, keep: bool) -> float | None:
    """One try of `bring_home`: the capacity cost after it if the job lands in its region (None if not);
    the state is restored unless `keep`."""
    borrowed = borrowed_total(st)
    lv = st.evict(info.id)
    out = [st.live[j] for j in move]
    found: list[float] = []

    def accept(_: dict[int, int]) -> bool:
        if outside(info, st.live[info.id].pool) or borrowed_total(st) > borrowed:
            return False
        found.append(compact_usd(st, pools))
        return keep

    if eject_and_insert(st, info, out, keep=set(move), fill=False, accept=accept):
        compact(st, pools)
        return found[0]
    st.put_back(lv)
    return found[0] if found else None


def borrowed_total(st: PlanState) -> int:
    """Quota borrowed over all teams and accelerators (usage above nominal)."""
    q = st.quota
    return sum(max(0, used - q.limits(team, acc)[0]) for (team, acc), used in q.usage.items())
