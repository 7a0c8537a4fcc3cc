"""Kubernetes objects (decoded JSON) -> snapshot models. Pure: no I/O, no clock.

Each `parse_*` takes one item of a list response and returns the model, or raises `BadObject` naming the
object and the field that is missing or has the wrong type; the caller records that as an `invalid-object`
problem and goes on with the other objects, so one odd object never hides a cluster.

Strings that repeat across objects (namespaces, condition types, statuses and reasons, flavors) are interned
so 240,000 objects stay small.

Field names are the v1beta2 Workload and v1alpha2 JobSet CRDs' (../shared/schemas), core/v1 Node's, and for
inference services apps/v1 Deployment's and the leaderworkerset.x-k8s.io/v1 LeaderWorkerSet CRD's
(`spec.replicas`, `status.readyReplicas`). What an object's pods request (`pod_cpus`, `pod_memory_gib`,
`pod_accelerators`) is read from its pod templates by observe/asks.py.

Node health (DESIGN 4b):
- the pool is the label `fleet.dev/pool`, else the GKE node pool (`cloud.google.com/gke-nodepool`) or EKS node
  group (`eks.amazonaws.com/nodegroup`) name; a GKE node pool named `<pool>-s<i>` is slice `i` of `<pool>`
  (one TPU slice is one node pool and one failure domain), so `unit = i` and the pool is `<pool>`;
- `ready`: condition `Ready` is True; `unschedulable`: `spec.unschedulable` (cordoned). A cordon has no time of
  its own (no condition; the `node.kubernetes.io/unschedulable` taint is NoSchedule, and the API writes a
  taint's `timeAdded` only for NoExecute taints), so `cordoned_since` is left to `model.carry_over` and the
  reconcile loop's memory: when Fleet first saw it cordoned;
- accelerator health: a condition whose type names an accelerator (GPU, TPU, Accelerat..., Xid, NVLink, ECC,
  Neuron, NVIDIA) is a health report: types ending in `Ready` or `Healthy` (EKS node monitoring agent's
  `AcceleratedHardwareReady`) are healthy only when True, the others (node-problem-detector style problem
  conditions such as `GPUProblem`, and Fleet's own `FleetGPUProblem` that `fleet health-check` sets through
  the node-problem-detector `fleet render` configures) are problems when True;
- node-problem-detector's node problems (KernelDeadlock, ReadonlyFilesystem, ...) and the kubelet pressures
  are kept in `problems` so `fleet status` shows them, but only Ready/cordon/accelerator decide usability.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from ..models import DIGEST_ANNOTATION, POD_DIGEST_ANNOTATION, UNITS_ANNOTATION
from .asks import ACCELERATORS as ACCELERATORS  # re-exported: what `pod_accelerators` counts
from .asks import jobset_pods, pod_requests, service_pods
from .asks import quantity as quantity  # re-exported
from .model import (
    AdmissionCheckState,
    Condition,
    Eviction,
    JobSet,
    Node,
    Pod,
    ReplicatedJobStatus,
    ServiceWorkload,
    Workload,
)
from .podfields import jobset_pod_digest

OWNERS = {"JobSet": "jobset.x-k8s.io/", "RayJob": "ray.io/", "RayCluster": "ray.io/"}
"""Owner kinds of a Workload that Fleet's gangs are (a RayCluster's is re-linked to its RayService: ray.py)."""
POOL_LABEL = "fleet.dev/pool"
TEAM_LABEL = "fleet.dev/team"
JOB_LABEL = "fleet.dev/job"
GKE_NODEPOOL = "cloud.google.com/gke-nodepool"
EKS_NODEGROUP = "eks.amazonaws.com/nodegroup"
SLICE_POOL = re.compile(r"^(?P<pool>[a-z0-9]([-a-z0-9]*[a-z0-9])?)-s(?P<unit>0|[1-9][0-9]*)$")
ACCELERATOR_CONDITION = re.compile(r"(?i)accelerat|gpu|tpu|xid|nvlink|ecc|neuron|nvidia")
NODE_PROBLEMS = frozenset({"KernelDeadlock", "ReadonlyFilesystem", "FrequentUnregisterNetDevice",
                           "CorruptDockerOverlay2", "KubeletUnhealthy", "ContainerRuntimeUnhealthy",
                           "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"})


_M = TypeVar("_M", bound=BaseModel)
_FIELDS: dict[type[BaseModel], tuple[tuple[str, ...], frozenset[str]] | None] = {}
_setattr = object.__setattr__
_PATHS: dict[str, tuple[str, ...]] = {}          # `_get`'s paths, split once (a few dozen literals)


def _built(model: type[_M], **fields: Any) -> _M:
    """`model(**fields)` for values this module has already checked, without pydantic's validation.

    What `model_construct(all_fields_set, **fields)` does for these plain models (every field given, no
    aliases, extras, private attributes or post-init), without its per-field Python loop, and with one shared
    frozen set of field names instead of a new `__pydantic_fields_set__` per instance: an equal instance (same
    fields in the same order, same JSON) in about a quarter of the memory and half the time of a validated
    one; 240,000 objects, so most of `fleet observe`'s peak memory. Anything else is validated as usual."""
    if model not in _FIELDS:
        plain = not (model.__pydantic_post_init__ or model.__private_attributes__ or model.__pydantic_root_model__
                     or model.model_config.get("extra") == "allow"
                     or any(f.alias or f.validation_alias for f in model.model_fields.values()))
        _FIELDS[model] = (tuple(model.model_fields), frozenset(model.model_fields)) if plain else None
    spec = _FIELDS[model]
    if spec is None or len(fields) != len(spec[0]):
        return model(**fields)
    try:
        values = {name: fields[name] for name in spec[0]}
    except KeyError:
        return model(**fields)
    m = model.__new__(model)
    _setattr(m, "__dict__", values)
    _setattr(m, "__pydantic_fields_set__", spec[1])
    _setattr(m, "__pydantic_extra__", None)
    _setattr(m, "__pydantic_private__", None)
    return m


