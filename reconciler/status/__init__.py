"""`fleet status`: what runs, from a snapshot and the repository. Pure: the snapshot and its clock come in.

- Jobs: one row per JobSet Fleet finds (labels `fleet.dev/team`/`fleet.dev/job`/`fleet.dev/pool`, DESIGN 4b),
  with its Workload (by owner reference), plus one `unknown` row per job of `jobs/` found on no cluster. Given
  the plan from git and this snapshot (`pipeline.plan(v, observed=snap)`, as `--observed` planning makes it),
  such a row says what the plan decided: waiting, with the plan's reason (listed with the waiting jobs), not
  started yet where the plan places it, or finished with this spec (a completion record).
  The phase is Kueue's (`Workload.phase()`); without a Workload, the JobSet's terminal state or suspension.
  An inference job has one row per Deployment or LeaderWorkerSet Fleet finds (`ClusterObservation.services`,
  one per pool its replicas run on): `running` while any replica is ready, else `queued`; the note says how
  many replicas are ready; units and accelerators are those of its replicas there; `since` its creation;
  cost so far and this month's spend count its wanted replicas from its creation (an estimate: a Deployment
  does not say when its replicas became ready), so team spend includes inference.
  `since` is when that phase began (the deciding condition's lastTransitionTime); `queue_wait_minutes` is
  creation to admission (to the observation while still waiting); `restarts` the JobSet's.
- Cost so far = hours admitted x the job's hourly price: its accelerators x the pool's unit price
  (`Validated.unit_prices`, the number the planner and cost stage use) / the unit's accelerators, so a job on
  part of a GPU node pays its share, as in the plan's `hourly_usd`; an inference job's replicas each take a
  gang. Hours admitted = Kueue's `accumulatedPastExecutionTimeSeconds` (earlier admissions) + the
  current admission (Admitted's lastTransitionTime to Finished's, or to `observed_at`). Units = the job's
  accelerators for the pool's accelerator (its option in `jobs/`) over the pool's unit size, rounded up.
- Pools: a TPU pool's unit is a slice (nodes grouped by their slice index), otherwise a node. A unit is ready
  when every node of it is Ready, schedulable and accelerator-healthy, unhealthy otherwise; `used` sums the
  units of the admitted and running jobs on the pool: the units their JobSets carry (`fleet.dev/units`, a
  unit shared by several jobs counted once), plus, for jobs without it, their accelerators over the unit's
  accelerators, rounded up once per pool; never more than the pool's units when it was observed.
- Teams: accelerators of admitted and running jobs against `quota` (nominal, all clusters; of them, the spot-only
  work charged to a `spot:` quota against it, by the planner's rule, `quota.spot_charges`), and their hourly
  cost x 730 against `budget_monthly_usd`; spent this month = each job's hourly price x the hours of its current
  admission that fall in the calendar month of `observed_at` (earlier admissions are not dated, so not counted);
  forecast to the month's end = spent + the hourly cost of what is admitted now x the hours left in the month.
  When no cluster could be read (`StatusReport.read_any` False) use, spend and budgets are unknown, not zero.
- Disruption (reconciler.impact's bound): each eviction or restart of a job loses at most its accelerators x
  `checkpoint_minutes` of work; `lost_accelerator_hours` sums that bound (None: the job names no checkpoint).
  Each job also carries its priority class, why it waits (the Workload's QuotaReserved or Evicted message) and
  whether it runs outside its `data_region`.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from ..impact import lost_accelerator_hours, month_hours
from ..models import Job, spec_digest
from ..observe.model import ClusterObservation, JobSet, Phase, ServiceWorkload, Snapshot, Workload
from ..observe.owners import owned_snapshot
from ..plan.quota import spot_charges
from ..plan.types import Plan
from ..reconcile.decide import copies
from ..reconcile.groups import current, group_views, loop_does, view_of
from ..reconcile.model import GroupTry, Knobs
from ..resolve import ResolvedPool
from ..robots.observed import RobotsObservation
from ..suggest import closest
from ..validate import Validated

HOURS_PER_MONTH = 730
ACTIVE: frozenset[str] = frozenset({"admitted", "running"})


@dataclass(frozen=True)
class JobStatus:
    job: str
    phase: Phase
    cluster: str | None
    pool: str | None
    since: datetime | None
    queue_wait_minutes: float | None
    restarts: int
    evictions: int
    units: int | None
    accelerators: int | None
    hourly_usd: float | None
    cost_usd: float | None
    note: str = ""
    priority: str = ""
    reason: str = ""                        # why it waits or was evicted, in Kueue's words
    lost_accelerator_hours: float | None = 0.0  # at most, over its evictions and restarts
    outside_data_region: bool = False
    month_cost_usd: float = 0.0             # the current admission's cost within the month of observed_at
    unit_ids: tuple[int, ...] | None = None  # the units its JobSet carries (fleet.dev/units), when it does
    service: bool = False                   # a Deployment or LeaderWorkerSet of an inference job
    expected_start: datetime | None = None  # a waiting job: when the plan expects it to start (plan/reserve.py)


@dataclass(frozen=True)
class PoolStatus:
    cluster: str
    pool: str
    observed: bool
    nodes: int
    units: int
    ready: int
    unhealthy: int
    used: int
    problems: tuple[str, ...]


@dataclass(frozen=True)
class TeamStatus:
    team: str
    accelerator: str
    used: int
    quota: int | None
    hourly_usd: float
    monthly_usd: float
    budget_monthly_usd: float | None
    spent_month_usd: float = 0.0            # estimated: see the module docstring
    forecast_month_usd: float = 0.0
    spot_used: int = 0                      # of `used`, spot-only work charged to the team's `spot:` quota
    spot_quota: int | None = None           # the team's `spot:` quota, where it states one


@dataclass(frozen=True)
class ClusterStatus:
    cluster: str
    status: str
    problems: tuple[tuple[str, str], ...]       # (message, hint)
    impostors: tuple[str, ...] = ()             # objects with Fleet's labels outside their team's namespace


@dataclass(frozen=True)
class StatusReport:
    observed_at: datetime
    clusters: tuple[ClusterStatus, ...]
    jobs: tuple[JobStatus, ...]
    pools: tuple[PoolStatus, ...]
    teams: tuple[TeamStatus, ...]
    classes: tuple[str, ...] = ()               # priority classes, highest first
    groups: tuple[tuple[str, str, str], ...] = ()   # job groups: (group, members and their phases, state)
    robots: RobotsObservation = field(default_factory=RobotsObservation)   # rollouts (robots/status.py)

    @property
    def read_any(self) -> bool:
        """Whether any cluster could be read: when every cluster of the snapshot was unreachable, use, spend
        and budgets are unknown (a snapshot of no cluster at all failed to read nothing)."""
        return not self.clusters or any(c.status != "unreachable" for c in self.clusters)


def status(v: Validated, snap: Snapshot, planned: Plan | None = None,
           tries: Mapping[str, GroupTry] | None = None) -> StatusReport:
    """1. jobs from every cluster's JobSets and Workloads  2. jobs of git found nowhere (with what `planned`,
    the plan from git and `snap`, decided for them)  3. pools  4. teams  5. job groups (`tries`: what the reconcile
    loop remembers of groups that ran in part, `LoopMemory.groups`)."""
    owned = owned_snapshot(v, snap)        # the teams' own objects; impostors are listed, never counted
    snap = owned.snapshot
    pools = {(p.cluster, p.name): p for p in v.pools}
    jobs: list[JobStatus] = []
    by_id = {j.id: j for j in v.loaded.jobs}
    for obs in snap.clusters:
        jobs += _cluster_jobs(v, obs, pools, by_id, snap.observed_at)
    seen = {j.job for j in jobs}
    lost = sorted(c.name for c in snap.clusters if c.status == "unreachable")
    pending = {p.job: p.reasons for p in planned.pending} if planned is not None else {}
    for job_id in sorted(set(v.options) - seen):
        note, reason = _nowhere(job_id, planned, pending, snap), "; ".join(pending.get(job_id, ()))
        note += f"; unreachable: {', '.join(lost)}" if lost else ""
        jobs.append(JobStatus(job_id, "unknown", None, None, None, None, 0, 0, None, None, None, None, note,
                              _priority(v, by_id.get(job_id)), reason))
    jobs = _expected_starts(jobs, planned, snap.observed_at)
    jobs.sort(key=lambda j: (j.job, j.cluster or ""))
    return StatusReport(snap.observed_at,
                        tuple(ClusterStatus(c.name, c.status, tuple((p.message, p.hint) for p in c.problems),
                                            tuple(i.line() for i in owned.impostors if i.cluster == c.name))
                              for c in snap.clusters),
                        tuple(jobs), _pools(v, snap, jobs), _teams(v, jobs, pools, snap.observed_at),
                        tuple(c.name for c in sorted(v.loaded.priorities.classes, key=lambda c: -c.value))
                        if v.loaded.priorities else (), _groups(v, snap, jobs, planned, tries or {}), snap.robots)


def _groups(v: Validated, snap: Snapshot, jobs: list[JobStatus], planned: Plan | None,
            tries: Mapping[str, GroupTry]) -> tuple[tuple[str, str, str], ...]:
    """One row per job group (issue 26): its members with their phase and cluster, and whether it runs whole. A
    group in part says what the loop does of it: the loop's own rule (reconcile/groups.py `group_views`, which
    members count as admitted, and `loop_does`), with what the loop remembers of it (`tries`: `fleet status
    --memory`). Members the plan neither places nor keeps waiting (finished) do not count, as the loop counts
    them; without a plan, every member of the files counts."""
    found = copies(snap)
    if planned is not None:
        views = group_views(planned, found)
    else:
        members: dict[str, list[str]] = {}
        for j in v.loaded.jobs:
            if j.group is not None:
                members.setdefault(f"{j.team}/{j.group}", []).append(j.id)
        views = {g: view_of(mine, found) for g, mine in sorted(members.items())}
    knobs = Knobs.of(v.loaded.placement)
    digests = {j.id: spec_digest(j) for j in v.loaded.jobs if j.group is not None}
    out = []
    for g, view in views.items():
        rows = [x for m in view.members for x in jobs if x.job == m]
        where = sorted({m.cluster for m in rows if m.cluster and m.job in view.admitted})
        n, total = len(view.admitted), len(view.members)
        state = f"running together in {', '.join(where)}" if n == total and len(where) == 1 \
            else f"{n} of {total} member(s) running"
        was = current(tries.get(g, GroupTry()), view.members, digests)     # the loop's reading (groups.py)
        if view.in_part or was.stopped:   # Kueue admits each member's Workload alone (reconcile/groups.py)
            state = (f"runs in part: {n} of {total} member(s) admitted; " if view.in_part else f"{state}; ") + \
                "; ".join(f"{m.job} {m.phase}" + (f": {m.reason}" if m.reason else "") for m in rows
                          if m.job not in view.admitted) + f"; it starts all-or-nothing: {loop_does(view, was, knobs)}"
        out.append((g, ", ".join(f"{m.job} {m.phase}" + (f" on {m.cluster}" if m.cluster else "") for m in rows),
                    state))
    return tuple(out)


def _expected_starts(jobs: list[JobStatus], planned: Plan | None, now: datetime) -> list[JobStatus]:
    """Each job the plan keeps waiting, with the plan's expected start (hours from the snapshot's moment)."""
    hours = {p.job: p.expected_start for p in planned.pending} if planned is not None else {}
    return [replace(j, expected_start=now + timedelta(hours=h)) if (h := hours.get(j.job)) is not None
            and j.phase not in ("running", "succeeded", "failed") else j for j in jobs]


def _nowhere(job_id: str, planned: Plan | None, pending: dict[str, tuple[str, ...]], snap: Snapshot) -> str:
    """What the plan from git and the snapshot decided for a job found on no cluster."""
    if planned is None:
        return "not found on any cluster"
    if job_id in pending:
        return "on no cluster: waiting, the plan cannot place it now"
    where = planned.placements_of(job_id)
    if where:
        return ("on no cluster yet: the plan places it on " + ", ".join(f"{p.cluster}/{p.pool}" for p in where)
                + " (the reconciler or `fleet apply` starts it)")
    done = next((r.result for c in snap.clusters for r in c.completions if r.job == job_id), None)
    if done is not None:
        return f"on no cluster: {done} (completion record); not planned again until its file changes"
    return "on no cluster, and not in the plan"


def _cluster_jobs(v: Validated, obs: ClusterObservation, pools: dict[tuple[str, str], ResolvedPool],
                  by_id: dict[str, Job], now: datetime) -> list[JobStatus]:
    owned = {(w.namespace, w.jobset): w for w in obs.workloads if w.jobset}
    out = [_job(v, obs.name, js, owned.get((js.namespace, js.name)), pools, by_id, now) for js in obs.jobsets]
    names = {(js.namespace, js.name) for js in obs.jobsets}
    out += [_job(v, obs.name, None, w, pools, by_id, now) for w in obs.workloads
            if (w.namespace, w.jobset) not in names]
    out += [_service(v, obs.name, sw, pools, by_id, now) for sw in obs.services if sw.job_id]
    return out


def _service(v: Validated, cluster: str, sw: ServiceWorkload, pools: dict[tuple[str, str], ResolvedPool],
             by_id: dict[str, Job], now: datetime) -> JobStatus:
    """One Deployment or LeaderWorkerSet of an inference job (module docstring)."""
    job_id = sw.job_id or f"{sw.namespace}/{sw.name}"
    pool = pools.get((cluster, sw.pool or ""))
    units, accelerators = _units(v, job_id, pool, sw.replicas)
    unit_usd = v.unit_prices[pool.key].hourly_usd if pool is not None and pool.key in v.unit_prices else None
    hourly = None
    if pool is not None and accelerators is not None and unit_usd is not None:
        hourly = round(accelerators * unit_usd / pool.unit_accelerators, 6)
    notes = [f"{sw.ready_replicas}/{sw.replicas} replicas ready ({sw.kind} {sw.name})"]
    if job_id not in v.options:
        notes.append("not in jobs/")
    if pool is None and sw.pool:
        notes.append(_no_pool(sw.pool, cluster, pools))
    job = by_id.get(job_id)
    phase: Phase = "running" if sw.ready_replicas else "queued"
    start = sw.created_at if phase == "running" else None   # serving since created (estimate: module docstring)
    hours = max(0.0, (now - start).total_seconds()) / 3600 if start is not None else 0.0
    past, _ = month_hours(now)
    month = max(0.0, now.timestamp() - max(start.timestamp(), now.timestamp() - past * 3600)) / 3600 \
        if start is not None else 0.0
    return JobStatus(job=job_id, phase=phase, cluster=cluster, pool=sw.pool,
                     since=sw.created_at, queue_wait_minutes=None, restarts=0, evictions=0, units=units,
                     accelerators=accelerators, hourly_usd=hourly,
                     cost_usd=round(hourly * hours, 2) if hourly is not None else None, note="; ".join(notes),
                     priority=_priority(v, job),
                     month_cost_usd=round(hourly * month, 2) if hourly is not None else 0.0, service=True)


def _no_pool(name: str, cluster: str, pools: dict[tuple[str, str], ResolvedPool]) -> str:
    """A live object names a pool its cluster's YAML lacks: say so, with the pool that was likely meant."""
    near = closest(name, [p for c, p in pools if c == cluster])
    return f"pool `{name}` is not in fleet/clusters/{cluster}.yaml" + (f" (did you mean `{near}`?)" if near else "")


