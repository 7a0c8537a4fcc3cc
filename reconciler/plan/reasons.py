"""Why a job waits: sorted, quantified reasons, one or more per option (Kueue's style:
`insufficient tpu-v5p quota for team vision: 64 chips more needed`), each naming the jobs that hold what
the job needs (its team's and borrowers' jobs on the accelerator, the jobs on the matching pools, the
team's spend).

The reasons are recorded when the job is decided (`record_wait`: its class found no place for it and
preemption did not help), not on the final state: lower classes placed later may take what a higher-class
job would need, and a reason measured after them would name the wrong cause (a budget-blocked job would be
reported quota-blocked once a cheaper job of its team took the quota). Reasons that name a job the plan
preempts (a holder, a would-be victim it spared) are measured again on the final state (`pending_reasons`):
a later job, of its class or a lower one, took that job's units, so they named a preempted job as holding
them."""

from __future__ import annotations

import heapq
from collections.abc import Callable

from ..resolve import ResolvedOption, gang_fit, residency_fit
from . import drain
from .capacity import PoolState
from .replicas import apart
from .state import JobInfo, Live, PlanState, amount, qkey
from .types import HOURS_PER_MONTH, NANO, WAS_RUNNING, Pending

QUEUED_BEHIND = "lower in the queue than jobs that took the remaining capacity"
"""A waiting job's reason when no rule names what it lacks; starts.py drops it where a reservation or a quota hold
of another job is what keeps it out (`_held_from`), which it then names."""

def describe(opt: ResolvedOption) -> str:
    if opt.shape is not None:
        return f"{opt.accelerator} {opt.shape}" + (f" x{opt.slices}" if opt.slices > 1 else "")
    return f"{opt.count}x {opt.accelerator}"


def _unit_word(opt: ResolvedOption, n: int) -> str:
    word = ("slice" if opt.shape is not None else "node") + ("s" if n != 1 else "")
    return f"{n} {word}"


HOLDERS_NAMED = 3
Fit = tuple[PoolState, tuple[int, ...]]   # a pool with room for an option, and the units it would take


def held_by(lives: list[Live], size: Callable[[Live], float], unit: str) -> str:
    """`; held by a (16 GPUs), b (8 GPUs) and 3 more`: the biggest holders first, ties by id."""
    if not lives:
        return ""
    top = heapq.nsmallest(HOLDERS_NAMED, lives, key=lambda lv: (-size(lv), lv.info.id))
    named = [f"{lv.info.parent} ({unit.format(size(lv))})" for lv in top]
    more = f" and {len(lives) - HOLDERS_NAMED} more" if len(lives) > HOLDERS_NAMED else ""
    return "; held by " + ", ".join(named) + more


def quota_holders(st: PlanState, info: JobInfo, opt: ResolvedOption, thing: str) -> str:
    """The placed jobs that use the quota the job is short of: its team's and its cohort-mates' borrowing."""
    acc = qkey(info, opt)
    key = ("quota", info.team, acc, thing)
    hit = st.why_cache.get(key)
    if hit is None or hit[0] != st.version:
        teams = [info.team] + [t for t, _ in st.quota.borrowers(info.team, acc)]
        lives = [st.live[j] for t in teams for j in st.holding.get((t, acc), ())]
        lives += [lv for lv in st.draining.values() if lv.info.team in teams and qkey(lv.info, lv.option) == acc]
        hit = st.why_cache[key] = (st.version, [held_by(lives, lambda lv: amount(lv.info, lv.option),
                                                        "{:.0f} " + thing)])
    return hit[1][0]


def pool_holders(st: PlanState, pools: list[PoolState], opt: ResolvedOption) -> str:
    """The placed jobs on these pools (the matching pools of a job that found no room), and the victims there
    running until their checkpoint (drain.py)."""
    key = ("pools", id(pools))   # candidate lists are cached per gang signature: the same list, the same id
    hit = st.why_cache.get(key)
    if hit is None or hit[0] != st.version:
        lives = [st.live[j] for ps in pools for j in st.on_pool.get(ps.pool.key, ())]
        flag: dict[object, object] = {drain.DRAINS: True}   # victims running until their checkpoint, on the
        held = {s.lv.info.id: len(s.units) for ps in pools for s in drain.on_pool(st, ps.pool.key, flag)} \
            if st.draining else {}     # units their preemptor leaves
        lives += [st.draining[j] for j, n in held.items() if n]
        unit = "{:.0f} " + ("chips" if opt.kind == "tpu" else "GPUs" if opt.kind == "gpu" else "devices")
        hit = st.why_cache[key] = (st.version, [held_by(
            lives, lambda lv: lv.gang.accelerators * held.get(lv.info.id, len(lv.units)), unit)])
    return hit[1][0]


