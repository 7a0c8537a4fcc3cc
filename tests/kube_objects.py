"""Builders of the live objects a cluster's API serves (Kueue Workloads v1beta2, JobSets v1alpha2, Nodes), shaped
as Kueue, the JobSet controller and the kubelet write them, and valid against ../shared/schemas (checked by
tests/test_observe.py with ../shared/tools/validate_kueue.py).

`job_objects(team, job, pool, phase=...)` gives the JobSet and its Workload in the state Kueue leaves them in for
that phase (queued, admitted, running, succeeded, failed, evicted); `node(...)` one node of a pool's unit.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

T0 = datetime(2026, 11, 23, 0, 0, 0)
ACCEL = {"tpu": "google.com/tpu", "gpu": "nvidia.com/gpu"}


def ts(minutes: float) -> str:
    """RFC 3339 time `minutes` after T0."""
    return (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind: str, status: bool | str, reason: str, at: float, message: str = "") -> dict[str, Any]:
    s = status if isinstance(status, str) else ("True" if status else "False")
    return {"type": kind, "status": s, "reason": reason, "message": message or reason,
            "lastTransitionTime": ts(at), "observedGeneration": 1}


def jobset(team: str, job: str, pool: str, *, created: float = 0, suspend: bool = False, restarts: int = 0,
           terminal: str | None = None, replicas: int = 1, accel: str = "tpu", per_pod: int = 4) -> dict[str, Any]:
    status: dict[str, Any] = {"restarts": restarts, "replicatedJobsStatus": [
        {"name": "workers", "ready": 0 if suspend else replicas,
         "succeeded": replicas if terminal == "Completed" else 0,
         "failed": 1 if terminal == "Failed" else 0, "active": 0 if suspend or terminal else replicas,
         "suspended": replicas if suspend else 0}]}
    if terminal:
        status["terminalState"] = terminal
        kind = "Completed" if terminal == "Completed" else "Failed"
        status["conditions"] = [cond(kind, True, "AllJobsCompleted" if kind == "Completed" else "FailedJobs",
                                     created + 120)]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": job, "namespace": team, "creationTimestamp": ts(created), "uid": f"uid-{team}-{job}",
                     "labels": {"fleet.dev/team": team, "fleet.dev/job": job, "fleet.dev/pool": pool,
                                "kueue.x-k8s.io/queue-name": team}},
        "spec": {"suspend": suspend, "replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {
            "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "ghcr.io/example/train:1",
                                "resources": {"limits": {ACCEL[accel]: str(per_pod)}}}]}}}}}]},
        "status": status,
    }


def workload(team: str, job: str, pool: str, *, phase: str = "running", created: float = 0, admitted: float = 10,
             ended: float = 100, evictions: int = 0, replicas: int = 1, accel: str = "tpu",
             per_pod: int = 4, past_seconds: int = 0) -> dict[str, Any]:
    """The Workload of `team/job` as Kueue writes it in `phase`."""
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {}
    reserved = phase in ("admitted", "running", "succeeded", "failed")
    if reserved:
        conditions += [cond("QuotaReserved", True, "QuotaReserved", admitted),
                       cond("Admitted", True, "Admitted", admitted)]
        status["admission"] = {"clusterQueue": f"{team}", "podSetAssignments": [
            {"name": "workers", "count": replicas, "flavors": {ACCEL[accel]: pool},
             "resourceUsage": {ACCEL[accel]: str(per_pod * replicas)}}]}
    if phase in ("running", "succeeded", "failed"):
        conditions.append(cond("PodsReady", True, "PodsReady", admitted + 2))
    if phase in ("succeeded", "failed"):
        conditions.append(cond("Finished", True, "Succeeded" if phase == "succeeded" else "Failed", ended))
    if phase == "evicted":
        conditions += [cond("QuotaReserved", False, "Pending", ended),
                       cond("Admitted", False, "NoReservation", ended),
                       cond("Evicted", True, "Preempted", ended, "Preempted to accommodate a higher priority Workload"),
                       cond("Preempted", True, "InClusterQueue", ended),
                       cond("Requeued", True, "Preempted", ended)]
        status["requeueState"] = {"count": max(evictions, 1), "requeueAt": ts(ended + 5)}
    if evictions or phase == "evicted":
        status["schedulingStats"] = {"evictions": [{"reason": "Preempted", "underlyingCause": "InClusterQueue",
                                                    "count": max(evictions, 1)}]}
    if past_seconds:
        status["accumulatedPastExecutionTimeSeconds"] = past_seconds
    if conditions:
        status["conditions"] = conditions
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"jobset-{job}-0a1b2", "namespace": team, "creationTimestamp": ts(created),
                     "labels": {"kueue.x-k8s.io/job-uid": f"uid-{team}-{job}"},
                     "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": job,
                                          "uid": f"uid-{team}-{job}", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"queueName": team, "priority": 100, "active": True, "podSets": [{
            "name": "workers", "count": replicas, "template": {"spec": {"containers": [{
                "name": "main", "image": "ghcr.io/example/train:1",
                "resources": {"limits": {ACCEL[accel]: str(per_pod)}}}]}}}]},
        "status": status,
    }


def job_objects(team: str, job: str, pool: str, phase: str = "running", **kw: Any) -> list[dict[str, Any]]:
    """The JobSet and Workload of one job in `phase`."""
    terminal = {"succeeded": "Completed", "failed": "Failed"}.get(phase)
    js = jobset(team, job, pool, created=kw.get("created", 0), suspend=phase in ("queued", "evicted"),
                restarts=kw.pop("restarts", 0), terminal=terminal, replicas=kw.get("replicas", 1),
                accel=kw.get("accel", "tpu"), per_pod=kw.get("per_pod", 4))
    return [js, workload(team, job, pool, phase=phase, **kw)]


def node(name: str, *, pool: str | None = None, node_pool: str | None = None, ready: bool = True,
         unschedulable: bool = False, extra: tuple[dict[str, Any], ...] = (), accel: str = "tpu",
         eks: bool = False) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if pool:
        labels["fleet.dev/pool"] = pool
    if node_pool:
        labels["eks.amazonaws.com/nodegroup" if eks else "cloud.google.com/gke-nodepool"] = node_pool
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": ts(0)},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"capacity": {ACCEL[accel]: "4"}, "allocatable": {ACCEL[accel]: "4"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                   "reason": "KubeletReady" if ready else "KubeletNotReady",
                                   "message": "kubelet is posting ready status" if ready else "PLEG is not healthy",
                                   "lastHeartbeatTime": ts(50), "lastTransitionTime": ts(30)}, *extra]},
    }


def serving(team: str, job: str, pool: str, *, name: str | None = None, kind: str = "Deployment",
            replicas: int = 2, ready: int = 2, size: int = 2) -> dict[str, Any]:
    """An inference job's Deployment (apps/v1) or LeaderWorkerSet (leaderworkerset.x-k8s.io/v1, groups of `size`
    pods) on one pool, with Fleet's labels as render/service.py writes them (named `<job>` or `<job>-<pool>`),
    and the status its controller keeps (`readyReplicas`)."""
    labels = {"fleet.dev/team": team, "fleet.dev/job": job, "fleet.dev/pool": pool,
              "kueue.x-k8s.io/queue-name": team, "kueue.x-k8s.io/priority-class": "production"}
    pod = {"metadata": {"labels": {"fleet.dev/team": team, "fleet.dev/job": job, "fleet.dev/pool": pool}},
           "spec": {"restartPolicy": "Always", "nodeSelector": {"fleet.dev/pool": pool},
                    "containers": [{"name": "main", "image": "ghcr.io/example/serve:1",
                                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    meta = {"name": name or job, "namespace": team, "creationTimestamp": ts(0), "uid": f"uid-{team}-{name or job}",
            "labels": labels}
    if kind == "Deployment":
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"fleet.dev/team": team,
                                                                            "fleet.dev/job": job}},
                         "template": pod},
                "status": {"replicas": replicas, "readyReplicas": ready, "availableReplicas": ready}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": pod}},
            "status": {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": replicas}}