class BadObject(ValueError):
    """An object the API returned that is not what its kind promises: `where` is `namespace/name`."""

    def __init__(self, where: str, field: str, message: str) -> None:
        super().__init__(f"{where}: {field}: {message}")
        self.where, self.field, self.detail = where, field, message


def _get(obj: Any, where: str, path: str, kind: type | tuple[type, ...], default: Any = None, at: str = "") -> Any:
    """`obj[a][b]...` for path `a.b`, checked against `kind`; `default` when absent or null. `at` is the
    field path of `obj` inside the whole object, for the message (`status.conditions[2].`)."""
    cur = obj
    parts = _PATHS.get(path)
    if parts is None:
        parts = _PATHS[path] = tuple(path.split("."))
    for part in parts:
        if type(cur) is not dict:                 # decoded JSON: objects are exactly dicts
            raise BadObject(where, at + path, f"expected an object at `{part}`")
        cur = cur.get(part)
        if cur is None:
            return default
    if type(cur) is kind:                         # the common case, and never a bool where an int is wanted
        return cur
    if not isinstance(cur, kind) or (isinstance(cur, bool) and bool not in _kinds(kind)):
        raise BadObject(where, at + path, f"expected {_kind_name(kind)}, got {type(cur).__name__}")
    return cur


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a boolean"}
    return " or ".join(names.get(k, k.__name__) for k in _kinds(kind))


def _count(obj: Any, where: str, path: str, at: str = "") -> int:
    value: int = _get(obj, where, path, int, 0, at)
    if value < 0:
        raise BadObject(where, at + path, f"{value} is negative")
    return value


def _time(obj: Any, where: str, path: str, at: str = "") -> datetime | None:
    raw = _get(obj, where, path, str, at=at)
    if raw is None:
        return None
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise BadObject(where, at + path, f"`{raw}` is not an RFC 3339 time") from None


def _meta(obj: Any) -> tuple[str, str, str, dict[str, str]]:
    if not isinstance(obj, dict):
        raise BadObject("?", "", f"expected an object, got {type(obj).__name__}")
    name = _get(obj, "?", "metadata.name", str)
    if not name:
        raise BadObject("?", "metadata.name", "missing")
    namespace = _get(obj, name, "metadata.namespace", str, "")
    namespace = sys.intern(namespace)
    where = f"{namespace}/{name}" if namespace else name
    labels = _get(obj, where, "metadata.labels", dict, {})
    return namespace, name, where, {k: v for k, v in labels.items() if isinstance(v, str)}


def _conditions(obj: Any, where: str) -> tuple[Condition, ...]:
    out = []
    for i, c in enumerate(_get(obj, where, "status.conditions", list, [])):
        at = f"status.conditions[{i}]."
        kind, status = _get(c, where, "type", str, at=at), _get(c, where, "status", str, at=at)
        if not kind or status not in ("True", "False", "Unknown"):
            raise BadObject(where, at[:-1], "a condition needs a type and a status of True, False or Unknown")
        out.append(_built(Condition,
            type=sys.intern(kind), status=sys.intern(status), reason=sys.intern(_get(c, where, "reason", str, "", at)),
            message=_get(c, where, "message", str, "", at), since=_time(c, where, "lastTransitionTime", at)))
    return tuple(sorted(out, key=lambda c: c.type))


