"""Deeper moves of the improvement phase (improve.py), on one planner state: relocation of a placed job to
its cheapest candidate, and ejection of one or two placed jobs to admit a pending one when that adds work
by the phase's order (work per priority class, highest first), even if an ejected job then waits.

Every move is all-or-nothing: it is kept only if it strictly improves the plan by that order (more work in
the highest class where the work changes; or the same work in every class at an hourly capacity cost lower
by more than a micro-dollar), else the state is restored exactly (pool targets, every job on its old units).
Moves never touch a job kept from the base, never leave pending a job that had to move from the base
(`forced`) or one that preempted running work, and place every job through the same checks as the greedy
(candidate pools, quota with borrowing, the team's budget, gang shapes), so every rule still holds; a job
placed within its data region is never moved out of it.

Deterministic: candidates, jobs and pairs are visited in fixed orders with explicit tie-breaks; each kind of
move makes at most `budget` attempts per call.
"""

from __future__ import annotations

from .capacity import PoolState
from .planner import JobInfo, Live, Planner

EPS_USD = 1e-6


def size(info: JobInfo) -> int:
    """Work of a job: accelerators of its first option * replicas (the phase's measure)."""
    return info.options[0].count * info.job.replicas


def reach(pl: Planner, infos: list[JobInfo]) -> list[PoolState]:
    """The pools these jobs could be placed on (every candidate of every option) and their current pools, in
    key order: the only pools a move of these jobs can change."""
    found: dict[str, PoolState] = {}
    for info in infos:
        mine = pl.reach.get(info.id)
        if mine is None:
            mine = pl.reach[info.id] = {ps.pool.key: ps for opt in info.options for ps in pl.candidates(info, opt)}
        found.update(mine)
        if (lv := pl.live.get(info.id)) is not None:
            found[lv.pool.pool.key] = lv.pool
    return [found[key] for key in sorted(found)]


def capacity_usd(pools: list[PoolState]) -> float:
    """Hourly cost of the capacity these pools open (each pool's final target * unit price)."""
    return sum(ps.final_target() * ps.unit_hourly_usd for ps in pools)


def kept_floor(pl: Planner, ps: PoolState) -> int:
    """1 + the highest unit holding a job kept from the base (those never move), 0 if none."""
    return max((u + 1 for j in pl.kept_by_pool.get(ps.pool.key, ()) for u in pl.live[j].units), default=0)


def compact_usd(pl: Planner, pools: list[PoolState]) -> float:
    """Hourly cost of these pools once compacted (`compact`): each pool keeps max(min, used units, units up
    to its highest kept one) units. Any used unit holding no kept job can move whole into an entirely free
    unit below it, so this cost is reached exactly by `compact`."""
    return sum(max(ps.pool.min, ps.used_units(), kept_floor(pl, ps)) * ps.unit_hourly_usd for ps in pools)


def frees_unit(pl: Planner, out: list[Live]) -> bool:
    """Whether taking `out` out lowers the compacted cost (`compact_usd`): some unit of theirs becomes entirely
    free in a pool that uses more units than its min and its highest kept unit. Compacted cost never falls
    when jobs are added, so a move that takes `out` out and puts them back can only lower the cost if this
    holds: a cheap test that skips hopeless cost moves."""
    freed: dict[str, dict[int, int]] = {}
    for lv in out:
        mine = freed.setdefault(lv.pool.pool.key, {})
        for u in lv.units:
            mine[u] = mine.get(u, 0) + lv.gang.accelerators
    for key, units in sorted(freed.items()):
        ps = pl.pools[key]
        full = ps.pool.unit_accelerators
        if any(ps.free_acc[u] + amount == full for u, amount in units.items()) and \
                ps.used_units() > max(ps.pool.min, kept_floor(pl, ps)):
            return True
    return False


