"""Step 2 of the planner: stickiness against the base plan.

A job placed in the base plan keeps its exact units when its cluster is active or cordoned, its pool still
exists with room for those units, and its option still means the same gang; it is then `kept` whatever its
quota or budget now say (running work is not stopped by a policy edit; preemption handles reclaim). Jobs in
a draining cluster move if another pool can take them, at most `max_migrations_per_plan` per plan, fewest
lost minutes first (`checkpoint.minutes_at_risk`: from git alone `checkpoint_minutes`, the most each loses;
from what runs, its running minutes modulo that; a job without checkpoints whose running time is not known,
last); those that cannot move stay, each with a quantified reason on its placement
(`reason` of a `kept` placement: what blocks every option elsewhere, or the migration limit). Jobs in a
down cluster, or whose pool or option changed, must be placed again: they return to the queue with the
reason (`st.outcome.forced`), and count as moved if they land. A running job whose option now asks more cpus or
memory per unit than its units have free is kept as it runs (`PoolState.take_as_runs`), with that reason: it
holds what its pods request (observed: `Running.cpus`/`memory_gib`, or a spread service group's `group_asks`: its
JobSet's, RayJob's, RayService's, Deployment's or LeaderWorkerSet's pod templates), at most what the units have
left; not known (from git alone, or templates that state none), what they have left, and the reason says which.

With `--observed` (plan/live.py) the base is what runs (`live_base`), a lost cluster's pools are down, and a
placement on a failed unit must move too; both forced moves count the work lost since the last checkpoint
(`st.outcome.lost_work`) and are not limited by `max_migrations_per_plan` (a job cannot stay on a dead unit).
A running job whose units are not known takes free units of the pool it runs in, after every running job whose
units are known (issue 20: a service kept first by its priority took a running TPU job's slice in the plan's
bookkeeping, and the loop re-created that job while other slices were free); where its option now asks more
cpus or memory than any unit has free, it is kept as it runs on units with its accelerators and what its pods
request free, as one whose units are known is (before, it was placed again: "which has no room for it now").
What runs beats what was only planned: the base's placements of jobs the snapshot does not show running (a
start that failed, a copy a fault or preemption removed) are kept after every running job, and only on units
still free; otherwise the job is placed again like any waiting job. Kept first, such a placement took the
units of a job that runs there (the plan moved the running job's units in its bookkeeping), and the loop tried
a start that could not succeed on them every cycle: a job waited days (issue 15). Nor is such a placement
kept past its team's quota or budget as they stand after what runs: it is a start still to make, held to the
rules of any start (issue 22: kept unchecked, a job whose start waited, for a victim's checkpoint or a node,
started a cycle later over quota, beside the running work that had taken the quota meanwhile).
"""

from __future__ import annotations

import math

from ..checkpoint import minutes_at_risk
from ..resolve import ResolvedOption, gang_fit, residency_fit
from .capacity import Gang, PoolState, gang_for
from .live import lost_work
from .place import try_place
from .reasons import job_reasons
from .spread import split_base
from .state import JobInfo, PlanState, amount, pin_fit, qkey
from .types import Placement
from .units import interchangeable


