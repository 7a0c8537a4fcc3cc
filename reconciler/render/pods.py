"""The pod template every workload shares (JobSet, Deployment, LeaderWorkerSet). Pure.

- **Requests.** Every container requests cpu and memory, so no Fleet pod runs as BestEffort (the first a
  node evicts under memory pressure): the job option's `cpus` / `memory_gib` per node where given, else
  half of the node's vCPUs and memory (catalog machine type) in proportion to the accelerators the pod
  takes, rounded down, at least 1. Half stays far below what GKE and EKS reserve for the system on any
  accelerator machine, so the pod always schedules; requests are a floor, no cpu/memory limit is set, so
  the pod may use the rest. Where the catalog does not know the machine (TPU v6e, TPU7x hosts) the default
  is `resolve.DEFAULT_UNKNOWN_CPUS` / `DEFAULT_UNKNOWN_MEMORY_GIB`: a floor that makes the pod Burstable, not a claim
  about the machine. The accelerator is set as request and limit (the API requires them equal).
- **/dev/shm.** GPU pods get a memory-backed `emptyDir` at /dev/shm (NCCL and PyTorch data loaders pass
  tensors through it; the container runtime's default is 64 MiB), sized like the kernel's own tmpfs
  default, half of the memory (Documentation/filesystems/tmpfs: "The default is half of your physical
  RAM"), here half of the pod's memory request, since a memory-backed volume counts against the pod.
- **The job's own fields**: `service_account`, `image_pull_secrets`, `env_from_secrets` (`envFrom`
  secretRef) and `volumes` (a PersistentVolumeClaim or ConfigMap of the team's namespace; read-only unless
  the job says otherwise). They are names only: the namespace is always the team's, and nothing a job
  writes reaches a hostPath, host networking or a privileged setting.
- **Fast networking** (network.py): `vpc.amazonaws.com/efa` on EKS p5/p5en, the GKE multi-network
  annotations on A3 High/Mega/Ultra, for pods of multi-node gangs that take whole nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import Job, Team
from ..resolve import ResolvedOption, pod_asks
from ..validate_jobs import SHM_VOLUME
from .facts import TEAM_LABEL, PoolFacts
from .network import EFA_RESOURCE, efa_interfaces, gke_networking, interfaces_annotation

Obj = dict[str, Any]
JOB_LABEL = "fleet.dev/job"
POOL_LABEL_KEY = "fleet.dev/pool"


@dataclass(frozen=True, slots=True)
class PodShape:
    """One pod of a gang: the accelerators it takes and whether its gang spans nodes."""

    accelerators: int
    multi_node: bool


def pod_requests(opt: ResolvedOption, f: PoolFacts, accelerators: int) -> tuple[int, int]:
    """(vCPUs, GiB) one pod requests (module docstring; `resolve.pod_asks`, the planner's rule too)."""
    return pod_asks(opt, f.pool, accelerators / f.accelerators_per_node)


def efa_request(f: PoolFacts, shape: PodShape) -> int:
    """EFA devices one pod requests: all of its node's, for a multi-node gang of whole nodes."""
    whole = shape.accelerators == f.accelerators_per_node
    return efa_interfaces(f.pool.provider, f.pool.machine_type) if shape.multi_node and whole else 0


def pod_labels(job: Job, team: Team, f: PoolFacts) -> dict[str, str]:
    return {TEAM_LABEL: team.name, JOB_LABEL: job.name, POOL_LABEL_KEY: f.name}


def pod_annotations(f: PoolFacts, shape: PodShape) -> dict[str, str]:
    net = gke_networking(f.pool.provider, f.pool.machine_type)
    whole = shape.accelerators == f.accelerators_per_node
    return interfaces_annotation(net) if net is not None and shape.multi_node and whole else {}


def container(job: Job, opt: ResolvedOption, f: PoolFacts, shape: PodShape, extra_env: list[Obj]) -> Obj:
    cpus, memory = pod_requests(opt, f, shape.accelerators)
    requests: Obj = {"cpu": str(cpus), "memory": f"{memory}Gi", f.resource: shape.accelerators}
    limits: Obj = {f.resource: shape.accelerators}
    efa = efa_request(f, shape)
    if efa:
        requests[EFA_RESOURCE] = limits[EFA_RESOURCE] = efa
    c: Obj = {"name": job.kind, "image": job.image}
    if job.command:
        c["command"] = list(job.command)
    env = [{"name": k, "value": v} for k, v in sorted(job.env.items())] \
        + [e for e in extra_env if e["name"] not in job.env]       # the file's value of a name wins, listed once
    if env:
        c["env"] = env
    if job.env_from_secrets:
        c["envFrom"] = [{"secretRef": {"name": s}} for s in job.env_from_secrets]
    c["resources"] = {"requests": requests, "limits": limits}
    mounts: list[Obj] = [{"name": v.name, "mountPath": v.mount_path, "readOnly": v.read_only} for v in job.volumes]
    if f.pool.kind == "gpu":
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if mounts:
        c["volumeMounts"] = mounts
    return c


def pod_spec(job: Job, opt: ResolvedOption, f: PoolFacts, shape: PodShape, restart_policy: str,
             extra_env: list[Obj], ports: Obj | None = None) -> Obj:
    """The pod spec; `ports` adds the inference container's port and readiness probe."""
    c = container(job, opt, f, shape, extra_env)
    if ports:
        c.update(ports)
    spec: Obj = {"restartPolicy": restart_policy}
    if job.service_account:
        spec["serviceAccountName"] = job.service_account
    if job.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in job.image_pull_secrets]
    spec["nodeSelector"] = dict(f.node_labels)
    spec["containers"] = [c]
    volumes: list[Obj] = []
    for v in job.volumes:
        if v.claim is not None:
            volumes.append({"name": v.name, "persistentVolumeClaim": {"claimName": v.claim, "readOnly": v.read_only}})
        else:
            volumes.append({"name": v.name, "configMap": {"name": v.config_map}})
    if f.pool.kind == "gpu":
        _, memory = pod_requests(opt, f, shape.accelerators)
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": f"{max(1, memory // 2)}Gi"}})
    if volumes:
        spec["volumes"] = volumes
    return spec


def template(job: Job, team: Team, opt: ResolvedOption, f: PoolFacts, shape: PodShape, restart_policy: str,
             extra_env: list[Obj], annotations: dict[str, str] | None = None, ports: Obj | None = None) -> Obj:
    """A pod template: labels, annotations (Kueue's and the network's), spec."""
    meta: Obj = {"labels": pod_labels(job, team, f)}
    ann = {**(annotations or {}), **pod_annotations(f, shape)}
    if ann:
        meta["annotations"] = dict(sorted(ann.items()))
    return {"metadata": meta, "spec": pod_spec(job, opt, f, shape, restart_policy, extra_env, ports)}