def compact(pl: Planner, pools: list[PoolState]) -> bool:
    """Renumber units: while a pool has an entirely free unit below its highest used one, and that top unit
    holds no kept job, every job on the top unit moves its replica there (the same capacity, and a job has
    no other replica on a free unit, so replicas stay on distinct units); then the free units at the top
    close. Placements, work and options are unchanged; the pool's target falls to `compact_usd`'s count.
    Returns whether anything moved."""
    changed = False
    for ps in pools:
        full = ps.pool.unit_accelerators
        on_unit: dict[int, list[str]] = {}
        for job_id, lv in sorted(pl.live.items()):
            if lv.pool is ps:
                for u in lv.units:
                    on_unit.setdefault(u, []).append(job_id)
        while True:
            used = [i for i, f in enumerate(ps.free_acc) if f < full]
            if not used:
                break
            top = used[-1]
            hole = next((i for i in range(top) if ps.free_acc[i] == full), None)
            ids = on_unit.get(top, [])
            if hole is None or any(pl.live[j].kept for j in ids):
                break
            for job_id in ids:
                lv = pl.evict(job_id)
                units = tuple(sorted(hole if u == top else u for u in lv.units))
                if not ps.take(units, lv.gang):   # pragma: no cover - the hole is entirely free
                    raise RuntimeError(f"planner: could not compact {job_id}")
                pl.commit(lv.info, ps, lv.option, units, kept=False, reason=lv.reason)
            on_unit[hole] = on_unit.pop(top)
            changed = True
        ps.trim(0)
    return changed


def place_at(pl: Planner, info: JobInfo, opt_index: int, ps: PoolState, reason: str) -> bool:
    """Place the job with this option on this pool (best-fit units), under the greedy's checks: the pool is a
    candidate of the option, the team's quota (borrowing allowed) and its budget. False if it does not fit."""
    opt = info.options[opt_index]
    replicas = info.job.replicas
    if pl.quota.shortfall(info.team, opt.accelerator, opt.count * replicas, allow_borrow=True):
        return False
    gang = pl.gang(opt, ps)
    if not ps.may_fit(gang, replicas):
        return False
    units = ps.find(gang, replicas)
    if units is None or pl.attributed(ps, gang, units) > pl.budget_left(info.team) + 1e-9:
        return False
    ps.find(gang, replicas, dry_run=False)
    pl.commit(info, ps, opt, units, kept=False, reason=reason)
    return True


def eject(pl: Planner, out: list[Live], pools: list[PoolState]) -> list[tuple[PoolState, int]]:
    """Take `out` out and close the units left empty at the top of `pools` (so that opening them again counts
    as new spend). Returns the pools' targets before, for `restore`."""
    targets = [(ps, ps.target) for ps in pools]
    for lv in out:
        pl.evict(lv.info.id)
    for ps in pools:
        ps.trim(0)
    return targets


def restore(pl: Planner, placed: list[str], out: list[Live], targets: list[tuple[PoolState, int]]) -> None:
    """Undo a move exactly: evict what it placed, bring the pools back to their targets, and put every job of
    `out` back on its old units."""
    for job_id in placed:
        pl.evict(job_id)
    for ps, target in targets:
        ps.trim(target)
        ps.open_to(target)
    for lv in out:
        if not lv.pool.take(lv.units, lv.gang):   # pragma: no cover - the units were just freed
            raise RuntimeError(f"planner: could not restore {lv.info.id}")
        pl.commit(lv.info, lv.pool, lv.option, lv.units, kept=False, reason=lv.reason)


def outside(info: JobInfo, ps: PoolState) -> bool:
    """The pool is outside the job's data region (the greedy's first preference, which moves keep)."""
    return info.job.data_region is not None and ps.pool.region != info.job.data_region


def sticky(pl: Planner) -> set[str]:
    """Jobs a move must not leave pending: those that had to move from the base, and those that preempted."""
    return set(pl.forced) | {p.by for p in pl.preemptions}


# -- cost: relocation ------------------------------------------------------------------------------------------

