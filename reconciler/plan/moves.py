"""The moves of the improvement phase (improve.py), functions of one `PlanState`: the one eject-and-insert
(`eject_and_insert`, which improve.py's insert_pending and reduce_cost use too), relocation of a placed job
to its cheapest candidate, compaction of units, and ejection of one or two placed jobs to admit a pending
one when that adds work by the phase's order (work per priority class, highest first), even if an ejected
job then waits.

Every move is all-or-nothing: it is kept only if it strictly improves the plan by that order (more work in
the highest class where the work changes; or the same work in every class at an hourly capacity cost lower
by more than a micro-dollar), else the state is restored exactly (pool targets, every job on its old units).
Moves never touch a job kept from the base, never leave pending a job that had to move from the base
(`forced`), one that moved off a draining cluster, or one that preempted running work, and place every job
through the same checks as the greedy (candidate pools, quota with borrowing, the team's budget, gang
shapes), so every rule still holds; a job placed within its data region is never moved out of it.

Deterministic: candidates, jobs and pairs are visited in fixed orders with explicit tie-breaks; each kind of
move makes at most `budget` attempts per call.
"""

from __future__ import annotations

from collections.abc import Callable

from .capacity import PoolState
from .place import place_at, try_place
from .reserve import exclude, held_back, swap_reserved
from .spread import split_base
from .state import JobInfo, Live, PlanState, amount, outside, qkey, work
from .types import EPS_USD, micro_usd


def reach(st: PlanState, infos: list[JobInfo]) -> list[PoolState]:
    """The pools these jobs could be placed on (every candidate of every option) and their current pools, in
    key order: the only pools a move of these jobs can change."""
    found: dict[str, PoolState] = {}
    for info in infos:
        found.update(st.reach(info))
        if (lv := st.live.get(info.id)) is not None:
            found[lv.pool.pool.key] = lv.pool
    return [found[key] for key in sorted(found)]


def compact_usd(st: PlanState, pools: list[PoolState]) -> float:
    """Hourly cost of these pools: each pays for max(min, used units) units (`PoolState.paid`; a free unit
    below a used one is not paid, so `compact` renumbers without changing this cost)."""
    return sum(ps.paid() * ps.unit_hourly_usd for ps in pools)


def frees_unit(st: PlanState, out: list[Live]) -> bool:
    """Whether taking `out` out lowers the compacted cost (`compact_usd`): some unit of theirs becomes entirely
    free in a pool that uses more units than its min. Compacted cost never falls
    when jobs are added, so a move that takes `out` out and puts them back can only lower the cost if this
    holds: a cheap test that skips hopeless cost moves."""
    freed: dict[str, dict[int, int]] = {}
    for lv in out:
        mine = freed.setdefault(lv.pool.pool.key, {})
        for u in lv.units:
            mine[u] = mine.get(u, 0) + lv.gang.accelerators
    for key, units in sorted(freed.items()):
        ps = st.pools[key]
        full = ps.pool.unit_accelerators
        if any(ps.free_acc[u] + n == full for u, n in units.items()) and \
                ps.used_units() > ps.pool.min:
            return True
    return False


def compact(st: PlanState, pools: list[PoolState]) -> bool:
    """Renumber units: while a pool has an entirely free unit below its highest used one, and that top unit
    holds no kept job nor a victim running until its checkpoint, every job on the top unit moves its replica
    there (the same capacity, and a job has no other replica on a free unit, so replicas stay on distinct
    units); then the free units at the top close. Placements, work and options are unchanged; the pool's
    target falls to `compact_usd`'s count. Returns whether anything moved."""
    changed = False
    for ps in pools:
        full = ps.pool.unit_accelerators
        on_unit: dict[int, list[str]] = {}
        for job_id, lv in sorted(st.live.items()):
            if lv.pool is ps:
                for u in lv.units:
                    on_unit.setdefault(u, []).append(job_id)
        # a victim running until its checkpoint (victims.hold_until_checkpoint) stays on its units, as kept work
        draining = {u for lv in st.draining.values() if lv.pool is ps for u in lv.units}
        while True:
            used = [i for i, f in enumerate(ps.free_acc) if f < full and i not in ps.blocked]   # failed: no job
            if not used:
                break
            top = used[-1]
            hole = next((i for i in range(top) if ps.free_acc[i] == full), None)
            ids = on_unit.get(top, [])
            if hole is None or top in draining or any(st.live[j].kept for j in ids):
                break
            for job_id in ids:
                lv = st.evict(job_id)
                units = tuple(sorted(hole if u == top else u for u in lv.units))
                if not ps.take(units, lv.gang):   # pragma: no cover - the hole is entirely free
                    raise RuntimeError(f"planner: could not compact {job_id}")
                st.commit(lv.info, ps, lv.option, units, kept=False, reason=lv.reason, gang=lv.gang)
            on_unit[hole] = on_unit.pop(top)
            swap_reserved(st, ps.pool.key, hole, top)   # a reservation keeps the units it meant (reserve.py)
            st.loosened += 1      # units it held may be free for others now (`PlanState.no_fit`)
            changed = True
        ps.trim(0)
    return changed


