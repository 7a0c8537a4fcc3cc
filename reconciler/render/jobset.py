"""A JobSet `jobset.x-k8s.io/v1alpha2` per placed job. Pure.

The shape follows the plan's gang (plan/capacity.py): a TPU option is `slices` whole slices per replica, a
GPU option above one node is whole nodes, a smaller one shares a node. So:

- TPU: one replicated job `slice` with replicas = slices x job replicas; each child Job runs one pod per host
  of the slice (parallelism = completions = hosts per slice) requesting the host's chips
  (`google.com/tpu` = chips per host). The JobSet annotation `alpha.jobset.sigs.k8s.io/exclusive-topology:
  cloud.google.com/gke-nodepool` gives every slice a node pool of its own (one GKE node pool is one slice);
  on flavors with the TPU slice Topology, each pod also asks Kueue to keep a slice's pods in one node pool
  (`kueue.x-k8s.io/podset-slice-required-topology` with `podset-slice-size` = hosts);
- GPU / Trainium: one replicated job `worker` with replicas = job replicas; each child Job has one pod per
  node of the gang (count / accelerators per node, or 1 when it shares a node) requesting the accelerators
  it takes of that node.
Inference jobs are the same gangs, `replicas` of them, admitted together as the plan placed them.

Every JobSet starts suspended and carries `kueue.x-k8s.io/queue-name` (the team's LocalQueue) and
`kueue.x-k8s.io/priority-class`, so Kueue admits it; the pod's nodeSelector is the pool flavor's node labels,
so Kueue can only assign the pool the plan chose. Extended resources are set as requests and limits (the
API requires them equal); cpu and memory only when the job option gives them.
"""

from __future__ import annotations

from typing import Any

from ..kube_rules import child_jobs
from ..models import Job, Team
from ..resolve import ResolvedOption
from .facts import NODE_POOL_LABEL, TEAM_LABEL, PoolFacts

JOBSET = "jobset.x-k8s.io/v1alpha2"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"

Obj = dict[str, Any]


def gang_shape(opt: ResolvedOption, f: PoolFacts, job_replicas: int) -> tuple[str, int, int, int]:
    """(replicated job name, replicas, pods per child job, accelerators per pod)."""
    name, replicas, pods = child_jobs(opt, f.pool, job_replicas)
    per_pod = f.accelerators_per_node if opt.shape is not None or opt.count >= f.accelerators_per_node else opt.count
    return name, replicas, pods, per_pod


def jobset(job: Job, team: Team, priority: str, opt: ResolvedOption, f: PoolFacts) -> Obj:
    name, replicas, pods, per_pod = gang_shape(opt, f, job.replicas)
    resources: Obj = {"requests": {}, "limits": {f.resource: per_pod}}
    if opt.cpus:
        resources["requests"]["cpu"] = str(opt.cpus)
    if opt.memory_gib:
        resources["requests"]["memory"] = f"{opt.memory_gib}Gi"
    resources["requests"][f.resource] = per_pod
    container: Obj = {"name": job.kind, "image": job.image}
    if job.command:
        container["command"] = list(job.command)
    if job.env:
        container["env"] = [{"name": k, "value": v} for k, v in sorted(job.env.items())]
    container["resources"] = resources
    pod_meta: Obj = {"labels": {TEAM_LABEL: team.name}}
    if opt.shape is not None and f.topology:
        pod_meta["annotations"] = {SLICE_TOPOLOGY: NODE_POOL_LABEL, SLICE_SIZE: str(pods)}
    pod_spec: Obj = {"restartPolicy": "Never", "nodeSelector": dict(f.node_labels), "containers": [container]}
    child: Obj = {"parallelism": pods, "completions": pods, "template": {"metadata": pod_meta, "spec": pod_spec}}
    meta: Obj = {"name": job.name, "namespace": team.queue_namespace,
                 "labels": {"kueue.x-k8s.io/queue-name": team.name, "kueue.x-k8s.io/priority-class": priority,
                            TEAM_LABEL: team.name}}
    if opt.shape is not None and f.pool.provider == "gcp":
        meta["annotations"] = {EXCLUSIVE: NODE_POOL_LABEL}
    return {"apiVersion": JOBSET, "kind": "JobSet", "metadata": meta,
            "spec": {"suspend": True,
                     "replicatedJobs": [{"name": name, "replicas": replicas, "template": {"spec": child}}]}}
