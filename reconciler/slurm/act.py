"""The reconciler's hands on Slurm: submit, cancel, requeue through slurmrestd; and the actuator that sends each
action to the Kubernetes or the Slurm side. EFFECT (network).

`SlurmActuator` is `reconcile.act.Actuator` for Slurm clusters:
- start: submits the job's document (slurm/submit.py, built from this cycle's plan), unless a job of it that
  Fleet submitted is already pending or running there (one read per start: a start that is decided again
  while the first is still queued submits nothing);
- stop: cancels the job observed (`from_uid`, the Slurm job id), after reading it back: only a job whose
  comment says Fleet submitted it for this very job is cancelled, so a job id reused by someone else's job
  is never touched; one already gone or finished counts as done;
- move: within one Slurm cluster a requeue (slurmrestd v0.0.38 has no requeue call: the job is cancelled and
  submitted again, to the pool the plan chose); across clusters the old copy is cancelled first, then the new
  one starts, on Slurm or Kubernetes (`Router`);
- resize and kueue: nothing to do (Fleet never resizes a partition; quotas are the plan's, there is no Kueue):
  reconcile/step.py decides none for Slurm clusters, so these only answer a caller that asks anyway.
`Router` sends each action to the side its cluster is on; a move between the two sides is the source's stop,
then (only if that worked) the destination's start.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..apply.jobs import ActionResult
from ..apply.safety import Deletion
from ..models import Cluster
from ..observe.model import Snapshot
from ..observe.owners import team_namespaces
from ..plan.types import Plan
from ..reconcile.act import Actuator, Outcome
from ..reconcile.decide import Action
from ..validate import Validated
from . import SUBMITTED_TAG
from .client import SlurmClient
from .observe import FAILED, GONE
from .submit import documents, parse_comment

INVALID_JOB_ID = 2017       # ESLURM_INVALID_JOB_ID
ACTIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                 "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT"}


class SlurmActuator:
    def __init__(self, clusters: Mapping[str, Cluster], documents: Callable[[Action], dict[str, Any] | None],
                 env: Mapping[str, str], timeout_s: float = 10.0) -> None:
        self.clients = {name: SlurmClient(c, env, timeout_s) for name, c in clusters.items()}
        self.documents = documents

    def close(self) -> None:
        return None

    def resize(self, cluster: str, actions: Sequence[Action]) -> Outcome:
        return Outcome(True, f"cluster {cluster} is a Slurm cluster: Fleet does not resize its partitions")

    def kueue(self, action: Action) -> Outcome:
        return Outcome(True, f"cluster {action.cluster} is a Slurm cluster: no Kueue, the plan holds the quotas")

    def start(self, action: Action, cancelled: str | None = None) -> Outcome:
        """`cancelled`: the Slurm job id a requeue has just cancelled (it lists as COMPLETING for a while)."""
        client = self.clients[action.cluster]
        account = client.ref.account_prefix + (action.job or "").partition("/")[0]
        doc = self.documents(action)
        if doc is None:
            return Outcome(False, f"this cycle's plan has no Slurm document for {action.job} on {action.cluster}",
                           "a bug: the plan placed the job but no submission was built for it")
        listed = client.request("GET", "/jobs/")
        if not listed.ok:
            return Outcome(False, listed.message, listed.hint)
        for j in (listed.body or {}).get("jobs") or []:
            if parse_comment(str(j.get("comment") or "")).get(SUBMITTED_TAG) == action.job \
                    and str(j.get("account") or "") == account and str(j.get("job_id")) != cancelled \
                    and str(j.get("job_state") or "").upper() in ACTIVE_STATES:
                return Outcome(True, f"already submitted: Slurm job {j.get('job_id')} ({j.get('job_state')})")
        got = client.request("POST", "/job/submit", doc)
        job_id = got.body.get("job_id") if isinstance(got.body, dict) else None
        if got.status == 200 and isinstance(job_id, int):     # submitted, perhaps with a warning (a node down)
            return Outcome(True, f"submitted as Slurm job {job_id}" + (f" ({got.message})" if got.message else ""))
        return Outcome(False, got.message or f"submitting {action.job} to {action.cluster}: no job id in the answer",
                       got.hint)

    def stop(self, action: Action) -> Outcome:
        return self._cancel(action.from_cluster or action.cluster, action)

    def move(self, action: Action) -> Outcome:
        source = action.from_cluster or action.cluster
        stopped = self._cancel(source, action)
        if not stopped.ok:
            return Outcome(False, f"the copy on {source} could not be cancelled, so none was submitted: "
                                  f"{stopped.message}", stopped.hint)
        started = self.start(action, cancelled=action.from_uid if source == action.cluster else None)
        verb = "requeued" if source == action.cluster else "moved"
        return Outcome(started.ok, f"{verb}: {stopped.message}; {started.message}", started.hint)

    def _cancel(self, cluster: str, action: Action) -> Outcome:
        client = self.clients[cluster]
        if not action.from_uid:
            return Outcome(False, f"no observed Slurm job of {action.job} on {cluster} to cancel: nothing cancelled",
                           "a bug: a stop or move names the job it observed (decide.copies)")
        got = client.request("GET", f"/job/{action.from_uid}")
        jobs = (got.body or {}).get("jobs") if isinstance(got.body, dict) else None
        if not got.ok and not jobs:
            if got.status == 404 or (got.status == 500 and _unknown_job(got.body)):
                return Outcome(True, f"Slurm job {action.from_uid} is gone already")
            return Outcome(False, got.message, got.hint)
        job = (jobs or [{}])[0]
        if parse_comment(str(job.get("comment") or "")).get(SUBMITTED_TAG) != action.job:
            return Outcome(False, f"Slurm job {action.from_uid} on {cluster} is not {action.job} as Fleet submitted "
                                  "it (its comment differs): not cancelled", "someone else's job: Fleet leaves it")
        state = str(job.get("job_state") or "").upper()
        if state in GONE or state in FAILED or state == "COMPLETED":
            return Outcome(True, f"Slurm job {action.from_uid} already ended ({state})")
        done = client.request("DELETE", f"/job/{action.from_uid}")
        if not done.ok:
            return Outcome(False, done.message, done.hint)
        return Outcome(True, f"cancelled Slurm job {action.from_uid}")


def _unknown_job(body: Any) -> bool:
    """slurmctld said the job id is unknown (ESLURM_INVALID_JOB_ID, 2017): not any HTTP 500, which a controller
    that does not answer (or refuses the token) gives too, with error_number -1."""
    errors = body.get("errors") if isinstance(body, dict) else None
    return any(isinstance(e, dict) and (e.get("error_number") == INVALID_JOB_ID or e.get("errno") == INVALID_JOB_ID
                                        or e.get("error") == "Invalid job id specified") for e in errors or [])


class Router:
    """`Actuator` over both sides: each action to the actuator of its cluster's side (module docstring)."""

    def __init__(self, kube: Any, slurm: SlurmActuator, slurm_clusters: set[str]) -> None:
        self.kube, self.slurm, self.slurm_clusters = kube, slurm, slurm_clusters

    def _side(self, cluster: str | None) -> Actuator:
        side: Actuator = self.slurm if cluster in self.slurm_clusters else self.kube
        return side

    def close(self) -> None:
        self.kube.close()

    def resize(self, cluster: str, actions: Sequence[Action]) -> Outcome:
        return self._side(cluster).resize(cluster, actions)

    def kueue(self, action: Action) -> Outcome:
        return self._side(action.cluster).kueue(action)

    def start(self, action: Action) -> Outcome:
        return self._side(action.cluster).start(action)

    def stop(self, action: Action) -> Outcome:
        return self._side(action.from_cluster or action.cluster).stop(action)

    def move(self, action: Action) -> Outcome:
        source, dest = self._side(action.from_cluster or action.cluster), self._side(action.cluster)
        if source is dest:
            return source.move(action)
        stopped = source.stop(action)
        if not stopped.ok:
            return Outcome(False, f"the copy on {action.from_cluster} could not be stopped, so none was started on "
                                  f"{action.cluster}: {stopped.message}", stopped.hint)
        started = dest.start(action)
        return Outcome(started.ok, f"stopped on {action.from_cluster}; {started.message or 'started'} on "
                                   f"{action.cluster}", started.hint)