def _job(v: Validated, cluster: str, js: JobSet | None, w: Workload | None,
         pools: dict[tuple[str, str], ResolvedPool], by_id: dict[str, Job], now: datetime) -> JobStatus:
    if js is not None:
        job_id, pool_name = js.job_id or f"{js.namespace}/{js.name}", js.pool
    else:
        assert w is not None
        job_id, pool_name = f"{w.namespace}/{w.name}", next(iter(sorted(w.flavors.values())), None)
    phase: Phase = w.phase() if w is not None else _jobset_phase(js)
    pool = pools.get((cluster, pool_name or ""))
    units, accelerators = _units(v, job_id, pool)
    unit_usd = v.unit_prices[pool.key].hourly_usd if pool is not None and pool.key in v.unit_prices else None
    hourly = None
    if pool is not None and accelerators is not None and unit_usd is not None:  # the planner's price of a share
        hourly = round(accelerators * unit_usd / pool.unit_accelerators, 6)
    hours = _admitted_hours(w, now)
    notes = [] if job_id in v.options else ["not in jobs/"]
    job = by_id.get(job_id)
    restarts, evictions = js.restarts if js else 0, sum(e.count for e in w.evictions) if w else 0
    lost = lost_accelerator_hours(accelerators or 0, job.checkpoint_minutes if job else None)
    if pool is None and pool_name:
        notes.append(_no_pool(pool_name, cluster, pools))
    return JobStatus(
        job=job_id, phase=phase, cluster=cluster, pool=pool_name, since=_since(phase, js, w),
        queue_wait_minutes=_queue_wait(w, now), restarts=restarts, evictions=evictions, units=units,
        accelerators=accelerators, hourly_usd=hourly, cost_usd=round(hourly * hours, 2) if hourly is not None else None,
        note="; ".join(notes), priority=_priority(v, job),
        reason=_reason(phase, w), lost_accelerator_hours=_lost(lost, restarts + evictions),
        outside_data_region=bool(job and job.data_region and pool and pool.region != job.data_region
                                 and phase in ACTIVE),
        month_cost_usd=round(hourly * _month_hours(w, now), 2) if hourly is not None else 0.0,
        unit_ids=js.units if js is not None else None)


