"""Planning from what runs (`--observed FILE`): the snapshot of `fleet observe` turned into the planner's
inputs. Pure: `live_inputs(v, snapshot, now)` reads the validated repository and the snapshot, nothing else.

Only the teams' own objects count: the snapshot is split first (observe/owners.py), so an object with Fleet's
labels outside its team's namespace (an impostor) is neither running, nor done, nor serving.

What the planner does with each input (issue 12 item 2; DESIGN.md sections 2 and 4b):
- `running`: a job whose Workload is admitted or running (and whose JobSet carries Fleet's labels) stays
  exactly where it runs: cluster from the snapshot, pool from the JobSet's `fleet.dev/pool` label, units from
  its `fleet.dev/units` annotation (render stamps it) or, without it, the base plan's units on that pool, or
  else free units of that pool. The observation beats the base plan. An inference service whose Deployments
  or LeaderWorkerSets (Fleet's labels) all sit in one pool stays there too, on free units of that pool (a
  Deployment says nothing of units); a service spread over several pools keeps each group where it runs, with
  its `spec.replicas` (`serving`), on free units of its pool, also with no base plan (a first cycle). The
  planner keeps it (`kept`) whatever quota or budget now say, as it keeps the base's placements (sticky.py):
  on a first cycle, as many replicas as its objects run; the file's further replicas are new work, placed
  under quota, room and budget (before 2026-12-07 a service on one pool kept them all: raising `replicas`
  took quota it did not have).
  A spread service seen as one running object (a JobSet, as `fleet simulate` shows it) in one of the pools
  the base gives it keeps all the base's placements too (that group on the units it is seen on): dropping
  them would make the planner place those replicas anew every cycle (and preempt for them: the churn of
  issue 15).
- `done`: a job that finished with the spec it has now (the JobSet's `fleet.dev/spec-digest`, or a
  completion record with that digest: observe/completions.py) is not planned at all: its capacity is free and
  it never runs again. `succeeded` and `failed` (after its restarts) alike; a changed file has another
  digest, so it is planned again. A finished JobSet without a digest annotation (made before Fleet stamped
  one) counts as finished with the current spec: never re-run a job by mistake.
- `evicted`: an evicted Workload (not admitted again) is dropped from the base, so it is placed again by the
  normal placement, in any pool.
- `failed_units`: a unit (TPU slice, or a node with a unit index) with a node NotReady, cordoned or
  accelerator-unhealthy for at least `reconcile.node_failed_after_minutes` (the condition's `since` against
  `now`; for a cordon, which has no time of its own, since Fleet first saw it: `Node.cordoned_since`) is
  unavailable: nothing is placed on it and jobs on it move, with the work lost since their last
  checkpoint counted (`checkpoint.work_at_risk`: running minutes modulo `checkpoint_minutes`).
  `failed_nodes`: such nodes of a GPU node group (no unit index: its nodes are interchangeable) each take one
  unit of the pool's capacity away (its highest units); which job ran on that node the snapshot does not say
  (no pods), so those jobs are not moved by the plan: JobSet restarts them, or Kueue evicts them
  (`NodeFailures`) and the next snapshot shows them evicted, to be placed again.
  On a Slurm cluster whose node list was read, a pool's units past the nodes its partition lists are failed
  too (no loop grows a partition; one that does not exist lists none).
- `lost`: a cluster `unreachable` since at least `reconcile.cluster_lost_after_minutes` counts as down; jobs
  there are placed elsewhere with a reason naming it. A cluster unreachable for less keeps its jobs as the
  base placed them (assumed still running).
Forced moves (failed units, lost clusters) are not limited by `max_migrations_per_plan`; voluntary ones
(draining clusters) still are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from ..checkpoint import work_at_risk
from ..kube_rules import pod_accelerators
from ..models import Job, pod_digest, spec_digest
from ..observe.model import ClusterObservation, Node, Snapshot, unread_lists
from ..observe.occupancy import pod_units
from ..observe.owners import owned_snapshot
from ..resolve import ResolvedOption, ResolvedPool, gang_fit, spot_policy, spread_of
from ..validate import Validated
from .capacity import Gang, gang_for
from .types import Cost, LostWork, Placement, Plan

RUNNING_PHASES = ("admitted", "running")


@dataclass(frozen=True, slots=True)
class Running:
    job: str
    cluster: str
    pool: str
    units: tuple[int, ...]          # () when not known: the planner takes free units of the pool
    cpus: int | None = None         # what one of its pods requests, None when not known: what it holds if its
    memory_gib: int | None = None   # option now asks more than its node has (plan/sticky.py); read from the pod
    # templates of its JobSet, RayJob, RayService, or its service's Deployment / LeaderWorkerSet (observe/asks.py)
    earlier_spec: bool = False      # it runs a spec its file no longer has (its JobSet's digest differs)
    accelerators: int | None = None  # what one of its pods requests (as `cpus`), None when not known
    pods_changed: bool = False      # its file changed what its pods run (its JobSet's `fleet.dev/pod-digest`, or
    # on a JobSet made before Fleet stamped it the same digest read from its pod template, observe/podfields.py,
    # differs from models.pod_digest of the file; unknown, a template Fleet does not read back: False)


@dataclass(frozen=True)
class LiveInputs:
    now: datetime
    running: Mapping[str, Running] = field(default_factory=dict)
    done: Mapping[str, str] = field(default_factory=dict)             # job -> succeeded | failed
    evicted: frozenset[str] = frozenset()
    failed_units: Mapping[str, Mapping[int, str]] = field(default_factory=dict)   # pool key -> unit -> why
    lost: Mapping[str, str] = field(default_factory=dict)             # cluster -> why it counts as down
    unreachable: Mapping[str, str] = field(default_factory=dict)      # cluster -> why (not lost yet)
    run_minutes: Mapping[str, float] = field(default_factory=dict)    # job -> minutes running, when known
    failed_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # pool key -> why, per failed node
    serving: Mapping[str, tuple[tuple[str, str, int, tuple[int, ...]], ...]] = field(default_factory=dict)
    # inference job -> (cluster, pool, replicas, units) of each Deployment/LeaderWorkerSet group it runs:
    # `spec.replicas`, and the units its pods are on (observe/occupancy.py; () when none is seen)
    group_asks: Mapping[tuple[str, str, str], tuple[int | None, int | None, int | None]] = field(default_factory=dict)
    # (inference job, cluster, pool) -> the cpus, GiB memory and accelerators one pod of that group requests (its
    # Deployments' / LeaderWorkerSets' pod templates: `ServiceWorkload.pod_cpus`...), each None when not known
    groups: Mapping[str, tuple[Running, ...]] = field(default_factory=dict)
    # a spread service seen as JobSets (as the simulator shows one: a JobSet per group, one name) -> each group that
    # runs; `running` holds one of them (live_base keeps every one)
    # `failed_nodes`: of a pool whose nodes carry no unit index (GPU node groups: nodes are interchangeable, so a
    # failed node takes one unit of capacity away; the jobs on it are restarted by JobSet or evicted by Kueue and
    # show up as such in the next snapshot)

    def unit_failure(self, pool_key: str, units: tuple[int, ...]) -> str | None:
        bad = self.failed_units.get(pool_key, {})
        return next((f"unit {u} of {pool_key} failed: {bad[u]}" for u in units if u in bad), None)


def _most(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def _minutes(since: datetime | None, now: datetime) -> float | None:
    return None if since is None else (now - since).total_seconds() / 60.0


def _node_failure(n: Node, now: datetime, after: float) -> str | None:
    """Why the node's unit is failed, or None: a problem condition (or cordon) old enough. A cordon's age runs
    from when Fleet first saw it (`Node.cordoned_since`; a cordon has no time of its own); unknown, it is 0."""
    if n.usable:
        return None
    ages = [("NotReady" if c.type == "Ready" else f"{c.type}={c.status}", _minutes(c.since, now)) for c in n.problems]
    if n.unschedulable:
        ages.append(("cordoned", _minutes(n.cordoned_since, now) or 0.0))
    old = [(state, m) for state, m in ages if m is not None and m >= after]
    if old:
        state, m = max(old, key=lambda x: x[1] or 0.0)
        return f"node {n.name} {state} for {m:.0f} min (threshold {after:g})"
    return None


def _cluster_units(c: ClusterObservation, now: datetime, after: float, out: dict[str, dict[int, str]],
                   nodes: dict[str, list[str]]) -> None:
    for n in c.nodes:
        why = _node_failure(n, now, after) if n.pool is not None else None
        if why is None:
            continue
        if n.unit is None:
            nodes.setdefault(f"{c.name}/{n.pool}", []).append(why)
        else:
            out.setdefault(f"{c.name}/{n.pool}", {}).setdefault(n.unit, why)


def _absent_nodes(c: ClusterObservation, pools: list[tuple[ResolvedPool, str | None]],
                  out: dict[str, dict[int, str]]) -> None:
    """A Slurm pool's units are its partition's nodes (numbered in name order, slurm/observe.py), which no loop
    grows: the units past those slurmctld lists are unavailable, with the reason (a partition that does not
    exist lists none, and every job placed there would be refused)."""
    for p, partition in pools:
        have = sum(1 for n in c.nodes if n.pool == p.name)
        for u in range(have, p.max):
            out.setdefault(p.key, {}).setdefault(u, f"partition `{partition}` lists {have} of the pool's "
                                                 f"{p.max} nodes in slurmctld's answer")


def live_inputs(v: Validated, snap: Snapshot, now: datetime | None = None) -> LiveInputs:
    """The planner's inputs from a snapshot (module docstring); `now` defaults to when it was observed."""
    assert v.loaded.placement is not None
    knobs = v.loaded.placement.reconcile
    snap = owned_snapshot(v, snap).snapshot      # the teams' objects only (an owned snapshot: unchanged)
    now = now or snap.observed_at
    if now.tzinfo is None:          # a naive time is UTC, as every time in a snapshot is
        now = now.replace(tzinfo=UTC)
    jobs = {j.id: j for j in v.loaded.jobs}
    digests = {jid: spec_digest(j) for jid, j in jobs.items()}
    running: dict[str, Running] = {}
    done: dict[str, str] = {}
    evicted: set[str] = set()
    failed_units: dict[str, dict[int, str]] = {}
    lost: dict[str, str] = {}
    unreachable: dict[str, str] = {}
    run_minutes: dict[str, float] = {}
    failed_nodes: dict[str, list[str]] = {}
    serving: dict[str, dict[tuple[str, str], tuple[int, tuple[int, ...]]]] = {}
    group_asks: dict[tuple[str, str, str], tuple[int | None, int | None, int | None]] = {}
    groups: dict[str, dict[tuple[str, str], Running]] = {}
    partitions = {f"{c.name}/{p.name}": p.partition for c in v.loaded.clusters if c.provider == "slurm"
                  for p in c.pools}
    slurm = {c.name: [(p, partitions[p.key]) for p in v.pools if p.cluster == c.name]
             for c in v.loaded.clusters if c.provider == "slurm"}
    for c in snap.clusters:
        for rec in c.completions:       # durable: survives the objects' deletion (observe/completions.py)
            if rec.job in digests and rec.digest == digests[rec.job]:
                done.setdefault(rec.job, rec.result)
        if c.status == "unreachable":
            since = c.unreachable_since or snap.observed_at
            minutes = _minutes(since, now) or 0.0
            if minutes >= knobs.cluster_lost_after_minutes:
                lost[c.name] = (f"cluster {c.name} is lost: unreachable for {minutes:.0f} min since {since.isoformat()}"
                                f" (cluster_lost_after_minutes: {knobs.cluster_lost_after_minutes:g})")
            else:
                unreachable[c.name] = f"cluster {c.name} unreachable for {minutes:.0f} min: its jobs are kept"
            for last in c.last_running:   # what ran there when last read: stays, or moves once the cluster is lost
                if last.job_id in jobs and last.pool is not None:
                    running.setdefault(last.job_id, Running(last.job_id, c.name, last.pool, last.units or (),
                                                            last.pod_cpus, last.pod_memory_gib,
                                                            accelerators=last.pod_accelerators))
            continue
        _cluster_units(c, now, knobs.node_failed_after_minutes, failed_units, failed_nodes)
        if c.name in slurm and "nodes" not in unread_lists(c):
            _absent_nodes(c, slurm[c.name], failed_units)
        by_name = {(js.namespace, js.name): js for js in c.jobsets}
        for w in c.workloads:
            js = by_name.get((w.namespace, w.jobset)) if w.jobset else None
            if js is None or js.job_id is None or js.job_id not in jobs:
                continue
            jid, phase = js.job_id, w.phase()
            assert jid is not None
            same_spec = js.spec_digest is None or js.spec_digest == digests[jid]
            if phase in ("succeeded", "failed"):
                if same_spec:
                    done.setdefault(jid, phase)
            elif phase == "evicted":
                evicted.add(jid)
            elif phase in RUNNING_PHASES and js.pool is not None:
                pods_changed = not same_spec and js.pod_digest is not None and js.pod_digest != pod_digest(jobs[jid])
                running[jid] = Running(jid, c.name, js.pool, js.units or (), js.pod_cpus, js.pod_memory_gib,
                                       not same_spec, js.pod_accelerators, pods_changed)
                if spread_of(jobs[jid]) != "none":
                    groups.setdefault(jid, {})[(c.name, js.pool)] = running[jid]
                ready = w.condition("PodsReady")
                if ready is not None and ready.status == "True" and (m := _minutes(ready.since, now)) is not None:
                    run_minutes[jid] = m
        occupied = pod_units(c)
        for sw in c.services:           # an inference job's Deployments/LeaderWorkerSets: one per pool it serves on
            if sw.job_id in jobs and sw.pool is not None:
                mine = serving.setdefault(sw.job_id, {})
                before, _ = mine.get((c.name, sw.pool), (0, ()))
                mine[(c.name, sw.pool)] = (before + sw.replicas, occupied.get((sw.job_id, sw.pool), ()))
                pods = (sw.pod_cpus, sw.pod_memory_gib, sw.pod_accelerators)
                had = group_asks.setdefault((sw.job_id, c.name, sw.pool), pods)   # two objects there: the most
                group_asks[(sw.job_id, c.name, sw.pool)] = (_most(had[0], pods[0]), _most(had[1], pods[1]),
                                                             _most(had[2], pods[2]))
        for js in c.jobsets:            # a JobSet whose Workload is gone: its terminal state still counts
            ended = js.job_id
            if ended is not None and ended in jobs and js.terminal_state in ("Completed", "Failed") \
                    and ended not in running and (js.spec_digest is None or js.spec_digest == digests[ended]):
                done.setdefault(ended, "succeeded" if js.terminal_state == "Completed" else "failed")
    for jid, where in serving.items():  # a service on one pool stays there (a spread one: live_base keeps each)
        if len(where) == 1 and jid not in running:
            (((cluster, pool), (_, units)),) = where.items()
            cpus, memory, accelerators = group_asks[(jid, cluster, pool)]
            running[jid] = Running(jid, cluster, pool, units, cpus, memory, accelerators=accelerators)
    for jid in done:
        running.pop(jid, None)
        serving.pop(jid, None)
        evicted.discard(jid)
    for jid in running:
        evicted.discard(jid)
    return LiveInputs(now, running, done, frozenset(evicted), failed_units, lost, unreachable, run_minutes,
                      {k: tuple(sorted(v)) for k, v in failed_nodes.items()},
                      {j: tuple((c, p, n, u) for (c, p), (n, u) in sorted(where.items()))
                       for j, where in serving.items()}, group_asks,
                      {j: tuple(by[k] for k in sorted(by)) for j, by in groups.items() if len(by) > 1 and j in running})


