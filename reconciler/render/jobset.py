"""A JobSet `jobset.x-k8s.io/v1alpha2` per placed training or batch job. Pure. (Inference: service.py.)

The shape follows the plan's gang (plan/capacity.py): a TPU option is `slices` whole slices, a GPU option
above one node is whole nodes, a smaller one shares a node. So:

- TPU: one replicated job `slice` with replicas = slices; each child Job runs one pod per host of the slice
  (parallelism = completions = hosts per slice) requesting the host's chips (`google.com/tpu` = chips per
  host). The JobSet annotation `alpha.jobset.sigs.k8s.io/exclusive-topology: cloud.google.com/gke-nodepool`
  gives every slice a node pool of its own (one GKE node pool is one slice), as GKE's multislice examples
  do ("Orchestrate Multislice workloads using JobSet and Kueue"); on flavors with the TPU slice Topology,
  each pod also asks Kueue to keep a slice's pods in one node pool
  (`kueue.x-k8s.io/podset-slice-required-topology` with `podset-slice-size` = hosts). GKE's
  multislice examples also set `hostNetwork: true` for the data-center network between slices; Fleet does
  not (pod networking works, and `fleet apply` refuses host settings in any workload). GKE's TPU webhook
  gives the pods TPU_WORKER_ID / TPU_WORKER_HOSTNAMES and, for multislice, the MEGASCALE_* settings.
- GPU / Trainium: one replicated job `worker`; its child Job has one pod per node of the gang (count /
  accelerators per node, or 1 when it shares a node) requesting the accelerators it takes of that node.

Surviving production (JobSet "Failure Policy" docs and examples/simple/max-restarts.yaml; Kubernetes "Pod
failure policy"):
- every child Job has `backoffLimit: 0`: one failed pod fails the child Job at once, rather than one pod
  being recreated while the rest of the gang hangs in a collective (the Job default is 6 retries);
- JobSet `failurePolicy.maxRestarts` (the job's `max_restarts`, default DEFAULT_MAX_RESTARTS) recreates the
  whole gang after a failure of the job itself;
- a pod that fails because it was disrupted (condition `DisruptionTarget`: spot reclaim and node shutdown,
  taint eviction, pod garbage collection after a node loss, preemption) fails its child Job through the
  Job's `podFailurePolicy` (`FailJob`), whose reason is then `PodFailurePolicy`, and the JobSet rule
  `RestartJobSetAndIgnoreMaxRestarts` for that reason restarts the gang without spending the budget;
- multi-pod JobSets name pod 0 of job 0 as `spec.coordinator`; JobSet writes its stable address into the
  annotation `jobset.sigs.k8s.io/coordinator`, which multi-node GPU pods read (downward API) as
  MASTER_ADDR; with NNODES / NODE_RANK (the Job completion index) and torchrun's PET_* equivalents and
  JAX_COORDINATOR_ADDRESS (read by `jax.distributed.initialize`), PyTorch and JAX find each other.

Every JobSet starts suspended and carries `kueue.x-k8s.io/queue-name` (the team's LocalQueue) and
`kueue.x-k8s.io/priority-class`, so Kueue admits it; the pod's nodeSelector is the pool flavor's node labels,
so Kueue can only assign the pool the plan chose. The pod template is pods.py's.
"""

from __future__ import annotations

from typing import Any

from ..kube_rules import child_jobs, pod_accelerators
from ..models import (
    DEFAULT_MAX_RESTARTS,
    DIGEST_ANNOTATION,
    POD_DIGEST_ANNOTATION,
    UNITS_ANNOTATION,
    Job,
    Team,
    pod_digest,
    spec_digest,
)
from ..resolve import ResolvedOption
from .facts import NODE_POOL_LABEL, TEAM_LABEL, PoolFacts
from .pods import JOB_LABEL, POOL_LABEL_KEY, PodShape, template

JOBSET = "jobset.x-k8s.io/v1alpha2"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
SLICE_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
COORDINATOR_ANNOTATION = "jobset.sigs.k8s.io/coordinator"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
TORCH_MASTER_PORT = 29500
"""torchrun's default `--master-port` (PyTorch "torchrun (Elastic Launch)" docs)."""
DISRUPTION_RULE = "DisruptionsDoNotCount"

Obj = dict[str, Any]