def _priority(v: Validated, job: Job | None) -> str:
    """The job's priority class (priorities.yaml's default when it names none); "" for a job not in jobs/."""
    if job is None:
        return ""
    return job.priority or (v.loaded.priorities.default if v.loaded.priorities else "")


def _lost(per_disruption: float | None, disruptions: int) -> float | None:
    """The work bound over `disruptions` (0 without any; None when a disrupted job names no checkpoint)."""
    if not disruptions:
        return 0.0
    return None if per_disruption is None else per_disruption * disruptions


def _reason(phase: Phase, w: Workload | None) -> str:
    """Why the job waits or was evicted, in Kueue's words (the deciding condition's message)."""
    if w is None or phase not in ("queued", "evicted"):
        return ""
    for kind in ("Evicted", "QuotaReserved", "Admitted") if phase == "evicted" else ("QuotaReserved", "Admitted"):
        c = w.condition(kind)
        if c is not None and c.message and (kind == "Evicted" or c.status != "True"):
            return c.message
    return ""


def _month_hours(w: Workload | None, now: datetime) -> float:
    """Hours of the current admission inside the calendar month of `now`."""
    admitted = w.condition("Admitted") if w is not None else None
    if w is None or admitted is None or admitted.status != "True" or admitted.since is None:
        return 0.0
    finished = w.condition("Finished")
    end = finished.since if finished is not None and finished.status == "True" and finished.since else now
    past, _ = month_hours(now)
    start = max(admitted.since.timestamp(), now.timestamp() - past * 3600)
    return max(0.0, end.timestamp() - start) / 3600