def live_validated(v: Validated, live: LiveInputs) -> Validated:
    """`v` with the pools of lost clusters down (no new placements; their jobs must move)."""
    if not live.lost:
        return v
    return replace(v, pools=tuple(replace(p, status="down") if p.cluster in live.lost else p for p in v.pools))


def live_base(v: Validated, base: Plan | None, live: LiveInputs) -> Plan:
    """The placements the planner starts from: the base's, less finished and evicted jobs, with what runs
    (the observation) in place of the base's placement of the same job."""
    pools = {p.key: p for p in v.pools}
    before = {p.job: p for p in base.placements} if base is not None else {}
    jobs = {j.id: j for j in v.loaded.jobs}          # one look-up per running job, not a scan of every job
    out: dict[str, list[Placement]] = {}
    for p in base.placements if base is not None else ():   # a spread job: one per pool group (plan/spread.py)
        if p.job not in live.done and p.job not in live.evicted:
            out.setdefault(p.job, []).append(p)
    for r in (g for one in live.running.values() for g in live.groups.get(one.job, (one,))):
        pool = pools.get(f"{r.cluster}/{r.pool}")
        options = v.options.get(r.job, ())
        if pool is None or not options:
            continue        # a pool the files no longer have: the base (if any) decides
        prior = before.get(r.job)
        found = _runs_as(options, pool, _spot(v, jobs[r.job]), jobs[r.job], r,
                         prior if prior is not None and (prior.cluster, prior.pool) == (r.cluster, r.pool) else None)
        if found is None:
            continue
        index, per_unit = found
        groups = out.get(r.job, [])
        here = next((k for k, p in enumerate(groups) if (p.cluster, p.pool) == (r.cluster, r.pool)), None)
        several = r.job in live.groups and r is not live.groups[r.job][0]   # a later group of those seen
        if (len(groups) > 1 or several) and here is not None:   # a spread service seen by one group: every
            if len(r.units) == len(groups[here].units):          # group stays
                groups[here] = replace(groups[here], units=r.units, status="kept")    # where it is seen
            continue
        units = _service_units(live, r.job, r.cluster, pool, options[index]) if r.job in live.serving else r.units
        if not units and prior is not None and (prior.cluster, prior.pool) == (r.cluster, r.pool):
            units = prior.units
        seen = Placement(r.job, r.cluster, r.pool, index, units, per_unit, "kept", 0.0)
        # a group seen beside others (`LiveInputs.groups`) that the base does not have joins them; before the
        # fortieth session (2026-12-07) the one group `running` held replaced every group of the base when the base
        # lacked it, so the service's other groups, running, were planned as waiting and placed again (the
        # simulator moved them back and forth, and a job of its team started on their spend)
        out[r.job] = [*groups, seen] if r.job in live.groups and (several or len(groups) > 1) else [seen]
    for jid, where in live.serving.items():   # a service spread over pools: each group stays where it runs
        options = v.options.get(jid, ())
        if len(where) < 2 or jid in live.running or not options:
            continue
        if any((p.cluster, p.pool) == (c, pool) for p in out.get(jid, ()) for c, pool, _, _ in where):
            continue        # the base knows its groups and their units (a later cycle)
        spot = _spot(v, jobs[jid])
        kept: list[Placement] = []
        for cluster, pool_name, _, _ in where:
            pool = pools.get(f"{cluster}/{pool_name}")
            first = next((i for i, o in enumerate(options)
                          if pool is not None and gang_fit(o, pool, spot, jobs[jid].kind) is None), None)
            if pool is not None and first is not None:
                kept.append(Placement(jid, cluster, pool_name, first,
                                      _service_units(live, jid, cluster, pool, options[first]),
                                      gang_for(options[first], pool).accelerators, "kept", 0.0))
        if kept and not all(p.units for p in kept):   # a group whose units are not known: every group takes
            kept = [replace(p, units=()) for p in kept]  # free units of its pool (sticky.split_base)
        if kept:
            out[jid] = kept
    # the base's preemptions of victims that no longer run: one stopped for a preemptor not started yet waits
    # for it (greedy.py `after_preemptors`)
    stopped = tuple(p for p in base.preemptions if p.job not in live.running) if base is not None else ()
    return Plan(tuple(p for k in sorted(out) for p in out[k]), (), stopped, (), (), Cost(0.0, 0.0, 0.0))