def eject(st: PlanState, out: list[Live], pools: list[PoolState]) -> list[tuple[PoolState, int]]:
    """Take `out` out and close the units left empty at the top of `pools` (so that opening them again counts
    as new spend). Returns the pools' targets before, for `restore`."""
    targets = [(ps, ps.target) for ps in pools]
    for lv in out:
        st.evict(lv.info.id)
    for ps in pools:
        ps.trim(0)
    return targets


def restore(st: PlanState, placed: list[str], out: list[Live], targets: list[tuple[PoolState, int]]) -> None:
    """Undo a move exactly: evict what it placed, bring the pools back to their targets, and put every job of
    `out` back on its old units."""
    for job_id in placed:
        st.evict(job_id)
    for ps, target in targets:
        ps.trim(target)
        ps.open_to(target)
    for lv in out:
        st.put_back(lv)


def sticky(st: PlanState) -> set[str]:
    """Jobs a move must not leave pending: those that had to move from the base, those that moved off a
    draining cluster (sticky.py: running work, which a kept placement there would have let run), those re-created
    for their changed pods where they fit (sticky.py `_respec_elsewhere`: running work, kept as it runs had it not
    moved), and those that preempted."""
    draining = {bp.job for bp in split_base(st.fleet, st.base)
                if (ps := st.pools.get(f"{bp.cluster}/{bp.pool}")) is not None and ps.pool.status == "draining"}
    return set(st.outcome.forced) | draining | set(st.outcome.restarts) | {p.by for p in st.outcome.preemptions}


# -- cost: relocation ------------------------------------------------------------------------------------------

def relocate(st: PlanState, budget: int) -> bool:
    """Move single placed jobs (not kept) to their cheapest place. For each job, dearest attributed cost
    first (ties by id): take it out, try every (option, candidate pool) and keep the one giving the lowest
    capacity cost of the pools it reaches (ties: option index, then pool key); the move is kept if that cost
    is lower than before the move by more than a micro-dollar per hour, else the job goes back to its units.
    Jobs whose removal frees no unit (`frees_unit`) are skipped: no place can lower the cost.
    Costs are compacted ones (`compact_usd`), and an accepted move compacts its pools. The set of
    placed jobs never changes, so neither does the work; the cost only falls. Unlike the greedy's
    key (new spend per unit of work), this compares absolute cost, which is the objective once the work is
    fixed. At most `budget` jobs tried. Returns whether anything changed."""
    changed = False
    took = {p.by for p in st.outcome.preemptions}   # a preemptor stays where its victims made room (victims.py)
    took |= set(st.outcome.restarts)                 # a re-created job where its new pods fit (sticky.py): its reason
    jobs = sorted((lv for lv in st.live.values() if not lv.kept and lv.info.id not in took),
                  key=lambda lv: (-lv.hourly_usd, lv.info.id))
    for lv in jobs[:budget]:
        info = lv.info
        if st.live.get(info.id) is not lv or not frees_unit(st, [lv]):
            continue   # moved by compaction (visited again next time), or no unit to close
        pools = reach(st, [info])
        before = compact_usd(st, pools)
        targets = eject(st, [lv], pools)
        trimmed = {ps.pool.key: ps.target for ps in pools}
        best: tuple[float, int, str] | None = None
        away = outside(info, lv.pool)
        for opt in info.options:
            for ps in st.candidates(info, opt):
                if (outside(info, ps) and not away) or not place_at(st, info, opt.index, ps, lv.reason):
                    continue
                cost = compact_usd(st, pools)
                st.evict(info.id)
                ps.trim(trimmed[ps.pool.key])
                key = (micro_usd(cost), opt.index, ps.pool.key)
                if best is None or key < best:
                    best = key
        if best is not None and best[0] < before - EPS_USD:
            ps = st.pools[best[2]]
            if place_at(st, info, best[1], ps, lv.reason):
                compact(st, pools)
                changed = True
                continue
        restore(st, [], [lv], targets)
    return changed


