"""What the reconciler does in one cycle: the plan compared with what runs, turned into actions. Pure.

This is the decision code `fleet reconcile` runs against real clusters and `fleet simulate` runs against
simulated ones (DESIGN 5, steps 11 and 12). Its whole interface:

    decide(plan, snapshot, memory, knobs, now, jobs=...) -> Decision(actions, memory, notes, progress)

- `plan` is the pipeline's plan made from git and this `snapshot` (running jobs stay; lost clusters and
  failed units already moved their jobs); `snapshot` is what every cluster runs (`observe.model.Snapshot`);
  `memory` is all the loop remembers between cycles (`LoopMemory`, JSON-serializable: the `--once` workflow
  keeps it in a file); `knobs` are `policies/placement.yaml`'s `reconcile:` settings plus the per-cycle limits;
  `now` is the clock (never read here); `jobs` the facts of `jobs/` the decision needs (`job_facts`).
- The result is data: the actions in the order they must run (`ORDER`), the memory for the next cycle as if
  every action succeeds (`settle` takes back what failed), and notes on what was seen but not acted on.
- Nothing is done here and nothing is read from the environment; equal inputs give equal decisions.

Rules, in the order `decide` applies them (each returns new values; no input is mutated):
1. Clusters. A cluster unreachable in the snapshot is remembered from the first cycle it failed
   (`unreachable_since`); after `cluster_lost_after_minutes` it is lost (`lost_clusters`; the loop stamps
   the time on the snapshot, and the planner, plan/live.py, counts the cluster down and fails its jobs
   over). Nothing is ever done on an unreachable cluster, and nothing is done elsewhere that assumes it
   acted (a move out of it is a start elsewhere, fenced).
2. Jobs. Every JobSet with Fleet's labels is a copy of its job (`copies`). For a job the plan places at
   (cluster, pool): an active copy there is kept; active copies on other reachable clusters are stopped when a
   copy at the planned place exists (fencing: when a partition heals, the stale copy is stopped in the first
   cycle that sees it, and the copy that moved wins), or moved when none does; when its only copies are on
   unreachable clusters it is started at the planned place and remembered in `moved` (the fence). A
   placement `moved` in the plan whose copy already sits at the planned pool (a failed unit of the same
   pool) is restarted there, once: when the copy's units (JobSet annotation `fleet.dev/units`) differ from
   the plan's, or, where it has none, when the fence does not already record this move. A job the plan does
   not place is stopped only when the plan preempts it (with the plan's reason), its file is gone from
   `jobs/`, or its copy runs an earlier spec of a file the plan cannot run where it runs ("was running, but ...":
   the change carried out, as a re-created JobSet queues); any other running job the plan leaves pending is kept
   and noted (running work is sacred). A job
   with a finished copy of its file's spec is never started again; one of an earlier spec is removed as the
   job starts again. One whose completion cannot be known (a reachable cluster's completion records could
   not be read, or its record key holds no record) is not started: it waits, with a note, until they are read.
   Nor does any job start while a cluster this memory never read cannot be read, until it is read or lost
   (finished.py: what runs there is unknown).
2b. Groups (groups.py). A job group some of whose members Kueue admitted while the others are not (pending in
   Kueue, evicted, not created) runs in part: said in the notes at once; after `group_whole_minutes` its admitted
   members stop (their units go back) and start again with the group. One the plan itself keeps in part is said.
3. Migration limit. Moves out of reachable, healthy pools (drains, rebalancing) are voluntary: at most
   `max_migrations_per_cycle` per cycle, shortest remaining work first (the least work at risk, the earliest
   freed capacity; the work left on the option the copy runs, `JobFacts.run_hours`), the rest deferred and
   reported with an ETA (`progress`). Failover (unreachable source, or a source pool with an unusable node)
   is never deferred.
4. Pools (hysteresis; `pools.py`). A pool whose plan target exceeds its observed units grows at once (queued work opens
   capacity), for the jobs placed on units it does not have yet (the reason names them). An observed unit
   no planned job occupies and no copy runs on (a victim stopping at its checkpoint, a running job left
   pending: `pools.occupied`) is idle from the first cycle it is seen idle (`idle_since`); the pool shrinks
   only by units idle for `scale_down_after_minutes`, never below the plan's target, and by at most
   `max_released_units_per_cycle` units over the whole fleet per cycle. A job that finishes and another
   that arrives minutes later reuse the unit without a release in between. A resize is done when the
   observed pool has the size, not when it was asked: the size asked, when and how often is remembered
   (`targets`), and while the pool shows another size the same size is asked again after a backoff (one
   interval, or `NODES_COME_MINUTES` for a grow reported done; doubling, at most `RETRY_CAP_MINUTES`;
   `ask_again_at`), the reason saying so. A resize the
   actuator refused (a failed stack, a failed slice, no Pulumi CLI) is asked again the same way. A
   `provisioning: queued` pool is never resized: Kueue's ProvisioningRequest grants its nodes per workload.
5. Kueue (kueuesync.py). A cluster whose Kueue stack differs from what the loop last applied there gets an
   update: its quotas (each team's part and its split over the cluster's flavors, which follow the plan) and,
   where the caller tracks them, its other Kueue objects (cohorts, priority classes, flavors, queue settings:
   git's), so a merge whose apply failed is applied by the loop. Older memories: applied once, the reason says why.

Lost work: a running copy that is stopped or moved loses the work since its last checkpoint
(`checkpoint.work_at_risk`, the one definition: its running minutes modulo `checkpoint_minutes`; 0 loses
nothing, none given loses all it ran), in accelerator-hours where the plan knows its size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..checkpoint import work_at_risk
from ..models import runs_earlier_spec
from ..observe.model import ClusterObservation, Completion, JobSet, Phase, Snapshot, Workload
from ..plan.types import RESIZE_RESTART, Placement, Plan, changed_away
from .ckptwait import as_now, released, said, still_held
from .ckptwait import deferred as checkpoint_waits
from .finished import earlier_spec, jobs_read, may_run_on, maybe_finished, unread_clusters, unseen_notes
from .groups import partial_groups
from .kueuesync import kueue_updates
from .model import (
    ACTIVE,
    ORDER,
    Action,
    ActionKind,
    Copy,
    Decision,
    Fence,
    JobFacts,
    Knobs,
    LoopMemory,
    Progress,
    job_facts,
)
from .pools import NODES_COME_MINUTES, RETRY_CAP_MINUTES, ask_again_at, observed_units, pool_targets, size_pools
from .services import served, service_actions, serving
from .settle import settle

__all__ = ["ACTIVE", "NODES_COME_MINUTES", "ORDER", "RETRY_CAP_MINUTES", "Action", "ActionKind", "Copy", "Decision",
           "Fence", "JobFacts", "Knobs", "LoopMemory", "Progress", "ask_again_at", "decide", "fenced_view",
           "job_facts", "lost_clusters", "observed_units", "pool_targets", "remember_clusters", "settle"]

# --- 1. clusters ---------------------------------------------------------------------------------------------

def remember_clusters(snapshot: Snapshot, memory: LoopMemory, now: datetime) -> LoopMemory:
    """`unreachable_since` after this snapshot: set on the first failed cycle, cleared once read again; and
    `cordoned_since` per `cluster/node`: the earliest time the loop or the snapshot saw it cordoned, kept
    while its cluster cannot be read, cleared once it is uncordoned."""
    since = {c.name: memory.unreachable_since.get(c.name, now) for c in snapshot.clusters
             if c.status == "unreachable" and not c.partial}       # one that answers in part is never lost
    cordoned: dict[str, datetime] = {}
    for c in snapshot.clusters:
        if c.status == "unreachable":
            cordoned.update((k, t) for k, t in memory.cordoned_since.items() if k.partition("/")[0] == c.name)
            continue
        for n in c.nodes:
            if n.unschedulable:
                key = f"{c.name}/{n.name}"
                cordoned[key] = min(t for t in (memory.cordoned_since.get(key), n.cordoned_since, now) if t)
    return memory.model_copy(update={"unreachable_since": since, "cordoned_since": cordoned})


def since_unreachable(snapshot: Snapshot, memory: LoopMemory, now: datetime) -> Snapshot:
    """The snapshot with each unreachable cluster's `unreachable_since` from the loop's memory (the first cycle
    it failed), and each cordoned node's `cordoned_since` (the first cycle it was seen cordoned), which one
    observation cannot know; the planner counts a cluster lost, or a cordoned node's unit failed, from them.
    An unreachable cluster the snapshot knows nothing more of (the loop restarted: no earlier snapshot to carry
    over, `observe.model.carry_over`) gets from the memory the jobs that ran there and the completion records
    it held when last read (`remember_running`), so that no second copy of a running job starts elsewhere, and
    no finished job starts again, before the cluster counts as lost."""
    mem = remember_clusters(snapshot, memory, now)
    since, cordoned = mem.unreachable_since, mem.cordoned_since
    if not since and not cordoned and all(c.status != "unreachable" for c in snapshot.clusters):
        return snapshot

    def stamped(c: ClusterObservation) -> ClusterObservation:
        if c.status == "unreachable":   # a partial one too; after a restart, what ran and finished there when last read
            recalled: dict[str, object] = {     # a partial read of its jobs' lists: what runs there now
                "last_running": c.running_jobsets() if jobs_read(c) else
                c.last_running or tuple(memory.last_running.get(c.name, ())),
                "completions": c.completions or tuple(memory.last_completions.get(c.name, ()))}
            if c.name in since:
                recalled["unreachable_since"] = since[c.name]
            return c.model_copy(update=recalled)
        if not any(n.unschedulable for n in c.nodes):
            return c
        return c.model_copy(update={"nodes": tuple(
            n.cordoned_at(cordoned[f"{c.name}/{n.name}"]) if n.unschedulable else n
            for n in c.nodes)})

    return snapshot.model_copy(update={"clusters": tuple(stamped(c) for c in snapshot.clusters)})


def remember_running(snapshot: Snapshot, memory: LoopMemory, jobs: Mapping[str, JobFacts] | None,
                     ) -> tuple[dict[str, list[JobSet]], dict[str, list[Completion]]]:
    """What the memory keeps of each cluster for `since_unreachable` after a restart: the JobSets admitted or
    running there (a cluster that cannot be read: what it ran when last read), and the completion records of the
    jobs in git (`jobs`; all where not given); where they could not be read, the ones read before."""
    running: dict[str, list[JobSet]] = {}
    done: dict[str, list[Completion]] = {}
    for c in snapshot.clusters:
        sets = c.last_running if c.status == "unreachable" else c.running_jobsets()
        if sets:
            running[c.name] = list(sets)
        records = memory.last_completions.get(c.name, []) if c.completions_unknown is not None and not c.completions \
            else [r for r in c.completions if jobs is None or r.job in jobs]
        if records:
            done[c.name] = list(records)
    return running, done


def lost_clusters(snapshot: Snapshot, memory: LoopMemory, knobs: Knobs, now: datetime) -> tuple[str, ...]:
    """Clusters unreachable for `cluster_lost_after_minutes` or longer (this snapshot included)."""
    mem = remember_clusters(snapshot, memory, now)
    return tuple(sorted(c for c, t in mem.unreachable_since.items()
                        if (now - t).total_seconds() >= knobs.cluster_lost_after_minutes * 60))


def fenced_view(snapshot: Snapshot, memory: LoopMemory) -> Snapshot:
    """The snapshot the planner must see: a job's stale copies (on a cluster other than where its fence says
    the moved copy runs) removed, with their Workloads. When a partition heals, the old copy reappears
    running; planned from the raw snapshot it would win (a running job stays where it runs), and the moved
    copy would be stopped. `decide` still gets the raw snapshot, and stops the stale copy."""
    if not memory.moved:
        return snapshot
    clusters = []
    for c in snapshot.clusters:
        stale = {(js.namespace, js.name) for js in c.jobsets
                 if js.job_id in memory.moved and memory.moved[js.job_id].cluster != c.name}
        if stale:
            c = c.model_copy(update={
                "jobsets": tuple(js for js in c.jobsets if (js.namespace, js.name) not in stale),
                "workloads": tuple(w for w in c.workloads if (w.namespace, w.jobset) not in stale)})
        clusters.append(c)
    return snapshot.model_copy(update={"clusters": tuple(clusters)})


# --- 2. jobs -------------------------------------------------------------------------------------------------

def copies(snapshot: Snapshot) -> dict[str, list[Copy]]:
    """job id -> its JobSets on every cluster (unreachable clusters' copies are unknown, so absent)."""
    out: dict[str, list[Copy]] = {}
    for c in snapshot.clusters:
        by_owner = {(w.namespace, w.jobset): w for w in c.workloads if w.jobset}
        for js in c.jobsets:
            if js.job_id is None:
                continue
            w = by_owner.get((js.namespace, js.name))
            out.setdefault(js.job_id, []).append(Copy(js.job_id, c.name, js.pool, _phase(js, w), js.created_at,
                                                      _running_since(w), c.status != "unreachable", js.units,
                                                      js.deleting, js.namespace, js.name, js.uid, js.kind,
                                                      js.spec_digest))
    return out


def _phase(js: JobSet, w: Workload | None) -> Phase:
    if w is not None:
        return w.phase()
    if js.terminal_state:
        return "succeeded" if js.terminal_state == "Completed" else "failed"
    return "queued" if js.suspended else "unknown"


def _running_since(w: Workload | None) -> datetime | None:
    if w is None:
        return None
    for kind in ("PodsReady", "Admitted"):
        c = w.condition(kind)
        if c is not None and c.status == "True":
            return c.since
    return None


def _lost(copy: Copy, facts: JobFacts | None, placement: Placement | None, now: datetime) -> tuple[float, float]:
    """(accelerator-hours, minutes) of work a running copy loses when stopped now (none for a copy already being
    deleted: its loss was counted when its move or stop was decided): `checkpoint.work_at_risk` of its running
    time (minutes since the last checkpoint; `checkpoint_minutes: 0` loses nothing, none given loses all it ran)."""
    if copy.phase != "running" or copy.running_since is None or copy.deleting:
        return 0.0, 0.0
    ran = (now - copy.running_since).total_seconds() / 60
    accelerators = len(placement.units) * placement.accelerators_per_unit if placement else 0
    minutes, hours = work_at_risk(ran, facts.checkpoint_minutes if facts else None, accelerators)
    return round(hours, 3), round(minutes, 1)


def _remaining_minutes(copy: Copy, facts: JobFacts | None, now: datetime) -> float:
    """Minutes of work the copy has left: its job's run on the option of the copy's pool (`JobFacts.run_hours`;
    before 2026-12-07 `duration_hours` whatever the option, so a job on a slow option was moved first) less what
    it ran."""
    hours = facts.run_hours(copy.cluster, copy.pool) if facts is not None else None
    if hours is None:
        return math.inf
    ran = (now - copy.running_since).total_seconds() / 60 if copy.running_since else 0.0
    return max(0.0, hours * 60 - ran)


def _failing_pools(snapshot: Snapshot) -> set[tuple[str, str]]:
    return {(c.name, n.pool) for c in snapshot.clusters for n in c.nodes if n.pool and not n.usable}


# --- the decision --------------------------------------------------------------------------------------------

def decide(plan: Plan, snapshot: Snapshot, memory: LoopMemory, knobs: Knobs, now: datetime, *,
           jobs: Mapping[str, JobFacts] | None = None, flavors: Mapping[str, list[str]] | None = None,
           kueue: Mapping[str, list[str]] | None = None,
           accelerators: Mapping[str, frozenset[str]] | None = None) -> Decision:
    """One cycle's actions (see the module docstring for the rules, numbered as here). `flavors` and `kueue`:
    kueuesync.py's digests of the quotas' splits and of the other Kueue objects, where the caller tracks them.
    `accelerators`: cluster -> its pools' accelerators in git (a job of none of them cannot run there)."""
    mem = remember_clusters(snapshot, memory, now)                                 # 1.
    lost = lost_clusters(snapshot, memory, knobs, now)
    reachable = {c.name for c in snapshot.clusters if c.status != "unreachable"}
    notes: list[str] = [f"cluster {c} unreachable since {t.isoformat()}" + (" (lost)" if c in lost else "")
                        for c, t in sorted(mem.unreachable_since.items())]
    facts, found = jobs or {}, copies(snapshot)
    runs_on = serving(snapshot)
    waits = checkpoint_waits(plan.preemptions, found, facts, knobs.interval_seconds / 60, now, runs_on, memory)
    unread, read = unread_clusters(snapshot, memory, lost)
    now_said = released(plan.preemptions, found, facts, runs_on, waits)
    job_actions, moved, services, job_notes, held = _jobs(plan, snapshot, mem, jobs, reachable, lost, now, waits,
                                                          unread, accelerators, now_said)                   # 2.
    members = [x.job for x in plan.placements if x.group] + [x.job for x in plan.pending if x.group]
    digests = {j: f.digest() for j in members if (f := facts.get(j)) is not None}     # group members' specs now
    stops, hold, group_notes, tries = partial_groups(plan, snapshot, found, mem.groups, knobs, reachable, now,
                                                     {a.job for a in job_actions if a.job and a.kind != "start"},
                                                     digests)
    job_actions = [a for a in job_actions if not (a.kind == "start" and a.job in hold)]
    for c, why in stops:                                                                                  # 2b.
        hours, minutes = _lost(c, facts.get(c.job), plan.placement_of(c.job), now)
        job_actions.append(Action(kind="stop", cluster=c.cluster, pool=c.pool, job=c.job, reason=why, **c.origin(),
                                  lost_accelerator_hours=hours, lost_minutes=minutes))
    notes += job_notes + group_notes
    held |= hold
    job_actions, progress, deferred = _limit_moves(job_actions, snapshot, facts, knobs, now)       # 3.
    notes += deferred
    for a in job_actions:                     # a deferred move keeps its old fence; a decided one sets a new
        if a.job and a.kind in ("move", "start") and not a.service:
            moved[a.job] = Fence(cluster=a.cluster, pool=a.pool or "", units=a.units, since=now)
    pool_actions, idle, targets = size_pools(plan, snapshot, mem, knobs, reachable, now, held)        # 4.
    kueue_actions, quotas, applied = kueue_updates(plan, mem, reachable, flavors or {}, kueue)       # 5.
    actions = sorted([*pool_actions, *kueue_actions, *job_actions],
                     key=lambda a: (ORDER.index(a.stage), a.cluster, a.pool or "", a.job or ""))
    running, done = remember_running(snapshot, memory, jobs)
    new = mem.model_copy(update={"idle_since": idle, "moved": moved, "services": services, "quotas": quotas,
                                 "kueue": applied, "targets": targets, "last_running": running,
                                 "last_completions": done, "read": read, "groups": tries, "last_cycle": now,
                                 "held": still_held(plan.preemptions, waits, memory, now)})
    return Decision(tuple(actions), new, tuple(notes), progress, lost, tuple(sorted(waits)), tuple(sorted(held)))


def _jobs(plan: Plan, snapshot: Snapshot, mem: LoopMemory, in_git: Mapping[str, JobFacts] | None, reachable: set[str],
          lost: tuple[str, ...], now: datetime, waits: Mapping[str, str] | None = None, unread: Sequence[str] = (),
          accelerators: Mapping[str, frozenset[str]] | None = None, now_said: Mapping[str, str] | None = None,
          ) -> tuple[list[Action], dict[str, Fence], dict[str, str], list[str], set[str]]:
    """`in_git`: the jobs of `jobs/` (None: not given, so no job counts as removed; {}: the folder is empty);
    `now_said`: why a victim its plan held is stopped or moved now (ckptwait.py `released`); `held`, the last
    value: jobs placed but not started, as whether they finished or run is unknown."""
    waits, facts, accelerators = waits or {}, in_git or {}, accelerators or {}
    found = copies(snapshot)
    now_said = now_said or {}
    groups: dict[str, list[Placement]] = {}       # a spread service has one placement per pool it runs in
    for x in plan.placements:      # a victim placed again moves now: its reason says so, not that it keeps running
        groups.setdefault(x.job, []).append(replace(x, reason=as_now(x.reason, now_said[x.job], append=False))
                                            if x.job in now_said else x)
    placed = {j: g[0] for j, g in groups.items()}
    preempted = {p.job: p for p in plan.preemptions}
    pending = {p.job: p for p in plan.pending}
    failing = _failing_pools(snapshot)
    moved = {j: f for j, f in mem.moved.items() if j in placed}
    services = dict(mem.services)
    seen = served(snapshot)                       # inference Deployments/LeaderWorkerSets, by their labels
    actions: list[Action] = []
    notes: list[str] = []
    held: set[str] = set()                        # placed, not started: whether it finished (or runs) is unknown
    unseen: dict[str, list[str]] = {}             # held as an unread cluster may run them, by those clusters
    for job in sorted(set(placed) | set(found) | set(services) | set(seen.where)):
        p, f, mine = placed.get(job), facts.get(job), found.get(job, [])
        active = [c for c in mine if c.phase in ACTIVE and c.reachable]
        if job in waits and (p is None or job in preempted):   # a victim kept until its next checkpoint
            # (reconcile/ckptwait.py), also where the plan places it again: it moves once it checkpointed
            notes.append(waits[job])
            continue
        if p is None and (job in services or job in seen.where):   # a service the plan places nowhere now
            why = _why_stop(job, preempted, pending, in_git, now_said)
            if why is not None:
                actions += service_actions(job, [], services, reachable, notes, why, seen, lost=lost,
                                           counts=f.counts if f else ())
            continue
        if p is None:
            for c in active:
                if c.deleting:      # its deletion goes on as it was asked (a second delete is another write)
                    notes.append(f"{job}'s copy on {c.cluster}/{c.pool} is being deleted: not deleted again")
                    continue
                why = _why_stop(job, preempted, pending, in_git, now_said) or changed_away(
                    job, c.spec_digest, f.digest() if f else None, pending[job].reasons if job in pending else ())
                if why is None:
                    if c.phase in ("running", "admitted"):
                        notes.append(f"{job} runs on {c.cluster}/{c.pool} but the plan leaves it pending: kept "
                                     "(only a preemption or a removed file stops running work)")
                    continue
                hours, minutes = _lost(c, f, None, now)
                actions.append(Action(kind="stop", cluster=c.cluster, pool=c.pool, job=job, reason=why,
                                      **c.origin(), lost_accelerator_hours=hours, lost_minutes=minutes))
            continue
        if job in waits and not active:        # a preemptor (a service too) waiting for its victim's checkpoint
            notes.append(waits[job])
            continue
        if f is not None and f.kind == "inference":
            actions += service_actions(job, groups[job], services, reachable, notes, seen=seen, lost=lost,
                                       counts=f.counts)
            continue
        if p.cluster not in reachable:
            notes.append(f"{job} is planned on {p.cluster}, which cannot be read: nothing done")
            continue
        finished = [c for c in mine if c.phase in ("succeeded", "failed") and c.reachable]
        earlier = earlier_spec(finished, f)
        if len(earlier) < len(finished):
            c = next(c for c in finished if c not in earlier)
            notes.append(f"{job} {c.phase} on {c.cluster}: never started again (the plan placed it: is its "
                         "completion recorded?)")
            continue
        here = [c for c in active if c.cluster == p.cluster and c.pool == p.pool]
        elsewhere = [c for c in active if not (c.cluster == p.cluster and c.pool == p.pool)]
        fence = moved.get(job)
        if here:
            known = here[0].units
            # a move onto the units it runs on is its file's change carried out (a gang that shrank or grew on its
            # node: "the job's shape changed"): the copy runs an earlier spec. Before 2026-12-07 it was left
            # running as it was, and the next plan counted it at its new size on a node it still filled
            ran = here[0].spec_digest
            changed = runs_earlier_spec(ran, f.digest() if f is not None else None)
            other_units = known != p.units if known is not None else \
                fence is None or (fence.cluster, fence.pool, fence.units) != (p.cluster, p.pool, p.units)
            # an elastic gang the plan resizes where it runs (`resize`: a restart at the new size from its
            # checkpoint, JobSet having no in-place resize): until 2026-12-07 it ran on at its old size while
            # the units the plan took from it were given to another job
            resized = len(known) != len(p.units) if known is not None and p.resize else \
                RESIZE_RESTART in p.resize     # its units not known: as the plan says
            restart = not elsewhere and ((p.status == "moved" and (changed or other_units)) or resized)
            if restart:
                c = here[0]
                hours, minutes = _lost(c, f, p, now)
                actions.append(Action(kind="move", cluster=p.cluster, pool=p.pool, job=job, units=p.units,
                                      reason=p.reason or (p.resize if resized else "")
                                      or "the plan moves it to other units of its pool",
                                      **c.origin(), lost_accelerator_hours=hours, lost_minutes=minutes, force=True))
            for c in elsewhere:
                hours, minutes = _lost(c, f, None, now)
                actions.append(Action(
                    kind="stop", cluster=c.cluster, pool=c.pool, job=job, **c.origin(),
                    lost_accelerator_hours=hours, lost_minutes=minutes,
                    reason=f"fencing: the copy on {p.cluster}/{p.pool} is the one the plan keeps; this copy is stale"
                           + (f" (moved {fence.since.isoformat()})" if fence else "")))
            continue
        if elsewhere and job in waits:        # a victim the plan places elsewhere moves after its checkpoint
            notes.append(waits[job])
            continue
        if elsewhere:
            c = min(elsewhere, key=lambda x: (x.cluster, x.pool or ""))
            hours, minutes = _lost(c, f, p, now)
            force = (c.cluster, c.pool or "") in failing
            actions.append(Action(kind="move", cluster=p.cluster, pool=p.pool, job=job, units=p.units,
                                  reason=p.reason or f"the plan places it on {p.cluster}/{p.pool}",
                                  **c.origin(), lost_accelerator_hours=hours, lost_minutes=minutes, force=force))
            for extra in elsewhere:
                if extra is not c:
                    actions.append(Action(kind="stop", cluster=extra.cluster, pool=extra.pool, job=job,
                                          **extra.origin(), reason="fencing: a second copy of the job"))
            continue
        unknown = maybe_finished(job, snapshot)
        unread_here = may_run_on(job, unread, f, accelerators, snapshot)
        if unknown is not None:
            notes.append(f"{job} waits this cycle: {unknown}, so whether it already finished is unknown: not "
                         "started (a finished job is never started again), and no pool grows for it")
        elif unread_here:
            unseen.setdefault(", ".join(unread_here), []).append(job)
        if unknown is not None or unread_here:
            held.add(job)
            continue
        actions += [Action(kind="stop", cluster=c.cluster, pool=c.pool, job=job, **c.origin(),
                           reason=f"it {c.phase} under an earlier spec of jobs/{job}.yaml (spec digest "
                                  f"{c.spec_digest}, now {f.digest() if f else '?'}): its finished run is "
                                  "cleared so that the changed job runs") for c in earlier if not c.deleting]
        actions.append(Action(kind="start", cluster=p.cluster, pool=p.pool, job=job, units=p.units,
                              reason=p.reason or ("its file changed since it finished: the plan runs it again"
                                                  if earlier else "the plan starts it")))
    return actions, moved, services, notes + unseen_notes(unseen), held


def _why_stop(job: str, preempted: Mapping[str, Any], pending: Mapping[str, Any],
              in_git: Mapping[str, JobFacts] | None, now_said: Mapping[str, str] | None = None) -> str | None:
    """Why a running copy stops (None: it does not); `now_said`: ckptwait.py `released`."""
    if job in preempted:
        pre = preempted[job]
        if pre.after_minutes is not None:   # not held to its checkpoint (ckptwait.py) this cycle: it stops now
            why = (now_said or {}).get(job, "its checkpoint interval is not known to the loop")
            return f"{as_now(said(pre), why)}: stopped now"
        return said(pre)
    if in_git is not None and job not in in_git:    # {} too: the last job file removed
        team, _, name = job.partition("/")
        return f"jobs/{team}/{name}.yaml is gone from the repository"
    return None


# --- 3. migration limit --------------------------------------------------------------------------------------

def _limit_moves(actions: list[Action], snapshot: Snapshot, facts: Mapping[str, JobFacts], knobs: Knobs,
                 now: datetime) -> tuple[list[Action], tuple[Progress, ...], list[str]]:
    voluntary = [a for a in actions if a.kind == "move" and not a.force]
    if not voluntary:
        return actions, (), []
    found = copies(snapshot)

    def remaining(a: Action) -> float:
        c = next((c for c in found.get(a.job or "", []) if c.cluster == a.from_cluster), None)
        return _remaining_minutes(c, facts.get(a.job or ""), now) if c else math.inf

    ranked = sorted(voluntary, key=lambda a: (remaining(a), a.lost_accelerator_hours, a.job or ""))
    keep = ranked[:max(0, knobs.max_migrations_per_cycle)]
    later = ranked[len(keep):]
    dropped = {id(a) for a in later}
    per_source: dict[str, list[int]] = {}
    for a in ranked:
        per_source.setdefault(a.from_cluster or "", [0, 0])[id(a) in dropped] += 1
    limit = max(1, knobs.max_migrations_per_cycle)
    progress = tuple(Progress(cluster=c, moved=m, remaining=r, eta_cycles=math.ceil(r / limit),
                              eta_minutes=round(math.ceil(r / limit) * knobs.interval_seconds / 60, 1))
                     for c, (m, r) in sorted(per_source.items()))
    notes = [f"move of {a.job} from {a.from_cluster} deferred: at most {knobs.max_migrations_per_cycle} "
             "migrations per cycle (shortest remaining work first)" for a in later]
    return [a for a in actions if id(a) not in dropped], progress, notes