def _admission_checks(obj: Any, where: str) -> tuple[AdmissionCheckState, ...]:
    out = []
    for i, c in enumerate(_get(obj, where, "status.admissionChecks", list, [])):
        at = f"status.admissionChecks[{i}]."
        name, state = _get(c, where, "name", str, at=at), _get(c, where, "state", str, at=at)
        if not name or state not in ("Pending", "Ready", "Retry", "Rejected"):
            raise BadObject(where, at[:-1], "an admission check needs a name and a state of Pending, Ready, Retry "
                                            "or Rejected")
        out.append(_built(AdmissionCheckState, name=name, state=state, message=_get(c, where, "message", str, "", at),
                          since=_time(c, where, "lastTransitionTime", at)))
    return tuple(sorted(out, key=lambda c: c.name))


def parse_workload(obj: Any) -> Workload:
    namespace, name, where, _ = _meta(obj)
    owners = _get(obj, where, "metadata.ownerReferences", list, [])
    owner = next((o for o in owners if isinstance(o, dict) and OWNERS.get(str(o.get("kind")))
                  and str(o.get("apiVersion", "")).startswith(OWNERS[str(o.get("kind"))])), None)
    jobset = owner.get("name") if owner is not None else None
    jobset_uid = owner.get("uid") if owner is not None else None
    flavors: dict[str, str] = {}
    pods = 0
    for i, psa in enumerate(_get(obj, where, "status.admission.podSetAssignments", list, [])):
        at = f"status.admission.podSetAssignments[{i}]."
        for resource, flavor in _get(psa, where, "flavors", dict, {}, at).items():
            if not isinstance(flavor, str):
                raise BadObject(where, f"{at}flavors.{resource}", "expected a string")
            flavors[sys.intern(resource)] = sys.intern(flavor)
        pods += _count(psa, where, "count", at)
    evictions = []
    for i, e in enumerate(_get(obj, where, "status.schedulingStats.evictions", list, [])):
        at = f"status.schedulingStats.evictions[{i}]."
        evictions.append(_built(Eviction, reason=_get(e, where, "reason", str, "", at),
                                  underlying_cause=_get(e, where, "underlyingCause", str, "", at),
                                  count=_count(e, where, "count", at)))
    return _built(Workload,
        namespace=namespace, name=name, created_at=_time(obj, where, "metadata.creationTimestamp"),
        queue_name=_get(obj, where, "spec.queueName", str, ""), priority=_get(obj, where, "spec.priority", int),
        jobset=jobset if isinstance(jobset, str) else None,
        jobset_uid=jobset_uid if isinstance(jobset_uid, str) and jobset_uid else None,
        cluster_queue=_get(obj, where, "status.admission.clusterQueue", str),
        flavors=dict(sorted(flavors.items())), admitted_pods=pods,
        requeue_count=_count(obj, where, "status.requeueState.count"),
        requeue_at=_time(obj, where, "status.requeueState.requeueAt"),
        past_execution_seconds=_count(obj, where, "status.accumulatedPastExecutionTimeSeconds"),
        evictions=tuple(sorted(evictions, key=lambda e: (e.reason, e.underlying_cause))),
        conditions=_conditions(obj, where), admission_checks=_admission_checks(obj, where))


def _units(raw: str | None, where: str) -> tuple[int, ...] | None:
    if raw is None:
        return None
    try:
        return tuple(int(u) for u in raw.split(",")) if raw else ()
    except ValueError:
        raise BadObject(where, f"metadata.annotations.{UNITS_ANNOTATION}",
                        f"`{raw}` is not a comma-separated list of unit indices") from None


def _pod_digest(obj: Any, annotations: dict[str, str]) -> str | None:
    """Its `fleet.dev/pod-digest`; on a JobSet of Fleet's made before Fleet stamped it (a spec digest and no pod
    digest), the same digest of what its pod template runs (observe/podfields.py), None where that is not read."""
    stamped = annotations.get(POD_DIGEST_ANNOTATION)
    if stamped is not None or DIGEST_ANNOTATION not in annotations:
        return stamped
    return jobset_pod_digest(obj)