def option_reasons(st: PlanState, info: JobInfo, opt: ResolvedOption) -> list[str]:
    """Why the job cannot take `opt` now: its team's quota (`_quota_part`), room (`_room_part`: no matching
    pool, or none with room), and its team's budget (`_budget_part`), each that blocks it. Until 2026-12-06 the
    budget was named only when neither quota nor room blocked the job: a 512-chip production job its budget kept
    waiting for 64 hours (it cost $1,382/h, its team had $197/h of pace left, $1,075/h even with all its lower
    work stopped) read only "insufficient tpu-v6e quota", as if freeing quota would start it."""
    short, why = _quota_part(st, info, opt)
    out = [why] if short else []
    no_room, first = _room_part(st, info, opt)
    if no_room:
        out.append(no_room)
    over = _budget_part(st, info, opt, first)
    if over:
        out.append(over)
    return out


def _budget_part(st: PlanState, info: JobInfo, opt: ResolvedOption, first: Fit | None) -> str:
    """Why the team's budget blocks `opt` ("" when it does not): the job's spend on `first` (the first pool with
    room and its units), or, where no pool has room, at least its spend on the cheapest matching pool (its
    `least_charge` there), against what the team's monthly pace has left (the one budget check: `budget_room`)."""
    if first is not None:
        ps, units = first
        hourly, least = st.attributed(ps, st.gang(opt, ps), units), ""
    else:
        costs = [ps.least_charge(st.gang(opt, ps), info.job.replicas) for ps in st.candidates(info, opt)]
        if not costs:
            return ""
        hourly, least = min(costs), "at least "
    if hourly <= st.budget_room(info.team):
        return ""
    monthly, left = hourly * HOURS_PER_MONTH, max(0.0, st.budget_left(info.team) * HOURS_PER_MONTH)
    budget = st.teams[info.team].budget_monthly_usd or 0.0
    key = ("budget", info.team)   # the team's spenders: the same until something is placed or taken out
    hit = st.why_cache.get(key)
    if hit is None or hit[0] != st.version:
        lives = [st.live[j] for (t, _), ids in st.holding.items() if t == info.team for j in ids]
        lives += [lv for lv in st.draining.values() if lv.info.team == info.team]   # it spends until its checkpoint
        hit = st.why_cache[key] = (st.version, [held_by(lives, lambda lv: lv.hourly_usd * HOURS_PER_MONTH,
                                                        "${:,.0f}/month") + _old_copies(st, info.team)])
    return (f"monthly budget of team {info.team} (${budget:,.0f}) would be exceeded: the job costs {least}"
            f"${monthly:,.0f}/month and ${left:,.0f} is left{hit[1][0]}")


def _old_copies(st: PlanState, team: str) -> str:
    """`; and vision/web's copy on gke-usc1/h100 ($64,598/month), which runs until its move is done`: the team's
    services the plan moves, still paid where they run (oldcopy.py), the biggest first."""
    monthly: dict[tuple[str, str], float] = {}
    for job_id, charge in st.old_copy.items():
        if st.jobs[job_id].team == team:
            at = (st.jobs[job_id].parent, st.paid_at[job_id][0])
            monthly[at] = monthly.get(at, 0.0) + charge / NANO * HOURS_PER_MONTH
    top = sorted(monthly.items(), key=lambda kv: (-kv[1], kv[0]))
    named = [f"{job}'s copy on {key} (${usd:,.0f}/month)" for (job, key), usd in top[:HOLDERS_NAMED]]
    more = f" and {len(top) - HOLDERS_NAMED} more" if len(top) > HOLDERS_NAMED else ""
    if not named:
        return ""
    verb = "runs until its move is" if len(top) == 1 else "run until their moves are"
    return f"; and {', '.join(named)}{more}, which {verb} done"