def _option_kept(info: JobInfo, ps: PoolState, bp: Placement) -> ResolvedOption | None:
    """The option a base placement keeps: of the options that run on the pool as the same gang (accelerators
    per unit and units), its own index first, then the others in order, the first whose cpus and memory its
    units still have free; else the first of them (its option now asks more per unit than its units have:
    `keep_base` keeps it as it runs); else its own index while that option runs on the pool (the shape check
    then says its gang changed); None when no option does. An option added, removed, reordered or edited
    before it shifts the index of the gang that runs: before, such a job was placed again with an untrue reason
    ("its option N no longer runs on ...", "the job's shape changed", or "its units on P are gone" when the
    option now at its index asked more cpus), and the diff showed a running job moving to where it was;
    plan/live.py numbers what runs the same way."""
    def runs(o: ResolvedOption) -> bool:
        return gang_fit(o, ps.pool, info.spot, info.job.kind) is None

    def same(o: ResolvedOption) -> bool:
        gang = gang_for(o, ps.pool)
        return gang.accelerators == bp.accelerators_per_unit and \
            (not bp.units or len(bp.units) == max(1, gang.whole_units) * info.job.replicas)

    def room(o: ResolvedOption) -> bool:
        return not bp.units or ps.can_take(bp.units, gang_for(o, ps.pool))

    own = info.options[bp.option] if bp.option < len(info.options) else None
    if own is not None and runs(own) and same(own) and room(own):
        return own
    alike = sorted((o for o in info.options if runs(o) and same(o)), key=lambda o: o is not own)
    return next((o for o in alike if room(o)), alike[0] if alike else own if own is not None and runs(own) else None)


def _grown(opt: ResolvedOption, asked: Gang, held: Gang, free: tuple[int, int], key: str, beside: list[str],
           runs_with: tuple[int | None, int | None], known: str) -> str:
    """Why a running job is kept on units that lack what its option asks (`PoolState.take_as_runs`), and what it
    holds there. Which job of a node's grew is not known (a placement records no cpus): the reason names what it
    asks and what the jobs kept on its units first leave, never that its own request changed. What it holds is
    what its pods request where that is observed (`runs_with`), else what the units have left (`known` says why
    not: planned from git alone, or no request read from what runs it)."""
    dims = [("cpus", asked.cpus, free[0], held.cpus, runs_with[0]),
            ("GiB memory", asked.memory_gib, free[1], held.memory_gib, runs_with[1])]
    more = [(f"{a} {name}", f"{f}" if name == "cpus" else f"{f} GiB") for name, a, f, _, _ in dims if a > f]
    holds = []
    for name, a, f, h, r in dims:
        if a <= f:
            continue
        holds.append(f"the {h} {name} its pods request" if r is not None and h >= r else
                     f"the {h} {name} they have left (its pods request {r})" if r is not None else
                     f"the {h} {name} they have left (what it runs with is not known: {known})")
    others = f" beside {', '.join(beside)}" if beside else ""
    return (f"its option {opt.index} asks {' and '.join(a for a, _ in more)} per node, more than its units on "
            f"{key} have free{others} ({', '.join(h for _, h in more)}): it is kept as it runs, holding "
            f"{' and '.join(holds)}, and runs what its option asks when it starts again")


def _runs_with(st: PlanState, info: JobInfo, bp: Placement) -> tuple[int | None, int | None]:
    """The cpus and GiB memory one pod of a running job requests (its object's, or its service group's, pod
    templates), each None when not known."""
    live = st.fleet.live
    if live is None:
        return None, None
    ran = live.running.get(info.parent)
    group = live.group_asks.get((info.parent, bp.cluster, bp.pool))
    return (ran.cpus, ran.memory_gib) if ran is not None else group[:2] if group else (None, None)


def _as_runs(st: PlanState, info: JobInfo, ps: PoolState, opt: ResolvedOption, gang: Gang, units: tuple[int, ...],
             runs_with: tuple[int | None, int | None]) -> Gang | None:
    """Take `units` for a running job as it runs (`PoolState.take_as_runs`) and say why (`_grown`); None (nothing
    taken) when their accelerators are not free."""
    key = ps.pool.key
    beside = sorted(j for j in st.on_pool.get(key, ()) if set(st.live[j].units) & set(units))
    held = ps.take_as_runs(units, gang, runs_with)
    if held is not None:
        known = "planned from git alone" if st.fleet.live is None else \
            "the pod templates of what runs it state no such request, or none Fleet can read"
        free = (min(ps.free_cpu[u] for u in units) + held.cpus,   # what they had before it took its part
                min(ps.free_mem[u] for u in units) + held.memory_gib)
        st.outcome.stay_reason[info.id] = _grown(opt, gang, held, free, key, beside, runs_with, known)
    return held