def _jobset_phase(js: JobSet | None) -> Phase:
    if js is None:
        return "unknown"
    if js.terminal_state:
        return "succeeded" if js.terminal_state == "Completed" else "failed"
    return "queued" if js.suspended else "unknown"


def _units(v: Validated, job_id: str, pool: ResolvedPool | None,
           replicas: int | None = None) -> tuple[int | None, int | None]:
    """(units, accelerators) the job takes of `pool`, from its option for the pool's accelerator (`replicas`:
    that many of an inference job's replicas, else all of them)."""
    if pool is None:
        return None, None
    options = [o for o in v.options.get(job_id, ()) if o.accelerator == pool.accelerator]
    exact = [o for o in options if o.shape is None or o.shape == pool.shape]
    if not options:
        return None, None
    option = (exact or options)[0]
    jobs = v.loaded.jobs        # sorted by id (load.Loaded): a binary search, not a scan per job
    i = bisect_left(jobs, job_id, key=lambda j: j.id)
    if replicas is None:
        replicas = jobs[i].replicas if i < len(jobs) and jobs[i].id == job_id else 1   # each replica is one gang
    per_gang = math.ceil(option.count / pool.unit_accelerators)
    return per_gang * replicas, option.count * replicas


def _admitted_hours(w: Workload | None, now: datetime) -> float:
    if w is None:
        return 0.0
    seconds = float(w.past_execution_seconds)
    admitted, finished = w.condition("Admitted"), w.condition("Finished")
    if admitted is not None and admitted.status == "True" and admitted.since is not None:
        end = finished.since if finished is not None and finished.status == "True" and finished.since else now
        seconds += max(0.0, (end - admitted.since).total_seconds())
    return seconds / 3600