def _quota_part(st: PlanState, info: JobInfo, opt: ResolvedOption) -> tuple[int, str]:
    """How much of its team's quota the job lacks for `opt`, and the reason saying so ("" when none). The same for
    every job of the team asking as much of that quota, until something is placed or taken out."""
    charged, need = qkey(info, opt), amount(info, opt)
    key = ("quota", info.team, charged, need, opt.kind)
    hit = st.reason_parts.get(key)
    if hit is None or hit[0] != st.version:
        thing = "chips" if opt.kind == "tpu" else "GPUs" if opt.kind == "gpu" else "devices"
        short = st.quota.shortfall(info.team, charged, need)
        if short == 1:
            thing = thing[:-1]
        reclaims = st.fleet.prio.preemption.reclaim_within_cohort != "never"
        why = (f"insufficient {charged} quota for team {info.team}: {short} {thing} more needed "
               f"({st.quota.why_short(info.team, charged, need, reclaims)}"
               f"{quota_holders(st, info, opt, 'GPUs' if thing == 'GPU' else thing)})") if short else ""
        hit = st.reason_parts[key] = (st.version, (short, why))
    found: tuple[int, str] = hit[1]
    return found


def _room_part(st: PlanState, info: JobInfo, opt: ResolvedOption) -> tuple[str, Fit | None]:
    """Why no pool takes `opt` ("" when one has room), and the first candidate pool with room and its units. It
    depends on what the room key holds, the pools and, for a spread replica, where its siblings run (not the
    team): the same for every job of that key until something is placed or taken out."""
    room_key = st.room_key(info, opt)
    known_full = room_key in st.no_room
    key = ("room", room_key, known_full, apart(st, info))
    hit = st.reason_parts.get(key)
    if hit is None or hit[0] != st.version:
        hit = st.reason_parts[key] = (st.version, _room(st, info, opt, room_key, known_full))
    found: tuple[str, Fit | None] = hit[1]
    return found


def _room(st: PlanState, info: JobInfo, opt: ResolvedOption, room_key: tuple[object, ...],
          known_full: bool) -> tuple[str, Fit | None]:
    replicas = info.job.replicas
    active = st.candidates(info, opt)
    if not active:
        statically = [ps for ps in st.pools.values() if gang_fit(opt, ps.pool, info.spot, info.job.kind) is None]
        what = f"a {opt.shape} {opt.accelerator} slice" if opt.shape else f"room for {opt.count}x {opt.accelerator}"
        spot = {"required": " on spot capacity", "never": " on non-spot capacity"}.get(info.spot, "")
        where = f" ({', '.join(sorted({ps.pool.cluster + ' is ' + ps.pool.status for ps in statically}))})" \
            if statically else ""
        away = elsewhere(st, info, opt, statically, room=False)
        if away:
            return (f"data residency: no pool in an active cluster in the job's data_region "
                    f"{info.job.data_region} has {what}{spot}; data_residency: required keeps it off "
                    f"{_pools(away)}, which could hold it"), None
        return f"no pool in an active cluster has {what}{spot}{where}", None
    cands = [] if known_full else st.live_candidates(info, opt, room_key)[0]
    other = {lv.pool for lv in st.siblings_placed(info) if lv.option.index != opt.index}
    first = next(((ps, units) for ps, gang, _, _ in cands if ps not in other and ps.may_fit(gang, replicas) and
                  (units := ps.find(gang, replicas, exclude=st.sibling_units(info, ps))) is not None), None)
    if first is not None:
        return "", first
    gang = st.gang(opt, active[0])
    need = max(1, gang.whole_units) * replicas
    held = {ps: _reserved_free(st, info, ps, opt) for ps in active} if st.reserved else {}
    room = max((ps.pool.max - ps.target + ps.whole_free - (len(held[ps][0]) if ps in held else 0) for ps in active),
               default=0)
    kept_out = {u for units, _ in held.values() for u in units}
    for_whom = sorted({j for _, jobs in held.values() for j in jobs})
    besides = f" ({_unit_word(opt, len(kept_out))} more reserved for {', '.join(for_whom)})" if kept_out else ""
    on = pool_holders(st, active, opt)
    away = elsewhere(st, info, opt, list(st.pools.values()), room=True)
    local = f" in the job's data_region {info.job.data_region}" if away else ""
    # a replica of a spread job: the room left may be on its siblings' units, or in a pool where they run
    # another option (a replica takes units of its own, and a pool's replicas run one option)
    roomy = {ps for ps, gang, _, _ in cands if info.siblings and ps.may_fit(gang, replicas)
             and ps.find(gang, replicas) is not None}
    word = "slices" if opt.shape is not None else "nodes"
    why = [f"the room left is on {word} the job's other replicas run on (each replica takes {word} of its own)"
           if roomy - other else "",
           f"the room left is in {_pools(sorted(roomy & other, key=lambda ps: ps.pool.key))}, where the job's "
           f"other replicas run another option (a pool's replicas run one option)" if roomy & other else ""]
    return (f"{'data residency: ' if away else ''}not enough free {describe(opt)} capacity{local}: needs "
            f"{_unit_word(opt, need)}, the {len(active)} matching pool(s) have at most "
            f"{_unit_word(opt, room)} free{besides}{on}" + short_beside(st, opt, active)
            + (f"; data_residency: required keeps it off {_pools(away)}, which have room" if away else "")
            + "".join(f"; {w}" for w in why if w)), None


