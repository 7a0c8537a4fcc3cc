"""KubeRay objects in the snapshot (issue 26): Fleet's RayJobs and RayServices are gangs like JobSets. Pure.

`fleet observe` lists RayJobs and RayServices with Fleet's job label (render/ray.py puts the same labels and
annotations on them as on a JobSet) and every RayCluster, and `merge` turns them into `JobSet` rows of kind
RayJob / RayService: team, job, pool, spec digest and units from the labels and annotations, `suspended`
from `spec.suspend`, a RayJob's end as `terminal_state` (KubeRay's `jobDeploymentStatus` Complete -> Completed,
Failed -> Failed, and Complete with a `jobStatus` of FAILED or STOPPED -> Failed), and `ray_state` from the
RayCluster it created (`status.state`: ready, suspended, failed),
found by the cluster's `ray.io/originated-from-cr-name` label or the RayJob's `status.rayClusterName`, and
`pod_cpus`, `pod_memory_gib`, `pod_accelerators` from the pod templates of its Ray cluster spec (a RayJob's
`spec.rayClusterSpec`, a RayService's `spec.rayClusterConfig`: head and running worker groups, observe/asks.py).
Kueue's Workload of a RayJob is owned by the RayJob, so it links like a JobSet's; a RayService's RayCluster is
admitted as a RayCluster (Kueue's ray.io/raycluster integration), so its Workload, owned by that RayCluster,
is linked to the RayService that created the cluster. Everything downstream (planning from what runs, status,
completions) then reads Ray gangs as it reads JobSets. Ray's CRD not installed (404): none, no problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from .asks import pod_requests, ray_pods
from .model import JobSet, Workload
from .parse import JOB_LABEL, _get, _meta, parse_jobset

_M = TypeVar("_M", bound=BaseModel)
ORIGIN = "ray.io/originated-from-cr-name"
TERMINAL = {"Complete": "Completed", "Failed": "Failed"}
CLUSTER_SPEC = {"RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}
"""Where a RayJob's / RayService's Ray cluster spec is: its pods' templates (`pod_cpus`...: observe/asks.py)."""
UNSUCCESSFUL = frozenset({"FAILED", "STOPPED"})
"""Ray's `jobStatus` values of an end that is no success: KubeRay marks every terminal job `Complete` (before
1.2 a FAILED one too; a STOPPED one, `ray job stop`, still), and "Complete" does not mean it succeeded."""


def _terminal(deploy: str | None, job_status: str | None) -> str | None:
    """A RayJob's end as a JobSet's `terminal_state` (None: not ended)."""
    end = TERMINAL.get(deploy or "")
    return "Failed" if end == "Completed" and (job_status or "").upper() in UNSUCCESSFUL else end


@dataclass(frozen=True, slots=True)
class RayClusterRow:
    namespace: str
    name: str
    origin: str | None         # the RayJob / RayService that created it
    state: str | None          # status.state


def _with(m: _M, **update: Any) -> _M:
    """`m` with fields replaced (`model_copy(update=...)` cannot update what `parse._built` made: its field set
    is shared and frozen)."""
    return type(m).model_construct(**{**m.__dict__, **update})


def _gang(obj: Any, kind: str) -> JobSet | None:
    _, _, where, labels = _meta(obj)
    if JOB_LABEL not in labels:
        return None
    row = parse_jobset({**obj, "status": {}})      # labels, annotations, suspend, deletion: as a JobSet's
    status = _get(obj, where, "status", dict, {})
    deploy = _get(status, where, "jobDeploymentStatus", str, at="status.") if kind == "RayJob" else None
    cluster = _get(status, where, "rayClusterName", str, at="status.") if kind == "RayJob" else None
    ray_job = _get(status, where, "jobStatus", str, at="status.") if kind == "RayJob" else None
    spec = _get(obj, where, "spec", dict, {})
    return _with(row, kind=kind, terminal_state=_terminal(deploy, ray_job),
                 ray_state=f"{deploy or ''}|{cluster or ''}", **pod_requests(ray_pods(spec.get(CLUSTER_SPEC[kind]))))


def parse_rayjob(obj: Any) -> JobSet | None:
    """A Fleet RayJob as a gang row (None without Fleet's job label)."""
    return _gang(obj, "RayJob")


def parse_rayservice(obj: Any) -> JobSet | None:
    """A Fleet RayService as a gang row (None without Fleet's job label)."""
    return _gang(obj, "RayService")


def parse_raycluster(obj: Any) -> RayClusterRow:
    namespace, name, where, labels = _meta(obj)
    return RayClusterRow(namespace, name, labels.get(ORIGIN), _get(obj, where, "status.state", str))


def merge(rows: tuple[JobSet, ...], clusters: tuple[RayClusterRow, ...],
          workloads: tuple[Workload, ...]) -> tuple[tuple[JobSet, ...], tuple[Workload, ...]]:
    """The Ray gang rows with their RayCluster's state, and the Workloads with a RayService's RayCluster owner
    re-linked to the RayService (module docstring)."""
    by_origin = {(c.namespace, c.origin): c for c in clusters if c.origin}
    by_name = {(c.namespace, c.name): c for c in clusters}
    out = []
    for r in rows:
        deploy, _, named = (r.ray_state or "").partition("|")
        rc = by_name.get((r.namespace, named)) if named else by_origin.get((r.namespace, r.name))
        state = rc.state if rc is not None else None
        if r.kind == "RayJob":
            state = ", ".join(x for x in (f"cluster {state}" if state else "", deploy) if x) or None
        out.append(_with(r, ray_state=state))
    services = {(r.namespace, r.name) for r in rows if r.kind == "RayService"}
    linked = []
    for w in workloads:
        rc = by_name.get((w.namespace, w.jobset)) if w.jobset else None
        if rc is not None and rc.origin is not None and (w.namespace, rc.origin) in services:
            w = _with(w, jobset=rc.origin, jobset_uid=None)
        linked.append(w)
    return tuple(out), tuple(linked)
