"""Job groups and elastic gangs in the plan (issue 26, docs/workloads.md). Pure.

**Elastic gangs** (`workers: {min, max}`). The planner proper sees an elastic job at `min` units
(validate_workloads.elastic_options), so every rule it has (priority order, quota, budget, preemption,
stickiness) applies to the part the job cannot run without. A job running above `min` is planned at the size it
holds first (`at_sizes`), and only when waiting work of its class or higher could use its pool, or that plan
would move or stop it (`needs_room`), is every elastic job cut to its first `min` units (`trim_base`) and the
plan made again: so an elastic job is shrunk (never below `min`) before anyone is preempted or moved, and
preemption only ever sees its `min` units. Then `grow` gives each placed elastic job, highest class first, whole
units of its own pool that are *idle* after everything else was placed, within the team's quota and budget, the
units it held before first: units the pool pays for anyway (its `min`) that no job uses, so growth never raises
the bill nor delays other work. Never the pool's headroom above what it pays for: in `fleet simulate`
(bench/bench_workloads.py) growing into new units cost goodput (the whole gang waits while they
are provisioned, then shrinks again when work arrives). A running job grows (a restart) only when that at least
doubles it, at its checkpoint, and saves more than twice the restart (`_worth_restart`). Every change of a
running elastic job's size is said in the placement's `resize`: grown or shrunk, from how many units to how
many, and why. A JobSet (and a RayJob) is resized by a restart at the new size from
the job's last checkpoint: the vendored Kueue's workload slices (`kueue.x-k8s.io/elastic-job`, feature gate
ElasticJobsViaWorkloadSlices) resize only batch/v1 Jobs and RayClusters in place, not JobSets.

**Groups** (`group:`). Members (one team's jobs naming the group) run in one cluster (or one region with
`group_scope: region`) and start all-or-nothing. After a plan, a group whose members are split or partly pending
is pinned (state.pin_fit) to one cluster or region (one with a running member first, then one whose pools could
hold the whole group, then the most placed work) and planned again; a group still incomplete is withheld: none
of its members that is not running starts, and when the plan preempted or moved a running member off, the whole
group stops with it (a preemption per member, saying why). At most two extra plans, only when some group needs
it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from ..checkpoint import minutes_at_risk
from ..resolve import run_hours
from ..validate import Validated
from ..validate_workloads import elastic_options
from .repack import MARGIN
from .state import JobInfo, PlanState, qkey
from .types import RESIZE_RESTART, Pending, Plan, Preemption

RESTART = RESIZE_RESTART


def elastic_jobs(st: PlanState) -> dict[str, int]:
    """Elastic job id -> its `workers.min`."""
    return {j: info.job.workers.min for j, info in st.jobs.items() if info.job.workers is not None}


def held_above_min(base: Plan | None, mins: dict[str, int]) -> dict[str, int]:
    """Elastic job id -> the units its base placement holds, where that is above its `min`."""
    return {p.job: len(p.units) for p in base.placements if p.job in mins and len(p.units) > mins[p.job]} \
        if base is not None else {}


def at_sizes(v: Validated, sizes: dict[str, int]) -> Validated:
    """`v` with these elastic jobs' options (resolved at `min`) at the given numbers of units."""
    if not sizes:
        return v
    opts = dict(v.options)
    for job in v.loaded.jobs:
        if job.id in sizes and job.id in opts and job.workers is not None:
            per = tuple(replace(o, count=o.count // job.workers.min, slices=1 if o.shape is not None else o.slices)
                        for o in opts[job.id])
            opts[job.id] = elastic_options(per, sizes[job.id])
    return replace(v, options=opts)


def needs_room(st: PlanState, plan: Plan, held: dict[str, int]) -> bool:
    """Some job of the class of an elastic job held above `min`, or higher, waits and could use its pool, or the
    plan moved or stopped such a job to make room: then the plan is made again with every elastic job at `min`
    (shrink before anyone is preempted or moved)."""
    if any(not plan.placements_of(j) or any(p.status != "kept" for p in plan.placements_of(j)) for j in held):
        return True
    pools = {(p.pool_key, st.fleet.by_job[p.job].priority) for p in plan.placements if p.job in held}
    for q in plan.pending:
        info = st.fleet.by_job.get(q.job)
        if info is not None and any(key in st.reach(info) and info.priority >= prio for key, prio in pools):
            return True
    return False


def trim_base(base: Plan | None, mins: dict[str, int]) -> Plan | None:
    """The base with every elastic placement cut to its first `min` units (the rest is grown back later)."""
    if base is None or not any(p.job in mins and len(p.units) > mins[p.job] for p in base.placements):
        return base
    out = []
    for p in base.placements:
        n = mins.get(p.job)
        if n is not None and len(p.units) > n:
            p = replace(p, units=p.units[:n], hourly_usd=p.hourly_usd * n / len(p.units))
        out.append(p)
    return replace(base, placements=tuple(out))


def grow(st: PlanState, base: Plan | None) -> dict[str, str]:
    """Grow each placed elastic job on idle units of its pool (module docstring); job id -> why it grew ("": a
    running job that only took back the units it runs on)."""
    before = {p.job: p for p in base.placements} if base else {}
    out: dict[str, str] = {}
    placed = (i for j in st.live if (i := st.jobs.get(j)) is not None)     # far fewer than the jobs
    for info in sorted((i for i in placed if i.job.workers is not None), key=lambda i: (-i.priority, i.id)):
        assert info.job.workers is not None
        lv = st.live[info.id]
        ps, have = lv.pool, len(lv.units)
        if lv.gang.whole_units == 0 or have >= info.job.workers.max:
            continue
        full = ps.pool.unit_accelerators
        free = [u for u, f in enumerate(ps.free_acc) if f == full and u not in ps.blocked]
        held = before.get(info.id)
        first = set(held.units) if held is not None and held.pool_key == ps.pool.key else set()
        free.sort(key=lambda u: (u not in first, u))
        idle = max(0, ps.pool.min - ps.used_units())          # paid for, used by nobody
        # a running gang cut to its min for the planning (`trim_base`) takes back the units it runs on that nobody
        # took: keeping its size is no restart and spends nothing new (before 2026-12-07 it grew back only on idle
        # paid units and only to double, so a gang in a pool nobody waited for was shrunk, "its pool has no idle
        # unit left for it", which was not true, once the loop carried resizes out)
        runs = len(first) if lv.kept else 0
        own = sum(1 for u in free if u in first)
        extra = free[:min(max(idle, min(own, runs - have)), info.job.workers.max - have)]
        per_unit = replace(lv.option, slices=1, count=lv.option.count // have) if lv.option.shape is not None \
            else replace(lv.option, count=lv.option.count // have)
        while extra:
            (bigger,) = elastic_options((per_unit,), have + len(extra))
            added = (bigger.count - lv.option.count)
            hourly = ps.unit_hourly_usd * len(extra)
            if st.quota.shortfall(info.team, qkey(info, bigger), added) == 0 \
                    and hourly <= st.budget_room(info.team):
                break
            extra = extra[:-1]
        if lv.kept and have + len(extra) > runs and info.id not in st.outcome.restarts \
                and not _worth_restart(st, info, max(runs, have), have + len(extra),
                                       lv.option.relative_speed):   # (re-created anyway: grows)
            extra = extra[:max(0, runs - have)]     # a running job restarts to grow past its size: only when worth it
        if not extra:
            continue
        st.evict(info.id)
        units = tuple(sorted((*lv.units, *extra)))
        (bigger,) = elastic_options((per_unit,), len(units))
        taken = ps.take(units, st.gang(bigger, ps))
        assert taken, "grow: the idle units were checked free"
        st.commit(info, ps, bigger, units, kept=lv.kept, reason=lv.reason)
        # why it grew past the size it runs at; "" where it only took back its own units (no growth, no restart)
        out[info.id] = f"{len(units) - max(runs, have)} idle unit(s) of {ps.pool.key} (paid for by its min " \
                       f"{ps.pool.min}, used by no other job)" if len(units) > runs else ""
        if lv.kept and runs and len(units) > runs and st.fleet.live is None:   # planned from git: when is not known
            out[info.id] += "; the reconcile loop makes it at the job's checkpoint, when the time it saves beats " \
                            "twice the restart"
    return out


def _worth_restart(st: PlanState, info: JobInfo, size: int, bigger: int, speed: float) -> bool:
    """Whether a running elastic gang of `size` units restarts to grow to `bigger`: when that at least doubles it
    and, as a re-pack moves (repack.py), it is at its checkpoint (`repack.window_minutes`) and the wall time the
    growth saves on its remaining work is more than `MARGIN` times the restart (the minutes since its checkpoint
    plus `repack.restart_minutes`): the margin pays for the shrink that the next arrival in its pool brings.
    Remaining work: `duration_hours` (at `workers.max`, on its option: `resolve.run_hours` at `speed`) less its
    running minutes, as if it ran at max so far;
    without a duration or running minutes, doubling alone decides. Before 2026-12-07 doubling alone decided,
    and a gang restarted to grow at any point of its checkpoint interval, for minutes of work (docs/workloads.md)."""
    if bigger < 2 * size:
        return False
    job, live = info.job, st.fleet.live
    ran = live.run_minutes.get(info.parent) if live is not None else None
    if ran is None or job.duration_hours is None or job.workers is None:
        return True
    knobs = st.fleet.placement.repack
    lost = minutes_at_risk(ran, job.checkpoint_minutes)
    if job.checkpoint_minutes is not None and lost > knobs.window_minutes:
        return False
    work = max(0.0, run_hours(job.duration_hours, speed) * 60 - ran)          # minutes at workers.max
    saved = work * job.workers.max * (1 / size - 1 / bigger)
    return saved > MARGIN * (lost + knobs.restart_minutes)


def resize_notes(plan: Plan, base: Plan | None, grown: dict[str, str], mins: dict[str, int],
                 maxes: dict[str, int]) -> Plan:
    """Write every elastic placement's size, and why it changed from the base, into `resize`."""
    if not mins:
        return plan
    before = {p.job: p for p in base.placements} if base else {}
    holders: dict[tuple[str, int], str] = {}
    for p in plan.placements:
        for u in p.units:
            holders[(p.pool_key, u)] = p.job
    out = []
    for p in plan.placements:
        if p.job not in mins:
            out.append(p)
            continue
        n, was = len(p.units), before.get(p.job)
        size = f"{n} unit(s) of {mins[p.job]}..{maxes[p.job]}"
        why = ""
        if grown.get(p.job):
            why = f"grown on {grown[p.job]}"
        if was is not None and len(was.units) != n:
            if n > len(was.units):
                why = f"grown from {len(was.units)} to {n} units: {grown.get(p.job) or 'idle capacity'}; {RESTART}"
            else:
                took = sorted({holders[(was.pool_key, u)] for u in was.units if (was.pool_key, u) in holders
                               and holders[(was.pool_key, u)] != p.job})
                room = f"its units went to {', '.join(took)}" if took else "its pool has no idle unit left for it"
                why = f"shrunk from {len(was.units)} to {n} units (never below min {mins[p.job]}): {room}; {RESTART}"
        out.append(replace(p, resize=f"{size}" + (f": {why}" if why else "")))
    return replace(plan, placements=tuple(out))


# --- groups -------------------------------------------------------------------------------------------------


def groups_of(st: PlanState) -> dict[str, list[str]]:
    """`team/group` -> its members' job ids (the planner's jobs: finished jobs are out)."""
    out: dict[str, list[str]] = defaultdict(list)
    for info in st.fleet.by_job.values():
        if info.job.group is not None:
            out[f"{info.team}/{info.job.group}"].append(info.parent)
    return {g: sorted(m) for g, m in sorted(out.items())}


def broken(st: PlanState, plan: Plan, groups: dict[str, list[str]]) -> dict[str, str]:
    """Groups whose members are not all placed, or not together: group -> what is wrong."""
    out: dict[str, str] = {}
    for g, members in groups.items():
        places = {m: plan.placements_of(m) for m in members}
        missing = [m for m, ps in places.items() if not ps]
        scope = st.fleet.by_job[members[0]].job.group_scope
        where = {(st.pools[p.pool_key].pool.cluster if scope == "cluster" else st.pools[p.pool_key].pool.region)
                 for ps in places.values() for p in ps}
        if missing:
            out[g] = f"{', '.join(missing)} cannot be placed"
        elif len(where) > 1:
            out[g] = f"its members landed in {len(where)} {scope}s"
    return out


def pins_for(st: PlanState, plan: Plan, groups: dict[str, list[str]], bad: dict[str, str],
             running: set[str], tried: dict[str, set[str]]) -> dict[str, str]:
    """Member -> `cluster:C` / `region:R`: of the places not `tried` for its group yet (recorded there), the one
    with a running member first, then one whose pools could hold every member's first option at `max`
    (accelerators per type), then the most placed work, then name. A group with no place left gets no pin."""
    pins: dict[str, str] = {}
    for g in bad:
        members = groups[g]
        scope = st.fleet.by_job[members[0]].job.group_scope

        def where(key: str, scope: str = scope) -> str:
            pool = st.pools[key].pool
            return pool.cluster if scope == "cluster" else pool.region

        room: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for key, ps in st.pools.items():
            if ps.pool.status == "active":
                room[where(key)][ps.pool.accelerator] += ps.pool.max * ps.pool.unit_accelerators
        need: dict[str, int] = defaultdict(int)
        for m in members:
            first = st.fleet.by_job[m].options[0]
            need[first.accelerator] += first.count * st.fleet.by_job[m].job.replicas
        rank: dict[str, tuple[int, int, int]] = {}
        for place, have in room.items():
            if place in tried.setdefault(g, set()):
                continue
            fits = all(have.get(acc, 0) >= n for acc, n in need.items())
            placed = [p for m in members for p in plan.placements_of(m) if where(p.pool_key) == place]
            rank[place] = (sum(p.job in running for p in placed), fits,
                           sum(p.accelerators_per_unit * len(p.units) for p in placed))
        if rank:
            best = max(sorted(rank), key=lambda k: rank[k])
            tried[g].add(best)
            pins.update((m, f"{scope}:{best}") for m in members)
    return pins


def withhold(plan: Plan, groups: dict[str, list[str]], bad: dict[str, str], running: set[str],
             stopped: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Pins that keep incomplete groups from starting (`none`), and per group why. A group with a running
    member keeps running unless the plan stopped one of them (`stopped`: member -> by whom)."""
    pins: dict[str, str] = {}
    why: dict[str, str] = {}
    for g in bad:
        members = groups[g]
        hit = [m for m in members if m in stopped]
        for m in members:
            if m not in running or hit:
                pins[m] = "none"
        why[g] = bad[g] if not hit else f"{', '.join(hit)} was preempted or moved off, so the group stops together"
    return pins, why


def group_notes(plan: Plan, groups: dict[str, list[str]], why: dict[str, str], running: set[str]) -> Plan:
    """Name every member's group on its placement; an incomplete group's members wait with the group's reason,
    and its running members that stop carry a preemption saying why."""
    if not groups:
        return plan
    of = {m: g for g, ms in groups.items() for m in ms}
    placements = tuple(replace(p, group=of[p.job]) if p.job in of else p for p in plan.placements)
    pending = []
    for p in plan.pending:
        g = of.get(p.job)
        if g is not None and g in why:
            p = Pending(p.job, (f"group {g} starts all-or-nothing and cannot start now: {why[g]}",
                                *(r for r in p.reasons if "its group" not in r)))
        pending.append(replace(p, group=g) if g is not None else p)
    pre = set(plan.preemptions)
    waiting = {p.job for p in plan.pending}
    for g, reason in why.items():
        for m in groups[g]:
            if m in running and m in waiting and not any(x.job == m for x in pre):
                pre.add(Preemption(m, m, f"group {g}: {reason}"))
    return replace(plan, placements=placements, pending=tuple(pending),
                   preemptions=tuple(sorted(pre, key=lambda x: (x.job, x.by, x.reason))))


def group_rows(plan: Plan) -> list[tuple[str, str, str]]:
    """One row per job group: (group, its members and where each runs or that it waits, the group's state)."""
    members: dict[str, list[str]] = defaultdict(list)
    where: dict[str, set[str]] = defaultdict(set)
    waiting: dict[str, int] = defaultdict(int)
    for p in plan.placements:
        if p.group:
            members[p.group].append(f"{p.job} on {p.cluster}/{p.pool} ({len(p.units)} unit(s), {p.status})")
            where[p.group].add(p.cluster)
    for q in plan.pending:
        if q.group:
            members[q.group].append(f"{q.job} pending")
            waiting[q.group] += 1
    rows = []
    for g in sorted(members):
        state = (f"waiting: {waiting[g]} of {len(members[g])} member(s) cannot start, so none starts" if waiting[g]
                 else f"running together in {', '.join(sorted(where[g]))}")
        rows.append((g, "<br>".join(sorted(members[g])), state))
    return rows