def relocate(pl: Planner, budget: int) -> bool:
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
    jobs = sorted((lv for lv in pl.live.values() if not lv.kept), key=lambda lv: (-lv.hourly_usd, lv.info.id))
    for lv in jobs[:budget]:
        info = lv.info
        if pl.live.get(info.id) is not lv or not frees_unit(pl, [lv]):
            continue   # moved by compaction (visited again next time), or no unit to close
        pools = reach(pl, [info])
        before = compact_usd(pl, pools)
        targets = eject(pl, [lv], pools)
        trimmed = {ps.pool.key: ps.target for ps in pools}
        best: tuple[float, int, str] | None = None
        away = outside(info, lv.pool)
        for opt in info.options:
            for ps in pl.candidates(info, opt):
                if (outside(info, ps) and not away) or not place_at(pl, info, opt.index, ps, lv.reason):
                    continue
                cost = compact_usd(pl, pools)
                pl.evict(info.id)
                ps.trim(trimmed[ps.pool.key])
                key = (round(cost, 6), opt.index, ps.pool.key)
                if best is None or key < best:
                    best = key
        if best is not None and best[0] < before - EPS_USD:
            ps = pl.pools[best[2]]
            if place_at(pl, info, best[1], ps, lv.reason):
                compact(pl, pools)
                changed = True
                continue
        restore(pl, [], [lv], targets)
    return changed


# -- work: ejection ------------------------------------------------------------------------------------------

def levels(pl: Planner) -> list[int]:
    return sorted({i.priority for i in pl.jobs.values()}, reverse=True)


def better(order: list[int], gained: dict[int, int]) -> int:
    """+1 if the work gained per class (highest class first) is lexicographically positive, -1 if negative,
    0 if it is zero in every class."""
    for level in order:
        g = gained.get(level, 0)
        if g:
            return 1 if g > 0 else -1
    return 0


def try_insert(pl: Planner, info: JobInfo, out: list[Live], order: list[int], keep: set[str]) -> bool:
    """Take `out` out, place `info` at its best candidate, put `out` back largest first (each at its best
    candidate; a job of `keep` must fit again), then fill with other pending jobs (highest class, largest,
    id first). Kept if the work per class improves (or stays equal at a lower capacity cost); else the state
    is restored exactly."""
    pools = reach(pl, [info] + [lv.info for lv in out])
    before = compact_usd(pl, pools)
    targets = eject(pl, out, pools)
    placed: list[str] = []
    gained: dict[int, int] = {}

    def add(job: JobInfo, sign: int) -> None:
        gained[job.priority] = gained.get(job.priority, 0) + sign * size(job)

    ok = pl.try_place(info, allow_borrow=True, status_reason=pl.forced.get(info.id, ""))
    if ok:
        placed.append(info.id)
        add(info, 1)
        for lv in sorted(out, key=lambda lv: (-size(lv.info), lv.info.id)):
            if pl.try_place(lv.info, allow_borrow=True, status_reason=lv.reason):
                placed.append(lv.info.id)
                if outside(lv.info, pl.live[lv.info.id].pool) and not outside(lv.info, lv.pool):
                    ok = False   # it would leave its data region
                    break
            elif lv.info.id in keep:
                ok = False
                break
            else:
                add(lv.info, -1)
    if ok:
        gone = {lv.info.id for lv in out} - set(placed)
        for other in pending_order(pl):
            if other.id not in gone and other.id != info.id and reach_overlaps(pl, other, pools) and \
                    pl.try_place(other, allow_borrow=True, status_reason=pl.forced.get(other.id, "")):
                placed.append(other.id)
                add(other, 1)
        verdict = better(order, gained)
        if verdict > 0 or (verdict == 0 and compact_usd(pl, pools) < before - EPS_USD):
            compact(pl, pools)
            return True
    restore(pl, placed, out, targets)
    return False


def reach_overlaps(pl: Planner, info: JobInfo, pools: list[PoolState]) -> bool:
    keys = {ps.pool.key for ps in pools}
    return any(k in keys for k in (ps.pool.key for ps in reach(pl, [info])))