def respec_of(st: PlanState, info: JobInfo, ps: PoolState) -> str | None:
    """What of its pods a job's file changed, where the job runs as a gang (not a service: its Deployments roll
    out; not a Slurm job: no JobSet): against the base commit's file (`Validated.respec`), or against what its
    JobSet runs (its `fleet.dev/pod-digest`, or where it has none what its pod template runs, plan/live.py: "",
    which fields is not known). None: nothing, or not known."""
    if info.job.kind == "inference" or ps.pool.provider == "slurm":
        return None
    live = st.fleet.live
    if live is not None:
        r = live.running.get(info.parent)
        return "" if r is not None and r.pods_changed else None
    return st.fleet.v.respec.get(info.parent)


def _cannot_hold(ps: PoolState, bp: Placement) -> str | None:
    """Why the pool itself no longer holds what the job runs (its cluster file changed: fewer units, smaller
    ones), where its option no longer fits or its shape reads changed; None: the pool would hold it, so what
    changed is the job's file (plan/types.py `changed_away` stops a running copy only for that). Before
    2026-12-07 a pool shrunk under a job read "its option N no longer runs", and a job whose file changed some
    other field was stopped as if its file had moved it away."""
    units = len(bp.units) if interchangeable(ps.pool) else max(bp.units, default=-1) + 1
    if bp.accelerators_per_unit > ps.pool.unit_accelerators or units > ps.pool.max:
        return (f"pool {ps.pool.key} no longer holds what it runs ({len(bp.units)} unit(s) of "
                f"{bp.accelerators_per_unit} accelerators; the pool's units hold {ps.pool.unit_accelerators}, "
                f"its max is {ps.pool.max})")
    return None


def _respec_head(st: PlanState, info: JobInfo, ps: PoolState) -> str | None:
    what = respec_of(st, info, ps)
    if what is None:
        return None
    return f"its file changed what its pods run{f' ({what})' if what else ''}, which a running JobSet cannot take"


def restart_reason(st: PlanState, info: JobInfo, ps: PoolState) -> str | None:
    """Why a job kept where it runs is re-created there (`respec_of`), None: it is not."""
    head = _respec_head(st, info, ps)
    return None if head is None else f"{head}: re-created with it where it runs, from its last checkpoint"


def _respec_elsewhere(st: PlanState, info: JobInfo, ps: PoolState) -> bool:
    """A job whose file changed what its pods run, kept as it runs on units that lack what its new pods ask
    (`_as_runs`): re-created where they fit, another node or pool, as any restart from its last checkpoint (it is
    re-created wherever it lands); where none takes it now, it runs on as it started, not re-created, and says so.
    Before 2026-12-07 it was re-created on its units, where its new pods could not be scheduled: the plan said it
    runs while it waited, and its place was lost."""
    stay, key = st.outcome.stay_reason, ps.pool.key
    head = _respec_head(st, info, ps)
    lv = st.evict(info.id)
    gang = st.gang(lv.option, ps)
    if ps.can_take(lv.units, gang):
        # Room a job re-created elsewhere before it leaves on its units, once the loop has moved that job (a move
        # can wait for the migration limit): it runs on as it started until then. Re-created there at once, its
        # new pods could not be scheduled while that job's old copy ran (review).
        st.put_back(lv)
        stay[info.id] = f"{head}; {stay.get(info.id, '')}, which it does once the jobs re-created elsewhere have " \
                        "left its units"
        return False
    free = (min(ps.free_cpu[u] for u in lv.units), min(ps.free_mem[u] for u in lv.units))
    short = " and ".join(f"{a} {name}" for name, a, f in (("cpus", gang.cpus, free[0]),
                                                          ("GiB memory", gang.memory_gib, free[1])) if a > f)
    lacks = f"{head}, and its new pods ask {short} per node, more than its units on {key} have free"
    if try_place(st, info, allow_borrow=True, status_reason=f"{lacks}: re-created with it where they fit, from its "
                                                            "last checkpoint"):
        st.outcome.restarts[info.id] = st.live[info.id].reason     # its lost work (planner.py)
        stay.pop(info.id, None)
        return True
    blocked = "; ".join(sorted(job_reasons(st, info))) or "no other pool takes it now"
    st.put_back(lv)
    stay[info.id] = f"{lacks} ({blocked}): it runs as it started until they fit, and is re-created then"
    return False