def parse_jobset(obj: Any) -> JobSet:
    namespace, name, where, labels = _meta(obj)
    raw = _get(obj, where, "metadata.annotations", dict, {})
    annotations = {k: v for k, v in raw.items() if isinstance(v, str)}
    replicated = []
    for i, r in enumerate(_get(obj, where, "status.replicatedJobsStatus", list, [])):
        at = f"status.replicatedJobsStatus[{i}]."
        replicated.append(_built(ReplicatedJobStatus, name=_get(r, where, "name", str, "", at),
                                              **{k: _count(r, where, k, at) for k in
                                                 ("ready", "succeeded", "failed", "active", "suspended")}))
    return _built(JobSet,
        namespace=namespace, name=name, uid=_get(obj, where, "metadata.uid", str) or None,
        created_at=_time(obj, where, "metadata.creationTimestamp"),
        team=labels.get(TEAM_LABEL), job=labels.get(JOB_LABEL), pool=labels.get(POOL_LABEL),
        spec_digest=annotations.get(DIGEST_ANNOTATION), pod_digest=_pod_digest(obj, annotations),
        units=_units(annotations.get(UNITS_ANNOTATION), where), **pod_requests(jobset_pods(obj)),
        suspended=_get(obj, where, "spec.suspend", bool, False),
        deleting=_get(obj, where, "metadata.deletionTimestamp", str) is not None,
        terminal_state=_get(obj, where, "status.terminalState", str),
        restarts=_count(obj, where, "status.restarts"),
        replicated_jobs=tuple(sorted(replicated, key=lambda r: r.name)), conditions=_conditions(obj, where),
        kind="JobSet", ray_state=None)


def _unhealthy(c: Condition) -> bool:
    if ACCELERATOR_CONDITION.search(c.type) is None:
        return False
    healthy_when_true = c.type.endswith(("Ready", "Healthy"))
    return c.status != "True" if healthy_when_true else c.status == "True"


def parse_node(obj: Any) -> Node:
    _, name, where, labels = _meta(obj)
    conditions = _conditions(obj, where)
    node_pool = labels.get(GKE_NODEPOOL) or labels.get(EKS_NODEGROUP)
    pool, unit = labels.get(POOL_LABEL), None
    m = SLICE_POOL.match(node_pool or "")
    if m and (pool is None or pool == m["pool"]):
        pool, unit = m["pool"], int(m["unit"])
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    accelerator = [c for c in conditions if _unhealthy(c)]
    problems = [c for c in conditions if (c.type == "Ready" and not ready) or c in accelerator
                or (c.type in NODE_PROBLEMS and c.status == "True")]
    return _built(Node, name=name, pool=pool or node_pool, unit=unit, node_pool=node_pool, ready=ready,
                unschedulable=_get(obj, where, "spec.unschedulable", bool, False), cordoned_since=None,
                accelerator_healthy=not accelerator, problems=tuple(problems))


def parse_service(kind: str, obj: Any) -> ServiceWorkload | None:
    """A Deployment or LeaderWorkerSet with Fleet's job label; None for one without it (not Fleet's: the list
    asks for Fleet's label only, this checks again)."""
    namespace, name, where, labels = _meta(obj)
    if JOB_LABEL not in labels:
        return None
    replicas: int = _get(obj, where, "spec.replicas", int, 1)      # the API's default is 1
    if replicas < 0:
        raise BadObject(where, "spec.replicas", f"{replicas} is negative")
    return _built(ServiceWorkload, kind=kind, namespace=namespace, name=name,
                  created_at=_time(obj, where, "metadata.creationTimestamp"), team=labels.get(TEAM_LABEL),
                  job=labels.get(JOB_LABEL), pool=labels.get(POOL_LABEL), replicas=replicas,
                  uid=_get(obj, where, "metadata.uid", str) or None,
                  ready_replicas=_count(obj, where, "status.readyReplicas"), **pod_requests(service_pods(kind, obj)))


def parse_deployment(obj: Any) -> ServiceWorkload | None:
    return parse_service("Deployment", obj)


def parse_leader_worker_set(obj: Any) -> ServiceWorkload | None:
    return parse_service("LeaderWorkerSet", obj)


def parse_pod(obj: Any) -> Pod | None:
    """A pod with Fleet's job label (the list asks for it; checked again); None for one without it."""
    namespace, name, where, labels = _meta(obj)
    if JOB_LABEL not in labels:
        return None
    node = _get(obj, where, "spec.nodeName", str, "") or None
    ready = any(c.type == "Ready" and c.status == "True" for c in _conditions(obj, where))
    return _built(Pod, namespace=namespace, name=name, team=labels.get(TEAM_LABEL), job=labels.get(JOB_LABEL),
                  pool=labels.get(POOL_LABEL), node=node, phase=sys.intern(_get(obj, where, "status.phase", str, "")),
                  ready=ready)