def gang_shape(opt: ResolvedOption, f: PoolFacts, job_replicas: int) -> tuple[str, int, int, int]:
    """(replicated job name, replicas, pods per child job, accelerators per pod)."""
    name, replicas, pods = child_jobs(opt, f.pool, job_replicas)
    return name, replicas, pods, pod_accelerators(opt, f.pool)


def labels(job: Job, team: Team, priority: str, f: PoolFacts) -> dict[str, str]:
    """The workload's labels: Kueue's queue and priority, and Fleet's team, job and pool (DESIGN 4b)."""
    return {"kueue.x-k8s.io/queue-name": team.name, "kueue.x-k8s.io/priority-class": priority,
            TEAM_LABEL: team.name, JOB_LABEL: job.name, POOL_LABEL_KEY: f.name}


def _field(path: str) -> Obj:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def rank_env(pods: int, accelerators: int) -> list[Obj]:
    """Coordinator and rank of a multi-node GPU gang (module docstring)."""
    def addr() -> Obj:       # a fresh object per use: shared ones would come out as YAML aliases
        return _field(f"metadata.annotations['{COORDINATOR_ANNOTATION}']")

    def rank() -> Obj:
        return _field(f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']")

    port = str(TORCH_MASTER_PORT)
    return [{"name": "MASTER_ADDR", **addr()}, {"name": "MASTER_PORT", "value": port},
            {"name": "NNODES", "value": str(pods)}, {"name": "NODE_RANK", **rank()},
            {"name": "PET_MASTER_ADDR", **addr()}, {"name": "PET_MASTER_PORT", "value": port},
            {"name": "PET_NNODES", "value": str(pods)}, {"name": "PET_NODE_RANK", **rank()},
            {"name": "PET_NPROC_PER_NODE", "value": str(accelerators)},
            {"name": "JAX_COORDINATOR_ADDRESS", "value": f"$(MASTER_ADDR):{port}"},
            {"name": "JAX_NUM_PROCESSES", "value": str(pods)}, {"name": "JAX_PROCESS_ID", **rank()}]


def jobset(job: Job, team: Team, priority: str, opt: ResolvedOption, f: PoolFacts) -> Obj:
    name, replicas, pods, per_pod = gang_shape(opt, f, job.replicas)
    multi_node = pods * replicas > 1
    shape = PodShape(per_pod, multi_node)
    annotations = {SLICE_TOPOLOGY: NODE_POOL_LABEL, SLICE_SIZE: str(pods)} if opt.shape is not None and f.topology \
        else {}
    env = rank_env(pods, per_pod) if f.pool.kind != "tpu" and pods > 1 else []
    child: Obj = {
        "parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
        "podFailurePolicy": {"rules": [{"action": "FailJob",
                                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
        "template": template(job, team, opt, f, shape, "Never", env, annotations),
    }
    meta: Obj = {"name": job.name, "namespace": team.queue_namespace, "labels": labels(job, team, priority, f)}
    if opt.shape is not None and f.pool.provider == "gcp":
        meta["annotations"] = {EXCLUSIVE: NODE_POOL_LABEL}
    spec: Obj = {
        "suspend": True,
        "failurePolicy": {
            "maxRestarts": DEFAULT_MAX_RESTARTS if job.max_restarts is None else job.max_restarts,
            "rules": [{"name": DISRUPTION_RULE, "action": "RestartJobSetAndIgnoreMaxRestarts",
                       "onJobFailureReasons": ["PodFailurePolicy"]}]},
    }
    if multi_node:
        spec["coordinator"] = {"replicatedJob": name, "jobIndex": 0, "podIndex": 0}
    spec["replicatedJobs"] = [{"name": name, "replicas": replicas, "template": {"spec": child}}]
    return {"apiVersion": JOBSET, "kind": "JobSet", "metadata": meta, "spec": spec}


def stamp(obj: Obj, job: Job, units: tuple[int, ...]) -> Obj:
    """The JobSet with what planning from what runs reads back (plan/live.py): the digest of the job's spec
    (a finished job runs again only when it changes), that of what its pods run (a running job is re-created
    when it changes: models.POD_FIELDS) and the units of its pool the plan gave it."""
    meta = obj["metadata"]
    meta["annotations"] = {**meta.get("annotations", {}), DIGEST_ANNOTATION: spec_digest(job),
                           POD_DIGEST_ANNOTATION: pod_digest(job), UNITS_ANNOTATION: ",".join(str(u) for u in units)}
    return obj