def _reserved_free(st: PlanState, info: JobInfo, ps: PoolState,
                   opt: ResolvedOption) -> tuple[set[tuple[str, int]], set[str]]:
    """The units of `ps` free now (opened and entirely free, or not opened yet) that reservations keep from `info`
    (keyed by pool and unit), and whose they are. Counted as free, the reason read "needs 1 node, ... at most 1
    node free" of a job kept off the one free node by a reservation (`starts._held_from` says whose and why)."""
    rs = [r for r in st.reserved.get(ps.pool.key, ()) if r.units and st.may_not_use(info, r, opt)]
    free = {(ps.pool.key, u) for r in rs for u in r.units
            if u >= ps.target or ps.free_acc[u] == ps.pool.unit_accelerators}
    return free, {r.job for r in rs if any((ps.pool.key, u) in free for u in r.units)}


def short_beside(st: PlanState, opt: ResolvedOption, active: list[PoolState]) -> str:
    """For a gang of part of a unit: the opened units that have its accelerators free but not the cpus or memory
    it asks, and the most they have free. Without it the reason read as if accelerators were short ("0 nodes
    free; held by x (1 GPUs)" of a node with 7 GPUs free and its cpus taken)."""
    units = cpus = mem = 0
    ask = None
    for ps in active:
        gang = st.gang(opt, ps)
        if gang.whole_units:
            return ""
        ask = gang
        if ps.max_free < gang.accelerators:
            continue        # no unit of the pool has the accelerators free (the common case: O(1))
        for u in range(ps.target):
            if u not in ps.blocked and ps.free_acc[u] >= gang.accelerators \
                    and (ps.free_cpu[u] < gang.cpus or ps.free_mem[u] < gang.memory_gib):
                units += 1
                cpus, mem = max(cpus, ps.free_cpu[u]), max(mem, ps.free_mem[u])
    if not units or ask is None:
        return ""
    short = [f"{ask.cpus} cpus (at most {cpus} free there)" if ask.cpus > cpus else "",
             f"{ask.memory_gib} GiB of memory (at most {mem:,} GiB free there)" if ask.memory_gib > mem else ""]
    thing = "GPUs" if opt.kind == "gpu" else "devices"
    return (f"; on {units} {'node' if units == 1 else 'nodes'} the {ask.accelerators} {thing} it needs are free but "
            f"not the {' nor the '.join(w for w in short if w)} it asks")


def elsewhere(st: PlanState, info: JobInfo, opt: ResolvedOption, pools: list[PoolState], *,
              room: bool) -> list[PoolState]:
    """The pools of `pools` that only `data_residency: required` keeps the job off: in an active cluster,
    able to hold a gang of `opt` (`gang_fit`), outside its data region; with `room`, only those with room
    for the job now. Empty for a job whose residency is not required."""
    if info.job.data_residency != "required":
        return []
    out = []
    for ps in pools:
        if ps.pool.status != "active" or residency_fit(info.job, ps.pool) is None \
                or gang_fit(opt, ps.pool, info.spot, info.job.kind) is not None:
            continue
        gang = st.gang(opt, ps)
        if not room or (ps.may_fit(gang, info.job.replicas) and ps.find(gang, info.job.replicas) is not None):
            out.append(ps)
    return sorted(out, key=lambda ps: ps.pool.key)


def _pools(pools: list[PoolState]) -> str:
    """`gke-usc1/h100 (us-central1)`, the first HOLDERS_NAMED by key, and how many more."""
    named = ", ".join(f"{ps.pool.key} ({ps.pool.region})" for ps in pools[:HOLDERS_NAMED])
    return named + (f" and {len(pools) - HOLDERS_NAMED} more" if len(pools) > HOLDERS_NAMED else "")