def _runs_as(options: Sequence[ResolvedOption], pool: ResolvedPool, spot: str, job: Job, r: Running,
             prior: Placement | None) -> tuple[int, int] | None:
    """The index of the option a running job runs as, and the accelerators per unit it runs: of the options that
    run on its pool, the first with the gang the base placed there (`prior`: accelerators per unit, and as many
    units when they are seen), the base's own index first; else the first that runs (plan/sticky.py
    `_option_kept` keeps it the same way). Before, it was the first option that runs: when a commit reordered the
    options, the plan's bookkeeping held another gang than the one that runs (4 GPUs of a node an 8-GPU job
    fills), and placed other work beside it.

    When no option has the base's gang and the job runs an earlier spec of its file, the file's shape changed
    under it: it runs the base's gang, which its placement keeps, so plan/sticky.py decides "the job's shape
    changed" as the plan from git does (before, it was kept silently as the new shape's gang: the loop never
    carried out the reviewed change, and placed other work on units it fills). Where it runs the spec its file
    has, the base's gang is not what runs (a base of another commit).

    Without a base placement on its pool (the loop's first cycle, no memory), its pods tell the gang: the first
    option whose pods request the accelerators its pods request (`Running.accelerators`, read from its JobSet),
    on as many units as it is seen on; when none does and it runs an earlier spec, it holds the gang its pods
    hold, so plan/sticky.py decides "the job's shape changed" as the plan from git does. Before, it was kept as
    the first option that runs, silently: a file that changed its gang was never carried out on a first cycle."""
    fits = [i for i, o in enumerate(options) if gang_fit(o, pool, spot, job.kind) is None]
    if not fits:
        return None

    def units_match(gang: Gang) -> bool:
        return not r.units or len(r.units) == max(1, gang.whole_units) * job.replicas

    if prior is not None:
        def same(i: int) -> bool:
            gang = gang_for(options[i], pool)
            return gang.accelerators == prior.accelerators_per_unit and units_match(gang)
        kept = sorted((i for i in fits if same(i)), key=lambda i: i != prior.option)
        if kept:
            return kept[0], prior.accelerators_per_unit
        if r.earlier_spec:
            return fits[0], prior.accelerators_per_unit
    elif r.accelerators is not None:
        seen = next((i for i in fits if pod_accelerators(options[i], pool) == r.accelerators
                     and units_match(gang_for(options[i], pool))), None)
        if seen is not None:
            return seen, gang_for(options[seen], pool).accelerators
        if r.earlier_spec:
            per_node = pool.unit_accelerators // pool.nodes_per_unit
            return fits[0], r.accelerators if r.accelerators < per_node else r.accelerators * pool.nodes_per_unit
    return fits[0], gang_for(options[fits[0]], pool).accelerators


