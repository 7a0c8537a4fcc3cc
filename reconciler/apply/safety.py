"""Apply what was reviewed: what a plan stops, moves or preempts of the work that runs, and the check that
`fleet apply` does not go beyond what the pull request showed. Pure.

What runs is read from the snapshot for every reachable cluster (its Fleet JobSets), and for a cluster Fleet
cannot reach from the last plan it applied (`.fleet/last-applied-plan.json`, see `record`): the jobs that
plan placed there are taken as still running, since nothing says otherwise.

A plan disrupts a running job when it deletes it (`jobs.decide`: it preempts it, places it on another cluster
or pool or in another place of its pool, or its job file was removed) or when it places it nowhere (its pool
would shrink under it: the failure of the budget cut that issue 12 describes). Another place of its pool is
judged by the planner's own rule (`plan.units.stays`, against the units the JobSet's annotation records): a
TPU job given other slices moves (a slice is physical capacity), a GPU job given other node numbers does not
(the nodes of a node group are interchangeable, and the planner renumbers them 0..k-1), so the reviewed
check agrees with the plan's `status` and the pull request's "Moves" headline. A job the plan moves onto the
place it runs in (`moved`, "the job's shape changed": a gang whose file changed its size on its node) is
re-created there when its JobSet runs an earlier spec of its file (its `fleet.dev/spec-digest`), as the reconcile
loop restarts it (`models.runs_earlier_spec`); one that runs the spec its file has gets no write.

An inference service is judged per object: each of its Deployments and LeaderWorkerSets that the snapshot
shows with Fleet's labels on a reachable cluster is matched by its `fleet.dev/pool` label against the plan's
placements of the job (a spread service has one per pool), never by a guessed name; one on a pool the plan
left is deleted as a move (after the new objects are applied: `flow`), one on a planned pool but named for
another number of pools in its cluster (`<job>-<pool>` where render now writes `<job>`, or back) is replaced
by the object render writes, which is applied first (a rename, not a disruption). `fleet apply` refuses (exit
1) when its own plan has a disruption that the reviewed plan (`--reviewed FILE`, the JSON the plan workflow
posted) does not have, or has with another target, naming each job; without `--reviewed` it refuses any
disruption, so a fresh plan never stops running work on its own.

A preemption the plan makes at the victim's next checkpoint (`after_minutes`: its reason says it keeps running
until then, its units reserved for the preemptor) is carried out by the reconcile loop in its first cycle after
the checkpoint; apply leaves it to the loop (`checkpoint_holds`, the loop's rule, reconcile/ckptwait.py): it
neither deletes the victim nor creates, submits or moves its preemptor before then (flow.py `held_back`,
`without_held`). Before the thirty-eighth session (2026-12-07) apply deleted the victim at once, losing the work
since its checkpoint that the reviewed plan said it kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..models import runs_earlier_spec
from ..observe.model import JobSet, ServiceWorkload, Snapshot
from ..plan.types import Plan, changed_away
from ..plan.units import interchangeable, stays
from ..reconcile.ckptwait import as_now, deferred, released, said
from ..reconcile.decide import copies, job_facts
from ..reconcile.model import Knobs
from ..reconcile.services import serving
from ..render.service import workload_name
from ..resolve import ResolvedPool
from ..suggest import unit_list
from ..validate import Validated

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
API_VERSIONS = {"JobSet": JOBSET_API, "Deployment": "apps/v1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
                "RayJob": "ray.io/v1", "RayService": "ray.io/v1"}
GANGS = frozenset({"JobSet", "RayJob", "RayService"})
"""The kinds of a gang's one object (observe/ray.py reads Ray gangs into the snapshot's JobSet rows)."""


@dataclass(frozen=True, order=True)
class Disruption:
    job: str
    cluster: str
    what: str        # "preempt" | "move" | "stop"
    target: str      # the new cluster/pool of a move, else ""
    reason: str

    def line(self) -> str:
        return f"{self.job} (running on {self.cluster}): {self.reason}"


def running_jobsets(snapshot: Snapshot | None, last_applied: Plan | None,
                    clusters: Sequence[str]) -> dict[str, list[JobSet]]:
    """Per cluster, the Fleet JobSets that exist there: observed on a reachable cluster; on one without an
    observation (or unreachable), the jobs the last applied plan placed there, taken as running."""
    out: dict[str, list[JobSet]] = {}
    for cluster in clusters:
        seen = snapshot.cluster(cluster) if snapshot is not None else None
        if seen is not None and seen.status != "unreachable":
            out[cluster] = [j for j in seen.jobsets if j.job_id]
        elif last_applied is not None:
            out[cluster] = [JobSet(namespace=p.job.split("/")[0], name=p.job.split("/")[1], team=p.job.split("/")[0],
                                   job=p.job.split("/")[1], pool=p.pool, units=p.units)
                            for p in last_applied.placements if p.cluster == cluster]
        else:
            out[cluster] = []
    return out


def running_services(snapshot: Snapshot | None, clusters: Sequence[str]) -> dict[str, list[ServiceWorkload]]:
    """Per reachable cluster, the inference Deployments and LeaderWorkerSets with Fleet's labels (on a cluster
    that cannot be read, nothing is sent anyway)."""
    out: dict[str, list[ServiceWorkload]] = {}
    for cluster in clusters:
        seen = snapshot.cluster(cluster) if snapshot is not None else None
        if seen is not None and seen.status != "unreachable":
            out[cluster] = [s for s in seen.services if s.job_id]
    return out


def placed_pools(plan: Plan) -> dict[str, set[tuple[str, str]]]:
    """job -> every (cluster, pool) the plan places it on (a spread service: several)."""
    out: dict[str, set[tuple[str, str]]] = {}
    for p in plan.placements:
        out.setdefault(p.job, set()).add((p.cluster, p.pool))
    return out


def checkpoint_holds(head: Validated, plan: Plan, snap: Snapshot | None) -> dict[str, str]:
    """Victim or preemptor -> why apply leaves it as it is: the preemptions the reconcile loop would carry out only
    after the victim's next checkpoint (module docstring), judged on the snapshot at its moment, as a loop cycle
    with no memory of earlier cycles judges them."""
    if snap is None or all(p.after_minutes is None for p in plan.preemptions):
        return {}
    interval = Knobs.of(head.loaded.placement).interval_seconds / 60
    return deferred(plan.preemptions, copies(snap), job_facts(head), interval, snap.observed_at, serving(snap))


def said_now(head: Validated, plan: Plan, snap: Snapshot | None, holds: Mapping[str, str],
             deletions: Mapping[str, list[Deletion]]) -> dict[str, list[Deletion]]:
    """`deletions` with each victim its plan held (to its checkpoint, or beside one) and apply deletes now saying
    what apply saw (reconcile/ckptwait.py `released`), not the plan's "it keeps running until ..." (before the
    forty-first session, 2026-12-07, the loop's stops and apply's deletions both said it)."""
    if snap is None or all(p.after_minutes is None for p in plan.preemptions):
        return dict(deletions)
    now = released(plan.preemptions, copies(snap), job_facts(head), serving(snap), holds)
    return {c: [replace(d, reason=as_now(d.reason, now[d.job])) if d.job in now else d for d in ds]
            for c, ds in deletions.items()}


def plan_decisions(plan: Plan) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """(placed: job -> (cluster, pool), preempted: job -> reason) of a plan."""
    return ({p.job: (p.cluster, p.pool) for p in plan.placements},
            {p.job: said(p).removeprefix("preempted ") for p in plan.preemptions})     # the preemptor named once


def moves_within(plan: Plan, live: Mapping[str, Sequence[JobSet]], pools: Mapping[str, ResolvedPool],
                 digests: Mapping[str, str] | None = None) -> dict[tuple[str, str], str]:
    """(cluster, job) -> why, for each live JobSet that the plan keeps on its pool but not in the same place
    (`plan.units.stays` against the units its annotation records, the option and shape taken as the plan's):
    a TPU job given other slices, or a job given another number of units. Other node numbers of a GPU pool
    are the same place (its nodes are interchangeable). A JobSet whose units are not known (no annotation, or
    an empty one: plan/live.py reads both so) is not judged so. And each one the plan moves (`moved`) onto the
    place it runs in while it runs an earlier spec of its file (`digests`: job -> its file's spec digest now;
    module docstring): re-created there. Before 2026-12-07 such a gang (8 GPUs of a node, its file now asking
    4) was not deleted: its new spec was sent over the running JobSet by server-side apply. Last, a copy of an
    earlier spec of a job the plan places nowhere and could not keep where it runs (`plan.types.changed_away`):
    stopped, as the reconcile loop stops it (before 2026-12-07 it ran on while its node went to another job)."""
    places = {(p.job, p.cluster, p.pool): p for p in plan.placements}
    nowhere = {q.job: q.reasons for q in plan.pending} if plan.pending else {}
    out: dict[tuple[str, str], str] = {}
    for cluster in sorted(live):
        for js in live[cluster]:
            p = places.get((js.job_id or "", cluster, js.pool or ""))
            rp = pools.get(f"{cluster}/{js.pool}")
            if p is None and js.job_id in nowhere and (why := changed_away(
                    js.job_id, js.spec_digest, (digests or {}).get(js.job_id), nowhere[js.job_id])) is not None:
                out[(cluster, js.job_id)] = why
            if p is None or rp is None:
                continue
            what = "slice" if rp.kind == "tpu" else "unit"
            if js.units and not stays(replace(p, units=js.units), p, interchangeable(rp)):
                out[(cluster, p.job)] = (f"moved to {what}(s) {unit_list(p.units)} of {p.pool_key} by the plan "
                                         f"(it runs on {what}(s) {unit_list(js.units)})")
            elif p.status == "moved" and runs_earlier_spec(js.spec_digest, (digests or {}).get(p.job)):
                out[(cluster, p.job)] = (f"moved by the plan{': ' + p.reason if p.reason else ''} (re-created on "
                                         f"{what}(s) {unit_list(p.units)} of {p.pool_key}, where it runs an "
                                         "earlier spec of its file)")
    return out


def disruptions(plan: Plan, in_git: set[str], live: Mapping[str, Sequence[JobSet]],
                services: Mapping[str, Sequence[ServiceWorkload]] | None = None, *,
                pools: Mapping[str, ResolvedPool], digests: Mapping[str, str] | None = None) -> list[Disruption]:
    """Every running (or queued) job the plan deletes, and every running job it places nowhere. `pools`: the
    head's pools by key, which say whether a pool's units are interchangeable; `digests`: each job file's spec
    digest (`moves_within`)."""
    placed, preempted = plan_decisions(plan)
    deletions, kept = decide(placed, preempted, in_git, live, services, placed_pools(plan),
                             moves_within(plan, live, pools, digests))
    out = [_of(d, placed) for d in deletions if not d.reason.startswith(RENAMED)]
    out += [Disruption(k.job, k.cluster, "stop", "", "the plan places it nowhere: its pool would shrink under it")
            for k in kept]
    return sorted(out)


def _of(d: Deletion, placed: Mapping[str, tuple[str, str]]) -> Disruption:
    if d.reason.startswith("preempted"):
        return Disruption(d.job, d.cluster, "preempt", "", d.reason)
    if d.reason.startswith("moved"):
        return Disruption(d.job, d.cluster, "move", "/".join(placed[d.job]), d.reason)
    return Disruption(d.job, d.cluster, "stop", "", d.reason)


def beyond_review(mine: Sequence[Disruption], reviewed: Sequence[Disruption]) -> list[Disruption]:
    """The disruptions of `mine` that the reviewed plan does not have (same job, same kind, same target)."""
    allowed = {(d.job, d.what, d.target) for d in reviewed}
    return [d for d in mine if (d.job, d.what, d.target) not in allowed]


@dataclass(frozen=True)
class Deletion:
    cluster: str
    namespace: str
    name: str
    job: str
    reason: str
    kind: str = "JobSet"
    to: str = ""          # a move's destination cluster
    uid: str | None = None   # the object observed: the deletion's precondition

    @property
    def api_version(self) -> str:
        return API_VERSIONS[self.kind]

    @property
    def moved(self) -> bool:
        """The old copy of a move: deleted in the foreground, so the new copy (a JobSet of the same name, when
        the move stays in the cluster) is created only once its pods are gone (`jobs.apply_object`)."""
        return self.reason.startswith("moved")


RENAMED = "renamed"


@dataclass(frozen=True)
class Kept:
    cluster: str
    job: str
    why: str


def decide(placed: Mapping[str, tuple[str, str]], preempted: Mapping[str, str], in_git: set[str],
           live: Mapping[str, Sequence[JobSet]], services: Mapping[str, Sequence[ServiceWorkload]] | None = None,
           pools: Mapping[str, set[tuple[str, str]]] | None = None,
           within: Mapping[tuple[str, str], str] | None = None) -> tuple[list[Deletion], list[Kept]]:
    """The deletions a plan decides among the live Fleet JobSets, each with its reason, and the live JobSets it
    keeps although it does not place them there (each with why).

    `placed`: job -> (cluster, pool) of the plan's placements; `preempted`: job -> the plan's reason;
    `in_git`: the jobs of the repository; `live`: per cluster, the JobSets observed there. A JobSet is deleted
    when the plan preempts its job, places it on another cluster or pool (a move: the old copy goes), or its
    job file was removed (the reviewed change stops it). A job the plan leaves pending keeps running: only
    a preemption or a move stops it. `services`: per cluster, the inference objects observed there, judged
    the same way per pool (`pools`: job -> every (cluster, pool) the plan places it on; module docstring).
    `within`: (cluster, job) -> why, for the JobSets the plan moves inside their own pool (`moves_within`:
    a TPU job given other slices, a gang re-created at its file's new size); such a JobSet is deleted as a move
    too.
    """
    deletions: list[Deletion] = []
    kept: list[Kept] = []
    for cluster in sorted(live):
        for js in live[cluster]:
            job = js.job_id
            if job is None:
                continue                        # not Fleet's
            where = placed.get(job)
            if job in preempted:
                deletions.append(Deletion(cluster, js.namespace, js.name, job, f"preempted: {preempted[job]}",
                                          js.kind))
            elif where is not None and where != (cluster, js.pool or where[1]):
                deletions.append(Deletion(cluster, js.namespace, js.name, job,
                                          f"moved to {where[0]}/{where[1]} by the plan", js.kind, where[0]))
            elif (cluster, job) in (within or {}):
                deletions.append(Deletion(cluster, js.namespace, js.name, job, (within or {})[(cluster, job)],
                                          js.kind))
            elif job not in in_git:
                deletions.append(Deletion(cluster, js.namespace, js.name, job,
                                          f"job file jobs/{job}.yaml removed", js.kind))
            elif where is None and not js.suspended and js.terminal_state is None:
                kept.append(Kept(cluster, job, "running; the plan leaves it pending but neither preempts nor "
                                               "moves it, so it keeps running"))
    for cluster in sorted(services or {}):
        for sw in (services or {})[cluster]:
            why = _service_deletion(sw, cluster, preempted, in_git, (pools or {}).get(sw.job_id or "", set()))
            if why is not None:
                deletions.append(Deletion(cluster, sw.namespace, sw.name, sw.job_id or "", why, sw.kind,
                                          uid=sw.uid))
            elif sw.job_id not in (pools or {}) and sw.replicas:
                kept.append(Kept(cluster, sw.job_id or "", "serving; the plan leaves it pending but neither "
                                                          "preempts nor moves it, so it keeps serving"))
    return deletions, kept


def _service_deletion(sw: ServiceWorkload, cluster: str, preempted: Mapping[str, str], in_git: set[str],
                      pools: set[tuple[str, str]]) -> str | None:
    """Why a plan deletes one observed inference object, or None (module docstring)."""
    job = sw.job_id or ""
    if job in preempted:
        return f"preempted: {preempted[job]}"
    if job not in in_git:
        return f"job file jobs/{job}.yaml removed"
    if not pools:
        return None
    here = sorted(pool for c, pool in pools if c == cluster)
    if sw.pool not in here:
        return f"moved to {', '.join(f'{c}/{x}' for c, x in sorted(pools))} by the plan"
    want = workload_name(sw.job or "", sw.pool, len(here))
    return None if sw.name == want else f"{RENAMED}: render now names its {sw.pool} replicas `{want}`"