def job_reasons(st: PlanState, info: JobInfo, cache: dict[tuple[object, ...], tuple[int, list[str]]] | None = None,
                version: int = 0) -> set[str]:
    """What stands in the way of every option of the job in the planner's current state, each reason
    prefixed with its option when the job has several. `cache` holds reasons per team and gang, valid while
    the state's version is `version`."""
    reasons: set[str] = set()
    multi = len(info.options) > 1
    for opt in info.options:
        # same team, same gang: same reasons (a spread replica's depend on where its siblings run)
        key = (info.team, st.room_key(info, opt), apart(st, info))
        hit = cache.get(key) if cache is not None else None
        found = hit[1] if hit is not None and hit[0] == version else None
        if found is None:
            found = option_reasons(st, info, opt)
            if cache is not None:
                cache[key] = (version, found)
        for r in found:
            reasons.add(f"option {opt.index} ({describe(opt)}): {r}" if multi else r)
    return reasons


def record_wait(st: PlanState, info: JobInfo) -> None:
    """Record why the job waits, now that it is decided (module docstring). Jobs decided one after another
    with nothing placed or taken out in between share the reasons of their team and gang."""
    reasons = job_reasons(st, info, st.why_cache, st.version)
    if (spared := st.outcome.spared.get(info.id)) is not None:
        reasons.add(f"preemption: {spared}")
    doms, may_join = st.spread_avoid(info) if info.hard else (set(), True)   # only a rule's replica waits for it
    if doms and not may_join:
        reasons.add(f"spread: {info.spread}: the job's other replicas run in {', '.join(sorted(doms))}, and no "
                    f"other {info.spread} has room for this one")
    st.outcome.waits[info.id] = tuple(sorted(reasons))


def _names(reasons: tuple[str, ...], jobs: dict[str, str]) -> bool:
    """Whether the reasons name one of `jobs` (an id inside a longer one counts too: measured again, harmlessly)."""
    return any(j in r for r in reasons for j in jobs)


def pending_reasons(st: PlanState) -> list[Pending]:
    """Every job not placed, with why it waits: as recorded when it was decided, else (a job a later move
    left pending) measured on the final state."""
    forced = st.outcome.forced
    preempted = {p.job: p.reason for p in reversed(st.outcome.preemptions)}   # the first one
    gone = {j: "" for j in st.outcome.left if j not in st.live and j not in preempted}
    waiting: dict[str, set[str]] = {}
    as_recorded: dict[str, tuple[str, ...]] = {}   # a job waiting for what was recorded alone: sorted already
    cache: dict[tuple[object, ...], tuple[int, list[str]]] = {}
    for job_id in sorted(st.jobs):
        if job_id in st.live:
            continue
        info = st.jobs[job_id]
        recorded = st.outcome.waits.get(job_id)
        spared: set[str] = set()
        if recorded and ((preempted and _names(recorded, preempted)) or (gone and _names(recorded, gone))):
            recorded = None     # a later preemption or move (moves.eject_pairs) took out what it named: measured
            if (why := st.outcome.spared.get(job_id)) is not None and not _names((why,), preempted):  # again
                spared.add(f"preemption: {why}")
        if recorded and info.parent == job_id and job_id not in forced and job_id not in preempted \
                and job_id not in st.draining and st.fleet.for_people:
            as_recorded[job_id] = recorded
            continue
        # draining: it runs until its checkpoint, holding its own quota and units, so what the state says of placing
        # it elsewhere would name itself as the holder; not for people: nobody reads them (planner.plan)
        if job_id in st.draining or not st.fleet.for_people:
            reasons = set()
        else:
            reasons = set(recorded) if recorded is not None else job_reasons(st, info, cache, st.version) | spared
        if job_id in forced:
            reasons.add(f"{WAS_RUNNING}{forced[job_id]}")
        if job_id in preempted:
            reasons.add("preempted: " + preempted[job_id])
        if not reasons and st.fleet.for_people:
            reasons.add(QUEUED_BEHIND)
        waiting.setdefault(info.parent, set()).update(reasons)
    for parent, reasons in waiting.items():
        first = st.fleet.by_job[parent]
        if first.siblings:   # a spread job: some replicas may run
            left = sum(1 for s in first.siblings if s not in st.live)
            if left < len(first.siblings):
                reasons.add(f"{left} of {len(first.siblings)} replicas wait; the others run")
    done = {job: tuple(sorted(reasons)) for job, reasons in waiting.items()}
    return [Pending(job, reasons) for job, reasons in sorted({**done, **as_recorded}.items())]