def beside(kube: Any, head: Validated, plan: Plan, env: Mapping[str, str] | None = None) -> Any:
    """`kube` (the Kubernetes actuator), with the Slurm clusters of `head` beside it when there are any: their
    documents are this cycle's plan's (slurm/submit.py)."""
    slurm = {c.name: c for c in head.loaded.clusters if c.provider == "slurm"}
    if not slurm:
        return kube
    docs = documents(head, plan)
    actuator = SlurmActuator(slurm, lambda a: docs.get((a.cluster, a.job or "")), os.environ if env is None else env)
    return Router(kube, actuator, set(slurm))


def apply_slurm(head: Validated, plan: Plan, snap: Snapshot | None, deletions: Mapping[str, list[Deletion]], *,
                preview: bool, echo: Callable[[str], None],
                env: Mapping[str, str] | None = None) -> list[ActionResult]:
    """`fleet apply`'s jobs on Slurm clusters (apply/flow.py calls it after the Kubernetes ones): per cluster,
    the plan's deletions cancelled (the job observed, by its Slurm job id, only if Fleet submitted it), then
    every placed job submitted that has no pending or running Fleet job there yet; one result per job. An
    unreachable cluster (or none observed) gets one failed result and nothing is sent to it."""
    slurm = {c.name: c for c in head.loaded.clusters if c.provider == "slurm"}
    if not slurm:
        return []
    docs = documents(head, plan)
    act = SlurmActuator(slurm, lambda a: docs.get((a.cluster, a.job or "")), os.environ if env is None else env)
    namespaces = team_namespaces(head.loaded.teams)
    results: list[ActionResult] = []

    def record(r: ActionResult) -> None:
        results.append(r)
        echo(r.line())

    for name in sorted(slurm):
        seen = snap.cluster(name) if snap is not None else None
        if seen is None or seen.status == "unreachable":
            why = seen.problems[0] if seen is not None and seen.problems else None
            record(ActionResult(name, "SlurmJob", "*", "*", "failed", preview=preview,
                                error="not applied: the cluster is unreachable" + (f" ({why.message})" if why else ""),
                                hint=why.hint if why else "observe it (`fleet observe`) and rerun"))
            continue
        observed = {(js.namespace, js.name): js for js in seen.jobsets}
        for d in deletions.get(name, []):
            js = observed.get((d.namespace, d.name))
            out = Outcome(True) if preview else act.stop(Action(
                kind="stop", cluster=name, job=d.job, reason=d.reason, from_cluster=name,
                from_uid=js.uid if js is not None else None))
            record(ActionResult(name, "SlurmJob", d.namespace, d.name, "delete" if out.ok else "failed",
                                reason=d.reason, error=out.message, hint=out.hint, preview=preview))
        for (cluster, job_id), doc in sorted(docs.items()):
            if cluster != name:
                continue
            team, _, job = job_id.partition("/")
            ns = namespaces.get(team, team)
            js = observed.get((ns, job))
            if js is not None and js.terminal_state is None:
                record(ActionResult(name, "SlurmJob", ns, job, "unchanged", preview=preview))
                continue
            out = Outcome(True) if preview else act.start(Action(kind="start", cluster=name, job=job_id,
                                                                 reason="the plan places it"))
            record(ActionResult(name, "SlurmJob", ns, job, "create" if out.ok else "failed", reason=out.message,
                                error=out.message, hint=out.hint, preview=preview, sent=doc))
    return results
