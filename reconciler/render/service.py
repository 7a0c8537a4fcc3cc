"""Inference jobs as services: a Deployment or a LeaderWorkerSet per pool its replicas run on, plus a Service.
Pure.

- A replica that fits one pod (one node, or part of one) is a Deployment pod; a replica that spans hosts
  (a multi-host TPU slice, several GPU nodes) is a LeaderWorkerSet group (`leaderworkerset.x-k8s.io/v1`,
  kubernetes-sigs/lws; one group = one replica, `size` = its pods; pod 0 is the leader). Both restart
  crashed pods for ever (`restartPolicy: Always`); LWS recreates the whole group when one of its pods
  restarts (`RecreateGroupOnPodRestart`), since a multi-host model server cannot lose a host.
- Placement is per pool group: the plan has one placement per pool a job's replicas run on (replicas
  spread over zones or clusters, plan/spread.py), and each group becomes one workload on that pool's
  flavor in its cluster, named after the job when it is the job's only group in the cluster and
  `<job>-<pool>` otherwise; every cluster that runs replicas of the job has its own Service.
- Kueue admits them as it admits JobSets: `kueue.x-k8s.io/queue-name` and `kueue.x-k8s.io/priority-class`
  on the workload (Kueue's "Run a Deployment" and "Run a LeaderWorkerSet" tasks; the `deployment`, `pod` and
  `leaderworkerset.x-k8s.io/leaderworkerset` integrations must be enabled in the Kueue configuration, as
  the README says). They are not suspended: Kueue gates their pods until admitted.
- Rollouts start new replicas before old ones stop: `maxUnavailable: 0` and `maxSurge: 1` (Deployment
  RollingUpdate; LWS `rolloutStrategy.rollingUpdateConfiguration`). All replicas moving to another pool
  of the cluster keep the workload's name (and the Deployment's selector, see `_selector`), so the move is
  such a rollout; a move to another cluster is a new workload there, beside the old one until it goes.
- The container gets `port` as a named port `serve` and a readiness probe: HTTP GET `readiness_path`
  when given, else a TCP check of the port. The Service (ClusterIP, named after the job, in the team's
  namespace) selects the job's pods (only LWS leaders, label `leaderworkerset.sigs.k8s.io/worker-index:
  "0"`, since the leader serves the group); without a `port` it is headless (DNS names, no proxy). A job
  whose replicas in one cluster are both Deployment pods and LWS groups (say one-host replicas on one pool and
  two-host ones on another) has no such label in common: there the Deployment pods and the LWS leaders (a
  `leaderTemplate`, the worker template plus the label) carry `fleet.dev/serving: "true"`, which the Service
  selects, so every replica gets traffic and no LWS worker does. Jobs of one kind render as before.
- LWS gives every pod of a group its leader's address and its index (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE,
  LWS_WORKER_INDEX), which multi-host servers use to form the group.
- Multi-host TPU groups ask for a node pool of their own (`leaderworkerset.sigs.k8s.io/exclusive-topology:
  cloud.google.com/gke-nodepool`, as GKE's multi-host TPU serving examples with LWS do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import Job, Team
from ..resolve import ResolvedOption
from .facts import NODE_POOL_LABEL, TEAM_LABEL, PoolFacts
from .jobset import gang_shape, labels
from .pods import JOB_LABEL, POOL_LABEL_KEY, PodShape, template

DEPLOYMENT = "apps/v1"
LWS = "leaderworkerset.x-k8s.io/v1"
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
SERVING_LABEL = "fleet.dev/serving"
"""On the pods that serve a job mixing Deployments and LeaderWorkerSets in a cluster (module docstring)."""
PORT_NAME = "serve"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ReplicaGroup:
    """The replicas of an inference job the plan put in one pool: the option, the pool, how many."""

    opt: ResolvedOption
    pool: PoolFacts
    replicas: int


def _ports(job: Job) -> Obj | None:
    if job.port is None:
        return None
    probe: Obj = ({"httpGet": {"path": job.readiness_path, "port": PORT_NAME}} if job.readiness_path
                  else {"tcpSocket": {"port": PORT_NAME}})
    return {"ports": [{"name": PORT_NAME, "containerPort": job.port, "protocol": "TCP"}],
            "readinessProbe": probe}


def _serving(pod: Obj) -> Obj:
    """The pod template with SERVING_LABEL (module docstring)."""
    meta = {**pod["metadata"], "labels": {**pod["metadata"]["labels"], SERVING_LABEL: "true"}}
    return {**pod, "metadata": meta}


def _deployment(job: Job, team: Team, priority: str, opt: ResolvedOption, f: PoolFacts, name: str,
                replicas: int, per_pod: int, mixed: bool) -> Obj:
    pod = template(job, team, opt, f, PodShape(per_pod, False), "Always", [], ports=_ports(job))
    if mixed:
        pod = _serving(pod)
    return {"apiVersion": DEPLOYMENT, "kind": "Deployment",
            "metadata": {"name": name, "namespace": team.queue_namespace,
                         "labels": labels(job, team, priority, f)},
            "spec": {"replicas": replicas,
                     "selector": {"matchLabels": _selector(job, team, f, name)},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
                     "template": pod}}


def _selector(job: Job, team: Team, f: PoolFacts, name: str) -> dict[str, str]:
    """The Deployment's selector (immutable once created): the team and job, plus the pool only where the
    job has a Deployment per pool. So a job whose replicas all move to another pool keeps its Deployment,
    and the move is a rolling update that starts the new pods before the old ones stop."""
    labels = {TEAM_LABEL: team.name, JOB_LABEL: job.name}
    if name != job.name:
        labels[POOL_LABEL_KEY] = f.name
    return labels


def _leader_worker_set(job: Job, team: Team, priority: str, opt: ResolvedOption, f: PoolFacts, name: str,
                       replicas: int, pods: int, per_pod: int, mixed: bool) -> Obj:
    pod = template(job, team, opt, f, PodShape(per_pod, True), "Always", [], ports=_ports(job))
    meta: Obj = {"name": name, "namespace": team.queue_namespace, "labels": labels(job, team, priority, f)}
    if opt.shape is not None and opt.slices == 1 and f.pool.provider == "gcp":
        meta["annotations"] = {LWS_EXCLUSIVE: NODE_POOL_LABEL}
    group: Obj = {"size": pods, "restartPolicy": "RecreateGroupOnPodRestart"}
    if mixed:
        group["leaderTemplate"] = _serving(template(job, team, opt, f, PodShape(per_pod, True), "Always", [],
                                                   ports=_ports(job)))
    group["workerTemplate"] = pod
    return {"apiVersion": LWS, "kind": "LeaderWorkerSet", "metadata": meta,
            "spec": {"replicas": replicas,
                     "leaderWorkerTemplate": group,
                     "rolloutStrategy": {"type": "RollingUpdate",
                                         "rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": 1}},
                     "startupPolicy": "LeaderCreated"}}


def workload_name(job: str, pool: str, pools_in_cluster: int) -> str:
    """The name of a job's Deployment or LeaderWorkerSet on `pool`: the job's when it is its only pool in the
    cluster, else `<job>-<pool>` (module docstring)."""
    return job if pools_in_cluster == 1 else f"{job}-{pool}"


def service_workloads(job: Job, team: Team, priority: str, groups: list[ReplicaGroup]) -> list[Obj]:
    """The Deployments or LeaderWorkerSets of one inference job in one cluster, one per pool group."""
    shapes = []
    for g in sorted(groups, key=lambda g: g.pool.name):
        _, slices, pods, per_pod = gang_shape(g.opt, g.pool, 1)
        shapes.append((g, slices * pods, per_pod))          # pods of one replica
    mixed = len({hosts == 1 for _, hosts, _ in shapes}) == 2
    out = []
    for g, hosts, per_pod in shapes:
        name = workload_name(job.name, g.pool.name, len(groups))
        if hosts == 1:
            out.append(_deployment(job, team, priority, g.opt, g.pool, name, g.replicas, per_pod, mixed))
        else:
            out.append(_leader_worker_set(job, team, priority, g.opt, g.pool, name, g.replicas, hosts, per_pod,
                                          mixed))
    return out


def service(job: Job, team: Team, workloads: list[Obj]) -> Obj:
    """The Service in front of the job's serving pods, `workloads` its Deployments and LeaderWorkerSets in the
    cluster (module docstring)."""
    selector = {TEAM_LABEL: team.name, JOB_LABEL: job.name}
    kinds = {o["kind"] for o in workloads}
    if kinds == {"LeaderWorkerSet"}:
        selector[LWS_WORKER_INDEX] = "0"
    elif len(kinds) > 1:
        selector[SERVING_LABEL] = "true"
    spec: Obj = {"selector": selector}
    if job.port is None:
        spec["clusterIP"] = "None"
    else:
        spec["type"] = "ClusterIP"
        spec["ports"] = [{"name": PORT_NAME, "port": job.port, "targetPort": PORT_NAME, "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": job.name, "namespace": team.queue_namespace,
                         "labels": {TEAM_LABEL: team.name, JOB_LABEL: job.name}},
            "spec": spec}