def _since(phase: Phase, js: JobSet | None, w: Workload | None) -> datetime | None:
    if w is None:
        return js.created_at if js is not None and phase == "queued" else None
    deciding = {"running": "PodsReady", "admitted": "Admitted", "succeeded": "Finished", "failed": "Finished",
                "evicted": "Evicted"}.get(phase)
    c = w.condition(deciding) if deciding else None
    return c.since if c is not None else w.created_at


def _queue_wait(w: Workload | None, now: datetime) -> float | None:
    if w is None or w.created_at is None:
        return None
    admitted = w.condition("Admitted")
    if admitted is not None and admitted.status == "True" and admitted.since is not None:
        end = admitted.since
    elif w.is_true("Finished"):
        return None
    else:
        end = now
    return round(max(0.0, (end - w.created_at).total_seconds()) / 60, 1)


def _used(v: Validated, jobs: list[JobStatus]) -> dict[tuple[str, str], int]:
    """Units the admitted and running jobs take of each pool (module docstring): a unit counted once however
    many jobs share it."""
    size = {(p.cluster, p.name): p.unit_accelerators for p in v.pools}
    known: dict[tuple[str, str], set[int]] = defaultdict(set)
    loose: dict[tuple[str, str], int] = defaultdict(int)      # accelerators of jobs that name no units
    for j in jobs:
        if j.phase in ACTIVE and j.cluster and j.pool and j.units:
            if j.unit_ids:
                known[(j.cluster, j.pool)].update(j.unit_ids)
            elif j.service:                     # its replicas are pods of their own: a gang each
                loose[(j.cluster, j.pool)] += j.units * size.get((j.cluster, j.pool), 0)
            else:
                loose[(j.cluster, j.pool)] += j.accelerators or 0
    return {k: len(known.get(k, ())) + (math.ceil(loose.get(k, 0) / size[k]) if k in size else 0)
            for k in set(known) | set(loose)}