def pending_order(pl: Planner) -> list[JobInfo]:
    return sorted((i for i in pl.jobs.values() if i.id not in pl.live), key=lambda i: (-i.priority, -size(i), i.id))


def frees_room(pl: Planner, info: JobInfo, out: list[Live]) -> bool:
    """A necessary test, cheaper than the move: with the capacity and quota of `out` released (and their
    attributed cost back in their team's budget), some option of `info` is within quota and finds units on
    a candidate pool within its team's budget. First, without touching the state: an option short of quota
    needs at least its shortfall of that accelerator released by its team or its cohort."""
    domain = pl.quota.domain.get(info.team)
    for opt in info.options:
        short = pl.quota.shortfall(info.team, opt.accelerator, opt.count * info.job.replicas, allow_borrow=True)
        if short <= sum(lv.option.count * lv.info.job.replicas for lv in out
                        if lv.option.accelerator == opt.accelerator and (lv.info.team == info.team or (
                            domain is not None and pl.quota.domain.get(lv.info.team) == domain))):
            break
    else:
        return False
    for lv in out:
        pl.quota.remove(lv.info.team, lv.option.accelerator, lv.option.count * lv.info.job.replicas)
    replicas = info.job.replicas
    opts = [opt for opt in info.options
            if not pl.quota.shortfall(info.team, opt.accelerator, opt.count * replicas, allow_borrow=True)]
    for lv in out:
        pl.quota.add(lv.info.team, lv.option.accelerator, lv.option.count * lv.info.job.replicas)
    if not opts:
        return False
    budget = pl.budget_left(info.team) + sum(lv.hourly_usd for lv in out if lv.info.team == info.team) + 1e-9
    for lv in out:
        lv.pool.release(lv.units, lv.gang)
    try:
        for opt in opts:
            for ps in pl.candidates(info, opt):
                gang = pl.gang(opt, ps)
                if ps.may_fit(gang, replicas) and (units := ps.find(gang, replicas)) is not None \
                        and pl.attributed(ps, gang, units) <= budget:
                    return True
        return False
    finally:
        for lv in out:
            lv.pool.take(lv.units, lv.gang)


def eject_pairs(pl: Planner, budget: int) -> bool:
    """Ejection of one or two placed jobs for each pending job (highest class, then largest, then id first).
    Singles: every placed job (not kept) on a pool the pending job could use, lowest class then smallest
    first; pairs: two such jobs on the same pool. A move whose ejected jobs free no room for the pending job
    (`frees_room`) is skipped without trying. Unlike improve.py's eject-and-insert, an ejected job may stay
    pending when the work per class still rises (a larger job of its class, or a job of a higher class,
    takes its place); jobs of `sticky` must fit again. At most `budget` attempts. Returns whether anything
    changed."""
    changed = False
    attempts = 0
    order = levels(pl)
    keep = sticky(pl)
    for info in pending_order(pl):
        if info.id in pl.live:
            continue
        if pl.try_place(info, allow_borrow=True, status_reason=pl.forced.get(info.id, "")):
            changed = True   # room freed by an earlier move
            continue
        keys = {ps.pool.key for ps in reach(pl, [info])}
        movable = sorted((lv for lv in pl.live.values() if not lv.kept and lv.pool.pool.key in keys),
                         key=lambda lv: (lv.info.priority, size(lv.info), lv.info.id))
        moves = [[lv.info.id] for lv in movable]
        moves += [[a.info.id, b.info.id] for i, a in enumerate(movable) for b in movable[i + 1:] if a.pool is b.pool]
        for ids in moves:   # ids, not Live objects: a restored job is committed again as a new Live
            if attempts >= budget:
                return changed
            move = [pl.live[j] for j in ids]
            if not frees_room(pl, info, move):
                continue
            attempts += 1
            if try_insert(pl, info, move, order, keep):
                changed = True
                break
    return changed
