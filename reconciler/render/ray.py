"""A KubeRay `ray.io/v1` RayJob (training/batch) or RayService (inference) per placed `framework: ray` job. Pure.

The gang the plan placed (plan/capacity.py: whole nodes, or part of one node) is one Ray cluster: pod 0 is the
head, which takes its node's accelerators like every other pod (the plan has no CPU-only pool to put it on,
and a head that runs work wastes nothing), and the other pods are one worker group `workers` with
`replicas` = `minReplicas` = `maxReplicas` = pods - 1, so KubeRay keeps exactly the size the plan paid for
(`enableInTreeAutoscaling` stays off: Kueue, not the Ray autoscaler, decides what runs). An elastic job
(`workers: {min, max}`) is rendered at the size the plan gave it; a new size is a new cluster started from
the job's checkpoint (plan/workloads.py).

Queueing as for JobSets (DESIGN 4b): the object carries `kueue.x-k8s.io/queue-name` and
`kueue.x-k8s.io/priority-class` and Fleet's team/job/pool labels, its pods the pool flavor's nodeSelector.
A RayJob starts suspended (Kueue unsuspends it on admission) with `shutdownAfterJobFinishes: true` (Kueue's
RayJob integration requires it, so the cluster's quota is released when the entrypoint ends); its
`entrypoint` is the job's `command`, its `backoffLimit` the job's `max_restarts`. A RayService's
`serveConfigV2` deploys the application its `command: [serve, run, MODULE:APP]` names. The Ray containers
get no `command`: KubeRay generates `ray start` for them.

The RayJob's submitter (KubeRay's default `K8sJobMode`: a Kubernetes Job whose pod runs `ray job submit`) is a
pod set of the Kueue Workload too (Kueue's rayjob controller, `submitter`). Left to KubeRay's default template it
has no nodeSelector, so Kueue gives it the first flavor of the team's ClusterQueue that has room (any pool of the
cluster, in flavor order) and that flavor's node labels: the submitter then waits for, or makes the autoscaler buy,
a node of an unrelated pool, and the entrypoint never runs while the Ray cluster holds its accelerators. So
`submitterPodTemplate` is KubeRay's default submitter (the head's image, its cpu/memory; KubeRay fills in the
`ray job submit` command) on the job's pool: the pool flavor's nodeSelector, so Kueue assigns it the same flavor.
"""

from __future__ import annotations

import shlex
from typing import Any

from ..models import DEFAULT_MAX_RESTARTS, Job, Team
from ..resolve import ResolvedOption
from ..validate_workloads import serve_import_path
from .facts import PoolFacts
from .jobset import gang_shape, labels
from .pods import PodShape, template

RAY = "ray.io/v1"

Obj = dict[str, Any]


def ray_cluster_spec(job: Job, team: Team, opt: ResolvedOption, f: PoolFacts) -> Obj:
    """Head and worker group of the job's gang on pool `f`."""
    _, replicas, pods, per_pod = gang_shape(opt, f, 1)
    total = replicas * pods
    shape = PodShape(per_pod, total > 1)
    bare = job.model_copy(update={"command": ()})
    restart = "Never" if job.kind != "inference" else "Always"
    spec: Obj = {"headGroupSpec": {"rayStartParams": {}, "template": template(bare, team, opt, f, shape, restart, [])}}
    if total > 1:
        spec["workerGroupSpecs"] = [{"groupName": "workers", "replicas": total - 1, "minReplicas": total - 1,
                                     "maxReplicas": total - 1, "rayStartParams": {},
                                     "template": template(bare, team, opt, f, shape, restart, [])}]
    return spec


def ray_object(job: Job, team: Team, priority: str, opt: ResolvedOption, f: PoolFacts) -> Obj:
    """The RayJob or RayService of the job (module docstring)."""
    meta: Obj = {"name": job.name, "namespace": team.queue_namespace, "labels": labels(job, team, priority, f)}
    cluster = ray_cluster_spec(job, team, opt, f)
    if job.kind == "inference":
        app = serve_import_path(job) or ""
        serve = f"applications:\n- name: {job.name}\n  import_path: {app}\n  route_prefix: /\n"
        return {"apiVersion": RAY, "kind": "RayService", "metadata": meta,
                "spec": {"serveConfigV2": serve, "rayClusterConfig": cluster}}
    spec: Obj = {"entrypoint": shlex.join(job.command), "shutdownAfterJobFinishes": True, "suspend": True,
                 "backoffLimit": DEFAULT_MAX_RESTARTS if job.max_restarts is None else job.max_restarts,
                 "rayClusterSpec": cluster, "submitterPodTemplate": submitter_template(job, f)}
    return {"apiVersion": RAY, "kind": "RayJob", "metadata": meta, "spec": spec}


SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_REQUESTS = {"cpu": "500m", "memory": "200Mi"}
SUBMITTER_LIMITS = {"cpu": "1", "memory": "1Gi"}
"""KubeRay's default submitter container (ray-operator/controllers/ray/common/job.go,
`GetDefaultSubmitterContainer`; Kueue's rayjob controller mirrors the same resources)."""


def submitter_template(job: Job, f: PoolFacts) -> Obj:
    """The RayJob's submitter pod on the job's own pool (module docstring), without Fleet's job labels: it is no
    unit of the gang (observe/occupancy.py counts every pod that carries them)."""
    container = {"name": SUBMITTER_CONTAINER, "image": job.image,
                 "resources": {"requests": dict(SUBMITTER_REQUESTS), "limits": dict(SUBMITTER_LIMITS)}}
    return {"spec": {"restartPolicy": "Never", "nodeSelector": dict(f.node_labels), "containers": [container]}}