# -- work: ejection ------------------------------------------------------------------------------------------

def levels(st: PlanState) -> list[int]:
    return sorted({i.priority for i in st.jobs.values()}, reverse=True)


def better(order: list[int], gained: dict[int, int]) -> int:
    """+1 if the work gained per class (highest class first) is lexicographically positive, -1 if negative,
    0 if it is zero in every class."""
    for level in order:
        g = gained.get(level, 0)
        if g:
            return 1 if g > 0 else -1
    return 0


def eject_and_insert(st: PlanState, info: JobInfo | None, out: list[Live], *, keep: set[str], fill: bool,
                     accept: Callable[[dict[int, int]], bool], hopeless: Callable[[], bool] | None = None) -> bool:
    """The one eject-and-insert move. Take `out` out and close the units that leaves empty at the top of their
    pools (so that taking them again counts as new spend); place `info` (if any) at its best candidate; put
    `out` back largest first (ties by id), each at its best candidate: a job of `keep` must fit again, others
    may wait, and none may leave its data region; with `fill`, then place other pending jobs that could use
    the pools involved (highest class, largest, id first). `accept(gained)` (work gained per class, negative
    where an ejected job now waits) decides on the result; else the state is restored exactly (pool targets,
    every job of `out` on its old units). `hopeless`, asked after each job of `out` is put back while others
    are still out, may stop the move there (restored the same way): the caller's proof that `accept` would
    refuse whatever the rest did (`improve.repack`: compacted cost only rises as jobs are added). Returns
    whether the move was kept."""
    pools = reach(st, ([info] if info else []) + [lv.info for lv in out])
    targets = eject(st, out, pools)
    placed: list[str] = []
    gained: dict[int, int] = {}

    def add(job: JobInfo, sign: int) -> None:
        gained[job.priority] = gained.get(job.priority, 0) + sign * work(job)

    forced = st.outcome.forced
    ok = info is None or try_place(st, info, allow_borrow=True, status_reason=forced.get(info.id, ""))
    if ok and info is not None:
        placed.append(info.id)
        add(info, 1)
    if ok:
        back = sorted(out, key=lambda lv: (-work(lv.info), lv.info.id))
        for n, lv in enumerate(back, start=1):
            if try_place(st, lv.info, allow_borrow=True, status_reason=lv.reason):
                placed.append(lv.info.id)
                if outside(lv.info, st.live[lv.info.id].pool) and not outside(lv.info, lv.pool):
                    ok = False   # it would leave its data region
                    break
                if hopeless is not None and n < len(back) and hopeless():
                    ok = False   # refused whatever the jobs still out do
                    break
            elif lv.info.id in keep:
                ok = False
                break
            else:
                add(lv.info, -1)
    if ok and fill:
        gone = {lv.info.id for lv in out} - set(placed)
        keys = {ps.pool.key for ps in pools}
        for other in pending_order(st):
            if other.id not in gone and (info is None or other.id != info.id) and \
                    not keys.isdisjoint(st.reach(other)) and \
                    try_place(st, other, allow_borrow=True, status_reason=forced.get(other.id, "")):
                placed.append(other.id)
                add(other, 1)
    if ok and accept(gained):
        return True
    restore(st, placed, out, targets)
    return False


def try_insert(st: PlanState, info: JobInfo, out: list[Live], order: list[int], keep: set[str]) -> bool:
    """Eject `out`, insert `info`, fill with other pending jobs; kept if the work per class improves (or stays
    equal at a lower capacity cost), and then the pools are compacted."""
    pools = reach(st, [info] + [lv.info for lv in out])
    before = compact_usd(st, pools)

    def accept(gained: dict[int, int]) -> bool:
        verdict = better(order, gained)
        return verdict > 0 or (verdict == 0 and compact_usd(st, pools) < before - EPS_USD)

    if eject_and_insert(st, info, out, keep=keep, fill=True, accept=accept):
        compact(st, pools)
        return True
    return False