def _pools(v: Validated, snap: Snapshot, jobs: list[JobStatus]) -> tuple[PoolStatus, ...]:
    used = _used(v, jobs)
    out = []
    for p in sorted(v.pools, key=lambda p: (p.cluster, p.name)):
        obs = snap.cluster(p.cluster)
        observed = obs is not None and obs.status != "unreachable"
        nodes = [n for n in obs.nodes if n.pool == p.name] if obs is not None else []
        units: dict[str, list[bool]] = defaultdict(list)
        for n in nodes:
            key = str(n.unit) if p.kind == "tpu" and n.unit is not None else n.name
            units[key].append(n.usable)
        ready = sum(all(u) for u in units.values())
        problems = tuple(f"{n.name}: " + ", ".join(f"{c.type}={c.status}" + (f" ({c.reason})" if c.reason else "")
                                                    for c in n.problems) + (" cordoned" if n.unschedulable else "")
                         for n in nodes if not n.usable)
        taken = used.get((p.cluster, p.name), 0)
        if observed and taken > len(units):     # jobs on units not seen (yet): used never exceeds what is there
            problems += (f"its jobs take {taken} units, {len(units)} observed",)
            taken = len(units)
        out.append(PoolStatus(p.cluster, p.name, observed, len(nodes), len(units), ready, len(units) - ready,
                              taken, problems))
    return tuple(out)


def _teams(v: Validated, jobs: list[JobStatus], pools: dict[tuple[str, str], ResolvedPool],
           now: datetime) -> tuple[TeamStatus, ...]:
    teams = v.loaded.teams.teams if v.loaded.teams is not None else ()
    used: dict[tuple[str, str], int] = defaultdict(int)
    hourly: dict[str, float] = defaultdict(float)
    spent: dict[str, float] = defaultdict(float)
    spot_used: dict[tuple[str, str], int] = defaultdict(int)
    charged = spot_charges(v.loaded.teams, v.loaded.priorities, v.loaded.jobs)
    _, left = month_hours(now)
    for j in jobs:
        spent[j.job.split("/")[0]] += j.month_cost_usd
        pool = pools.get((j.cluster or "", j.pool or ""))
        if j.phase in ACTIVE and pool is not None:
            team = j.job.split("/")[0]
            used[(team, pool.accelerator)] += j.accelerators or 0
            if pool.accelerator in charged.get(j.job, ()):
                spot_used[(team, pool.accelerator)] += j.accelerators or 0
            hourly[team] += j.hourly_usd or 0.0
    out = []
    for t in sorted(teams, key=lambda t: t.name):
        accelerators = sorted(set(t.quota) | {a for (team, a) in used if team == t.name}) or [""]
        for acc in accelerators:
            q = t.quota.get(acc)
            out.append(TeamStatus(t.name, acc, used[(t.name, acc)], q.nominal if q else None, round(hourly[t.name], 2),
                                  round(hourly[t.name] * HOURS_PER_MONTH, 2), t.budget_monthly_usd,
                                  round(spent[t.name], 2), round(spent[t.name] + hourly[t.name] * left, 2),
                                  spot_used[(t.name, acc)], q.spot if q else None))
    return tuple(out)