def _service_units(live: LiveInputs, job_id: str, cluster: str, pool: ResolvedPool,
                   option: ResolvedOption) -> tuple[int, ...]:
    """The units a service's group occupies on `pool`, from its pods, when they add up to its replicas' units
    (one unit entry per replica's unit, as the plan writes them); () when they do not (pods still starting,
    a rollout's surge): then the group takes free units of its pool."""
    for c, p, replicas, units in live.serving.get(job_id, ()):
        if (c, p) == (cluster, pool.name):
            return units if len(units) == replicas * max(1, gang_for(option, pool).whole_units) else ()
    return ()


def _spot(v: Validated, job: Job) -> str:
    prio = v.loaded.priorities
    assert prio is not None
    cls = next((c for c in prio.classes if c.name == (job.priority or prio.default)), None)
    return spot_policy(job, cls.spot if cls is not None else None)


def lost_work(live: LiveInputs, job_id: str, checkpoint_minutes: float | None, accelerators: int) -> LostWork:
    """The work a forced move loses: `checkpoint.work_at_risk` of the job's observed running minutes (the
    minutes since its last checkpoint; the bound `checkpoint_minutes` when its running time is not known, and
    unknown, None, for a job without checkpoints whose running time is not known)."""
    minutes, hours = work_at_risk(live.run_minutes.get(job_id), checkpoint_minutes, accelerators)
    return LostWork(job_id, None if minutes is None else round(minutes, 1), None if hours is None else round(hours, 2))