def pending_order(st: PlanState) -> list[JobInfo]:
    """The pending jobs moves try to make room for, highest class, then largest, first: not those a reservation
    holds back (reserve.py: they wait by design)."""
    return sorted((i for i in st.jobs.values() if i.id not in st.live and not held_back(st, i)),
                  key=lambda i: (-i.priority, -work(i), i.id))


def fill_pending(st: PlanState) -> bool:
    """Place every pending job that fits now, in `pending_order`, each at its best candidate: the cost moves
    free room (a relocation or a re-pack closes a unit that a waiting gang could take), and no later step
    would place a job there; left out, it waited beside free room it fitted, saying "lower in the queue".
    Only adds work. Returns whether anything was placed."""
    placed = False
    for info in pending_order(st):
        if info.id not in st.live and \
                try_place(st, info, allow_borrow=True, status_reason=st.outcome.forced.get(info.id, "")):
            placed = True
    return placed


def frees_room(st: PlanState, info: JobInfo, out: list[Live]) -> bool:
    """A necessary test, cheaper than the move: with the capacity and quota of `out` released (and their
    attributed cost back in their team's budget), some option of `info` is within quota and finds units on
    a candidate pool within its team's budget. First, without touching the state: an option short of quota
    needs at least its shortfall of that accelerator released by its team or its cohort."""
    domain = st.quota.domain.get(info.team)
    for opt in info.options:
        short = st.quota.shortfall(info.team, qkey(info, opt), amount(info, opt), allow_borrow=True)
        if short <= sum(amount(lv.info, lv.option) for lv in out
                        if qkey(lv.info, lv.option) == qkey(info, opt) and (lv.info.team == info.team or (
                            domain is not None and st.quota.domain.get(lv.info.team) == domain))):
            break
    else:
        return False
    for lv in out:
        st.quota.remove(lv.info.team, qkey(lv.info, lv.option), amount(lv.info, lv.option))
    replicas = info.job.replicas
    opts = [opt for opt in info.options
            if not st.quota.shortfall(info.team, qkey(info, opt), amount(info, opt), allow_borrow=True)]
    for lv in out:
        st.quota.add(lv.info.team, qkey(lv.info, lv.option), amount(lv.info, lv.option))
    if not opts:
        return False
    budget = st.budget_room(info.team, sum(lv.hourly_usd for lv in out if lv.info.team == info.team))
    for lv in out:
        lv.pool.release(lv.units, lv.gang)
    try:
        for opt in opts:
            for ps in st.candidates(info, opt):
                gang, held = st.gang(opt, ps), exclude(st, info, ps, False, opt)
                if ps.may_fit(gang, replicas) and (units := ps.find(gang, replicas, exclude=held)) is not None \
                        and st.attributed(ps, gang, units) <= budget:
                    return True
        return False
    finally:
        for lv in out:
            lv.pool.take(lv.units, lv.gang)


def eject_pairs(st: PlanState, budget: int) -> bool:
    """Ejection of one or two placed jobs for each pending job (highest class, then largest, then id first).
    Singles: every placed job (not kept) on a pool the pending job could use, lowest class then smallest
    first; pairs: two such jobs on the same pool. A move whose ejected jobs free no room for the pending job
    (`frees_room`) is skipped without trying. Unlike improve.py's insert_pending, an ejected job may stay
    pending when the work per class still rises (a larger job of its class, or a job of a higher class,
    takes its place); jobs of `sticky` must fit again. At most `budget` attempts. Returns whether anything
    changed."""
    changed = False
    attempts = 0
    order = levels(st)
    keep = sticky(st)
    for info in pending_order(st):
        if info.id in st.live:
            continue
        if try_place(st, info, allow_borrow=True, status_reason=st.outcome.forced.get(info.id, "")):
            changed = True   # room freed by an earlier move
            continue
        keys = {ps.pool.key for ps in reach(st, [info])}
        movable = sorted((lv for lv in st.live.values() if not lv.kept and lv.pool.pool.key in keys),
                         key=lambda lv: (lv.info.priority, work(lv.info), lv.info.id))
        moves = [[lv.info.id] for lv in movable]
        moves += [[a.info.id, b.info.id] for i, a in enumerate(movable) for b in movable[i + 1:] if a.pool is b.pool]
        for ids in moves:   # ids, not Live objects: a restored job is committed again as a new Live
            if attempts >= budget:
                return changed
            move = [st.live[j] for j in ids]
            if not frees_room(st, info, move):
                continue
            attempts += 1
            if try_insert(st, info, move, order, keep):
                changed = True
                break
    return changed
