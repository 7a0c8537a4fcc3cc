"""The actuator of real clusters: jobs by server-side apply and delete, pools and Kueue through the Pulumi stacks.

EFFECT (network: each cluster's Kubernetes API; Pulumi through `apply.engine`).

- start: the job's objects as `fleet render` writes them (`<cluster>/jobsets/<team>.<job>.yaml` or
  `services/...`; built for that job alone, reconcile/manifests.py) by server-side apply through
  `apply/jobs.py` (the one implementation `fleet apply` uses too), field manager `fleet`, never forced (a
  conflict with another manager is reported, never overridden). A JobSet that already exists is not applied
  again (`create_only`: one read per start): once Kueue admits it, `spec.suspend` and the scheduling fields
  are Kueue's. So no request of the reconciler ever carries `spec.suspend` for an admitted JobSet. A
  service's start applies all of its objects in the cluster (one Deployment or LeaderWorkerSet per pool),
  then deletes the job's other objects there, found by its labels (`apply.jobs.prune_job`): the pools its
  replicas left, and `<job>` or `<job>-<pool>` when the number of its pools there changed.
- stop: delete the JobSet observed (the copy `decide` saw: its namespace, which must be the team's, its name
  and its uid as the delete's precondition; never a path built from the plan's job id; background
  propagation: its Workload and pods go with it); for a service every Deployment, LeaderWorkerSet and
  Service with the job's labels in the team's namespace (each with its uid as precondition). Already gone
  counts as done; a JobSet made since under that name (another uid) is not deleted.
- move: a JobSet's old copy is deleted first, in the foreground (the JobSet stays until its pods are gone);
  the new copy is created only once the old one is gone (read back: a JobSet still being deleted is never
  applied to), else the next cycle starts it, so two copies never run, not even the old pods in their grace
  period beside the new ones (they would share the checkpoint). A service's new copy first, then the old
  one is deleted.
- resize and kueue: the cluster's `<cluster>-infra` / `<cluster>-kueue` stack spec of this cycle's render,
  `up` through the engine (`apply.orchestrate.Engine`); without the Pulumi CLI the engine is None and these
  actions fail with a message that says so. An infra stack is previewed first, and an update that would
  replace a node pool, re-create its nodes or delete it is not made (apply/pool_guard.py): the action fails
  with the pools and what forces it, and is asked again after the usual backoff; only `fleet apply
  --allow-replace` replaces a pool.
- Every job action is also a Kubernetes Event (events.k8s.io/v1) on its JobSet, in the team's namespace,
  reported by controller `fleet.dev/reconciler`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..apply.jobs import ActionResult, ClusterClient, apply_object, delete_object, prune_job
from ..render.gang import GANG_KINDS
from ..render.ray import RAY
from .act import Outcome
from .decide import Action
from .kubeio import Client
from .lease import micro_time

CONTROLLER = "fleet.dev/reconciler"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
GANG_PATHS = {"RayJob": "/apis/ray.io/v1/namespaces/{ns}/rayjobs",      # a Ray job's copy (observe/ray.py)
              "RayService": "/apis/ray.io/v1/namespaces/{ns}/rayservices"}


class ClusterActuator:
    """`act.Actuator` for real clusters. `specs` renders this cycle's stack specs by stack name
    (`render.pool_and_kueue_docs` of the plan with the decided pool targets, only the stacks with an action;
    called once, only when a stack must run); `manifests` builds the objects of one start
    (`manifests.job_manifests`); `engine` runs a stack spec (None: no Pulumi CLI)."""

    def __init__(self, clients: Mapping[str, Client], specs: Callable[[], Mapping[str, dict[str, Any]]],
                 manifests: Callable[[Action], list[dict[str, Any]]], namespaces: Mapping[str, str], engine: Any,
                 identity: str, now: datetime) -> None:
        self.clients, self._specs, self._manifests, self.namespaces = clients, specs, manifests, namespaces
        self.engine, self.identity, self.now = engine, identity, now
        self._rendered: Mapping[str, dict[str, Any]] | None = None

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    # --- the protocol ----------------------------------------------------------------------------------------
    def resize(self, cluster: str, actions: Sequence[Action]) -> Outcome:
        return self._stack(f"{cluster}-infra")

    def kueue(self, action: Action) -> Outcome:
        return self._stack(f"{action.cluster}-kueue")

    def stop(self, action: Action) -> Outcome:
        out = self._delete(action.from_cluster or action.cluster, action)
        self._event(action.from_cluster or action.cluster, action, out, "Stop", "Stopped")
        return out

    def start(self, action: Action) -> Outcome:
        out = self._create(action)
        self._event(action.cluster, action, out, "Start", "Started")
        return out

    def move(self, action: Action) -> Outcome:
        source = action.from_cluster or action.cluster
        if action.service:
            started = self._create(action)
            out = started if not started.ok else self._delete(source, action)
            if started.ok and not out.ok:
                out = Outcome(False, f"new copy started on {action.cluster}; the old one on {source} could not be "
                                     f"stopped: {out.message}", out.hint, out.refused)
        else:
            stopped = self._delete(source, action, foreground=True)
            if not stopped.ok:
                out = Outcome(False, f"the copy on {source} could not be stopped, so none was started on "
                                     f"{action.cluster}: {stopped.message}", stopped.hint, stopped.refused)
            elif source != action.cluster and not self._gone(source, action):
                out = Outcome(True, f"stopped on {source}; its JobSet is still being deleted, so the new copy "
                                    "starts next cycle")
            else:     # the same cluster: the apply reads the old JobSet back and waits while it is deleted
                out = self._create(action)
        self._event(source, action, out, "Move", "Moved")
        if source != action.cluster:
            self._event(action.cluster, action, out, "Move", "Moved")
        return out

    # --- jobs --------------------------------------------------------------------------------------------------
    def _job(self, action: Action) -> tuple[str, str]:
        team, _, name = (action.job or "").partition("/")
        return self.namespaces.get(team, team), name

    def _jobs_client(self, cluster: str) -> ClusterClient | None:
        """apply/jobs.py's client over this cluster's connection (one server-side apply for Fleet)."""
        c = self.clients.get(cluster)
        if c is None or c.api is None:
            return None
        return ClusterClient(c.cluster, c.context, c.server, c.api, c.timeout_s)

    def _create(self, action: Action) -> Outcome:
        client = self._jobs_client(action.cluster)
        if client is None:
            c = self.clients.get(action.cluster)
            return Outcome(False, c.problem if c else f"cluster {action.cluster} is not in fleet/clusters/",
                           "add the context to the kubeconfig (KUBECONFIG)")
        docs = self._manifests(action)
        if not docs:
            return Outcome(False, f"the render of this cycle has no objects for {action.job} on {action.cluster}",
                           "a bug: the plan placed the job but render wrote nothing for it")
        for doc in docs:   # a JobSet is never applied again once it exists: spec.suspend is Kueue's then
            done = apply_object(client, doc, create_only=doc.get("kind") in GANG_KINDS)
            if not done.ok:
                return Outcome(False, done.error, done.hint, done.refused)
            if done.action == "wait":
                return Outcome(True, f"stopped; its {done.kind} is still being deleted, so the new copy starts "
                                     "next cycle")
        if action.service:          # the job's objects of other pools (or names) in this cluster are stale now
            ns, name = self._job(action)
            keep = {(str(d.get("kind")), str((d.get("metadata") or {}).get("name"))) for d in docs} \
                | _kept(action)     # the old objects that serve until the new replicas are ready
            return _first_failure(prune_job(client, ns, (action.job or "").partition("/")[0], name, keep,
                                            f"{action.reason} (its replicas left these pools)"))
        return Outcome(True)

    def _delete(self, cluster: str, action: Action, foreground: bool = False) -> Outcome:
        client = self._jobs_client(cluster)
        if client is None:
            return Outcome(False, f"cluster {cluster} cannot be reached through its kubeconfig context")
        ns, name = self._job(action)
        if action.service:          # the objects with the job's labels, whatever their pool and name, but `keep`
            keep = _kept(action) | ({("Service", name)} if action.keep else set())
            return _first_failure(prune_job(client, ns, (action.job or "").partition("/")[0], name, keep,
                                            action.reason))
        if not action.from_name or action.from_namespace != ns:
            return Outcome(False, f"no observed JobSet of {action.job} in namespace {ns} to delete: nothing deleted",
                           "a bug: a stop or move names the copy it observed (decide.copies)")
        done = delete_object(client, action.from_kind, action.from_namespace, action.from_name, action.reason,
                             api_version=RAY if action.from_kind in GANG_PATHS else "jobset.x-k8s.io/v1alpha2",
                             propagation="Foreground" if foreground else "Background", uid=action.from_uid)
        return Outcome(True) if done.ok else Outcome(False, done.error, done.hint, done.refused)

    def _gone(self, cluster: str, action: Action) -> bool:
        """The JobSet observed is gone (absent, or another object, of another uid, holds its name now)."""
        path = f"{GANG_PATHS.get(action.from_kind, JOBSETS).format(ns=action.from_namespace)}/{action.from_name}"
        got = self.clients[cluster].request("GET", path)
        if got.status == 404:
            return True
        uid = ((got.body or {}).get("metadata") or {}).get("uid") if isinstance(got.body, dict) else None
        return got.status == 200 and action.from_uid is not None and uid is not None and uid != action.from_uid

    def _event(self, cluster: str, action: Action, out: Outcome, verb: str, reason: str) -> None:
        """An Event on the job's JobSet; best effort (the JSON line is the record that must not be lost)."""
        client = self.clients.get(cluster)
        if client is None or client.api is None:
            return
        ns, name = self._job(action)
        key = f"{self.now.isoformat()} {self.identity} {verb} {cluster} {action.job}"
        note = (action.reason if out.ok else f"{action.reason}; failed: {out.message}")[:1024]
        client.request("POST", f"/apis/events.k8s.io/v1/namespaces/{ns}/events", {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"{name}.{hashlib.sha256(key.encode()).hexdigest()[:12]}", "namespace": ns},
            "eventTime": micro_time(self.now), "reportingController": CONTROLLER,
            "reportingInstance": self.identity[:128], "action": verb, "reason": reason if out.ok else "Failed",
            "regarding": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": name, "namespace": ns},
            "note": note, "type": "Normal" if out.ok else "Warning"})

    # --- stacks ------------------------------------------------------------------------------------------------
    def _stack(self, stack: str) -> Outcome:
        if self.engine is None:
            return Outcome(False, f"stack {stack}: the Pulumi CLI is not on PATH, so pools and Kueue objects "
                                  "cannot be changed", "install it (https://www.pulumi.com/docs/install/) or run "
                                                       "with --layers jobs")
        if self._rendered is None:
            self._rendered = self._specs()
        spec = self._rendered.get(stack)
        if spec is None:
            return Outcome(False, f"stack {stack}: not in this cycle's render")
        from ..apply.orchestrate import StackFailed
        from ..apply.pool_guard import refusal, refused

        try:
            if spec.get("layer") == "infra":   # never replace or delete a pool on its own: report and hold
                bad = refused(spec, self.engine.preview_steps(spec).steps, allow=())
                if bad:
                    return Outcome(False, *refusal(stack, bad))
            changes = self.engine.up(spec)
        except StackFailed as e:
            return Outcome(False, f"stack {stack}: {e.message}", e.hint)
        done = ", ".join(f"{n} {k}" for k, n in sorted(changes.items()) if n and k != "same")
        return Outcome(True, f"stack {stack}: {done or 'no change'}")


def _kept(action: Action) -> set[tuple[str, str]]:
    """The (kind, name)s of a service's objects the action leaves alone (`Action.keep` names them)."""
    return {(kind, n) for kind in ("Deployment", "LeaderWorkerSet") for n in action.keep}


def _first_failure(results: Sequence[ActionResult]) -> Outcome:
    bad = next((r for r in results if not r.ok), None)
    return Outcome(True) if bad is None else Outcome(False, bad.error, bad.hint, bad.refused)