def keep_base(st: PlanState) -> list[JobInfo]:
    """Keep what the base placed where it still may run; return the queue (every job not placed), by id."""
    forced = st.outcome.forced
    draining: list[JobInfo] = []
    no_room: list[tuple[JobInfo, PoolState]] = []
    base = split_base(st.fleet, st.base)   # a spread job's per replica
    live = st.fleet.live

    def runs(job_id: str) -> bool:
        return live is None or (job_id in st.jobs and (st.jobs[job_id].parent in live.running
                                                       or st.jobs[job_id].parent in live.serving))

    def respecced(p: Placement) -> bool:    # re-created (`restart_reason`): its new pods start beside what runs
        info, ps = st.jobs.get(p.job), st.pools.get(p.pool_key)
        return info is not None and ps is not None and respec_of(st, info, ps) is not None

    # What runs on known units first (what is re-created for its file last of it), then what runs on units nobody
    # knows (a Deployment's replicas: they take free units of their pool), then what was only planned: a job's
    # units never go to another in bookkeeping.
    for bp in sorted(base, key=lambda p: (not runs(p.job), not p.units, respecced(p),
                                          -st.jobs[p.job].priority if p.job in st.jobs else 0, p.job)):
        info = st.jobs.get(bp.job)
        if info is None:
            continue  # the job file is gone: it finished or was withdrawn
        key = f"{bp.cluster}/{bp.pool}"
        ps = st.pools.get(key)
        if ps is None:
            forced[bp.job] = f"pool {key} no longer exists"
            continue
        if live is not None and (why := live.lost.get(bp.cluster) or live.unit_failure(key, bp.units)):
            forced[bp.job] = why
            st.outcome.lost_work[bp.job] = lost_work(live, info.parent, info.job.checkpoint_minutes,
                                                     bp.accelerators_per_unit * len(bp.units))
            continue
        if ps.pool.status == "down":
            forced[bp.job] = f"cluster {bp.cluster} is down"
            continue
        opt = _option_kept(info, ps, bp)
        if opt is None:
            forced[bp.job] = _cannot_hold(ps, bp) or f"its option {bp.option} no longer runs on {key}"
            continue
        if (why := residency_fit(info.job, ps.pool) or pin_fit(info, ps.pool)) is not None:
            forced[bp.job] = f"pool {key}: {why}"
            continue
        gang = gang_for(opt, ps.pool)
        expected = max(1, gang.whole_units) * info.job.replicas
        held = None
        units = bp.units or ps.find(gang, info.job.replicas, dry_run=False)   # running, units not known
        if units is None and runs(bp.job) and not gang.whole_units and gang.accelerators == bp.accelerators_per_unit:
            # Running, its units not known, and its option now asks more cpus or memory than any unit has free:
            # kept as it runs (as one whose units are known is) on units with its accelerators and what its pods
            # request free. Before, it was placed again: "which has no room for it now", a running service moved.
            runs_with = _runs_with(st, info, bp)
            lean = Gang(0, gang.accelerators, runs_with[0] or 0, runs_with[1] or 0)
            if (units := ps.find(lean, info.job.replicas)) is not None:
                held = _as_runs(st, info, ps, opt, gang, units, runs_with)
        if units is None:
            forced[bp.job] = f"it runs on {key}, which has no room for it now (the pool's max is {ps.pool.max})"
            continue
        if gang.accelerators != bp.accelerators_per_unit or len(units) != expected:
            if not bp.units:
                ps.release(units, gang)
            forced[bp.job] = _cannot_hold(ps, bp) or "the job's shape changed"
            continue
        if not runs(bp.job) and (st.quota.shortfall(info.team, qkey(info, opt), amount(info, opt))
                                 or st.attributed(ps, gang, units) > st.budget_room(info.team)):
            if not bp.units:
                ps.release(units, gang)
            continue  # planned, never started, and no longer within its team's quota or budget: placed again
        if bp.units and not ps.take(bp.units, gang):
            if not runs(bp.job):
                continue  # planned, never started (or its copy is gone): placed again like any waiting job
            # Running work is not stopped for a request it did not start with: its option asks more cpus or
            # memory per unit than its units have left (their accelerators are its), and it runs there as it started.
            held = _as_runs(st, info, ps, opt, gang, bp.units, _runs_with(st, info, bp))
            if held is None:
                # A running GPU job's units are bookkeeping (nodes of a group are interchangeable, and the units
                # its JobSet says are those of the plan that rendered it): other free units of its pool do as well.
                found = ps.find(gang, info.job.replicas, dry_run=False) \
                    if live is not None and info.parent in live.running and interchangeable(ps.pool) else None
                if found is None:
                    forced[bp.job] = f"its units on {key} are gone (the pool's max is now {ps.pool.max})" \
                        if max(bp.units) >= ps.pool.max else f"its units on {key} are held by other running work"
                    continue
                units = found
        st.commit(info, ps, opt, units, kept=True, gang=held)
        if (why := restart_reason(st, info, ps)) is not None:
            # JobSet's webhook refuses a change of the pods of a JobSet that exists: kept on its units, it is
            # re-created there (`moved`, summary.freeze). Before 2026-12-07 it ran on as it started while apply sent
            # the new spec over it (refused by a real API server; "updated")
            if held is None:
                st.outcome.restarts[bp.job] = why      # its lost work: where the plan still restarts it (planner.py)
            else:
                no_room.append((info, ps))             # its new pods do not fit there: `_respec_elsewhere`
        if ps.pool.status == "draining":
            draining.append(info)

    moved_away = {info.id for info, ps in no_room if _respec_elsewhere(st, info, ps)}   # after what runs is kept
    draining = [info for info in draining if info.id not in moved_away]
    limit = st.fleet.placement.max_migrations_per_plan
    moved = 0
    def lost_minutes(info: JobInfo) -> float:   # minutes since its last checkpoint; unknown last
        ran = live.run_minutes.get(info.parent) if live is not None else None
        minutes = minutes_at_risk(ran, info.job.checkpoint_minutes)
        return math.inf if minutes is None else minutes

    stay = st.outcome.stay_reason
    for info in sorted(draining, key=lambda i: (lost_minutes(i), -i.priority, i.id)):
        cluster = st.live[info.id].pool.pool.cluster
        why = f"cluster {cluster} is draining"
        grown = f"; {stay[info.id]}" if info.id in stay else ""   # kept as it runs (`_grown`): still true
        if moved >= limit:
            stay[info.id] = f"{why}; waits for the migration limit ({limit} per plan){grown}"
            continue
        lv = st.evict(info.id)
        if try_place(st, info, allow_borrow=True, status_reason=why):
            moved += 1
        else:
            # Why no other pool takes it, measured now, before any new work is placed: capacity and quota
            # only get scarcer later in the plan, so the reason still holds in the final plan.
            blocked = "; ".join(sorted(job_reasons(st, info))) or "no pool outside the cluster takes it now"
            stay[info.id] = f"{why}; no room elsewhere: {blocked}{grown}"
            st.put_back(lv)
    return [info for job_id, info in sorted(st.jobs.items()) if job_id not in st.live]
