"""What the pods of a running object hold on a node, read from its pod templates as the scheduler reckons a pod's
request (`pod_asks`). Pure.

`pod_requests` is the snapshot's `pod_cpus`, `pod_memory_gib` and `pod_accelerators` of the object: the most one
of its pods requests. Its pods are those of every pod template it runs pods of:
- a JobSet (jobset.x-k8s.io/v1alpha2): `spec.replicatedJobs[].template.spec.template`;
- a KubeRay Ray cluster (ray.io/v1; a RayJob's `spec.rayClusterSpec`, a RayService's `spec.rayClusterConfig`):
  `headGroupSpec.template`, and `workerGroupSpecs[].template` of each worker group that runs pods (`replicas`
  times `numOfHosts` above 0, the CRD's defaults 0 and 1, and not `suspend`ed: a suspended group's pods are
  deleted); a RayJob without `rayClusterSpec` (one that runs on an existing cluster, `clusterSelector`) has no
  pods of its own: not known;
- a Deployment (apps/v1): `spec.template`;
- a LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): each group's leader, `spec.leaderWorkerTemplate.leaderTemplate`
  (the `workerTemplate` where it has none), and its workers, `workerTemplate`, where `size` (pods per group, the
  leader included; default 1) is above 1.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..kube_rules import ACCELERATOR_RESOURCES


class Unreadable(ValueError):
    """A pod template field of the wrong type: what the object's pods request is then not known (never shown)."""


_SUFFIX = {"": 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+)|([KMGTPE]i|[numkMGTPE]))?")
"""apimachinery's quantity grammar: a signed number, then one of a binary suffix (Ki..Ei), a decimal one (n, u, m,
none, k, M, G, T, P, E) or a decimal exponent (`e3`, `E-2`); never two of them (`1e3Mi` is not a quantity)."""


def quantity(value: Any) -> float | None:
    """A Kubernetes resource quantity (`8`, `500m`, `250u`, `64Gi`, `1e9`, `+2`) as a number; None when it is not
    one, is negative, or not a finite one (`1e400`, which a JobSet's schema pattern lets through: no request Fleet
    can hold a node for)."""
    m = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif m is not None:
            number = float(m[2]) * (10.0 ** int(m[3]) if m[3] else _SUFFIX[m[4] or ""])
            if m[1] == "-" and number:
                return None
        else:
            return None
    except (OverflowError, ValueError):     # beyond a float, or an exponent of more digits than int() reads
        return None
    return number if math.isfinite(number) and number >= 0 else None


ACCELERATORS = frozenset(ACCELERATOR_RESOURCES.values())
"""The extended resources Fleet's pods request accelerators as (render/pods.py): what `pod_accelerators` counts."""
_READ = ACCELERATORS | {"cpu", "memory"}
_POD_LEVEL = ("cpu", "memory")
"""The resources a pod-level `resources` stanza may state (Kubernetes' PodLevelResources: cpu, memory, hugepages)."""
Asks = dict[str, float | None]
"""resource -> amount; None: stated but not readable; absent: not stated."""


def _request(value: Any) -> float | None:
    """One request as a pod holds it: the API server rounds every request up to a thousandth (SetDefaults_
    ResourceList), so `1n` of a cpu holds 1m of it. Float noise (`0.1` -> 100.00000000000001 m) is not rounded up."""
    if type(value) is str and len(value) < 16 and value.isascii() and value.isdigit():
        return float(value)                       # a whole number: the common case
    q = quantity(value)
    if q is None:
        return None
    milli = q * 1000.0
    if not math.isfinite(milli):    # beyond a float in thousandths (`1e307`): a whole number already
        return q
    return q if abs(milli - round(milli)) <= 1e-12 * max(1.0, milli) else math.ceil(milli) / 1000.0


def _part(obj: Any, key: str, kind: type) -> Any:
    """`obj[key]` checked against `kind` (None when absent or null), in the loop over every container of every
    JobSet: a lookup, not a field path. Raises `Unreadable` (an object where there is none, or a wrong kind)."""
    if type(obj) is not dict:
        raise Unreadable(key)
    value = obj.get(key)
    if value is None or type(value) is kind:
        return value
    raise Unreadable(key)


def _at(obj: Any, *keys: str) -> dict[str, Any]:
    """The object at `obj[k1][k2]...` ({} when absent or null)."""
    for key in keys:                  # `_part(obj, key, dict)` each, inline: once per pod template of 100,000 JobSets
        if type(obj) is not dict:
            raise Unreadable(key)
        obj = obj.get(key)
        if obj is None:
            return {}
    if type(obj) is not dict:
        raise Unreadable(keys[-1])
    found: dict[str, Any] = obj
    return found


def _stated(c: Any) -> Asks:
    """A container's requests as the API server defaults a pod's (SetDefaults_Pod: a resource stated only as a
    limit requests that limit), for the resources Fleet reads."""
    res = _part(c, "resources", dict) if type(c) is dict else None
    if not res:
        return {}
    limits = _part(res, "limits", dict)
    requests = _part(res, "requests", dict)
    both = {**limits, **requests} if limits and requests else limits or requests or {}
    return {k: _request(v) for k, v in both.items() if k in _READ}


def _add(into: Asks, more: Asks) -> None:
    for k, v in more.items():
        have = into.get(k, 0.0)
        into[k] = None if have is None or v is None else have + v


def _most(into: Asks, more: Asks) -> None:
    for k, v in more.items():
        have = into.get(k, v)
        into[k] = None if have is None or v is None else max(have, v)


def pod_asks(spec: dict[str, Any]) -> Asks:
    """What the scheduler holds for a pod of this pod spec (component-helpers `PodRequests`; Kubernetes "Resource
    sharing within containers", KEP-753 sidecars, KEP-2837 pod-level resources): the app containers and the
    sidecars (init containers with `restartPolicy: Always`) summed; at least what any plain init container asks
    beside the sidecars started before it, or the sidecars so far; a pod-level request in place of that (a
    pod-level limit where no container states the resource); plus `overhead`. Raises Unreadable for a field of
    the wrong type."""
    total: Asks = {}
    for c in _part(spec, "containers", list) or ():
        _add(total, _stated(c))
    inits = _part(spec, "initContainers", list)
    if inits:
        sidecars: Asks = {}
        init: Asks = {}
        for c in inits:
            asks = _stated(c)
            if type(c) is dict and c.get("restartPolicy") == "Always":
                _add(total, asks)
                _add(sidecars, asks)
                _most(init, sidecars)
            else:
                _add(asks, sidecars)
                _most(init, asks)
        _most(total, init)
    pod = _part(spec, "resources", dict)
    if pod:
        requests = _part(pod, "requests", dict) or {}
        limits = _part(pod, "limits", dict) or {}
        for k in _POD_LEVEL:
            if k in requests or (k in limits and k not in total):
                total[k] = _request(requests[k] if k in requests else limits[k])
    overhead = _part(spec, "overhead", dict)
    if overhead:
        _add(total, {k: _request(v) for k, v in overhead.items() if k in _READ})
    return total


_GIB = 2.0**30
PodRequests = dict[str, int | None]
"""`pod_cpus`, `pod_memory_gib`, `pod_accelerators`."""


def pod_requests(specs: Iterable[dict[str, Any]]) -> PodRequests:
    """`pod_cpus`, `pod_memory_gib` and `pod_accelerators` of an object whose pods have these pod specs (one per
    pod template it runs pods of: `jobset_pods`, `ray_pods`, `service_pods`): what each pod holds on a node
    (`pod_asks`); the most of them, rounded up (cpus whole, memory GiB). Cpus or memory are None where a pod
    states none, accelerators where no pod states any (a pod that states none holds none beside one that does;
    a pod holds the most of one kind: it runs on one kind of node); all three where there is no pod template, or
    a quantity or a template is not readable: what a running job runs with is then not known, and nothing else
    of the object is lost for it."""
    unknown: PodRequests = {"pod_cpus": None, "pod_memory_gib": None, "pod_accelerators": None}
    try:
        pods = [pod_asks(spec) for spec in specs]
    except Unreadable:
        return unknown
    cpus: float | None = 0.0
    memory: float | None = 0.0
    devices: float | None = 0.0
    stated = False
    for p in pods:                  # one pass (100,000 JobSets a `fleet observe`)
        cpu, mem = p.get("cpu"), p.get("memory")
        cpus = None if cpu is None or cpus is None else max(cpus, cpu)
        memory = None if mem is None or memory is None else max(memory, mem)
        for k, v in p.items():
            if k in ACCELERATORS:
                stated = True
                devices = None if v is None or devices is None else max(devices, v)
    if not pods:
        return unknown
    return {"pod_cpus": None if cpus is None else math.ceil(cpus - 1e-9),
            "pod_memory_gib": None if memory is None else math.ceil(memory / _GIB - 1e-9),
            "pod_accelerators": None if devices is None or not stated else math.ceil(devices - 1e-9)}


def jobset_pods(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The pod spec of each replicated job of a JobSet."""
    for r in _part(_at(obj, "spec"), "replicatedJobs", list) or ():
        yield _at(r, "template", "spec", "template", "spec")


def _number(obj: dict[str, Any], key: str, default: int) -> int:
    value = _part(obj, key, int)
    return default if value is None else value


def ray_pods(cluster: Any) -> Iterator[dict[str, Any]]:
    """The pod spec of a Ray cluster's head and of each worker group that runs pods (module docstring); none
    for a RayJob without a cluster spec of its own (`cluster` None)."""
    if cluster is None:
        return
    yield _at(cluster, "headGroupSpec", "template", "spec")
    for g in _part(cluster, "workerGroupSpecs", list) or ():
        if _number(g, "replicas", 0) * _number(g, "numOfHosts", 1) > 0 and _part(g, "suspend", bool) is not True:
            yield _at(g, "template", "spec")


def service_pods(kind: str, obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The pod spec of a Deployment's pods, or of a LeaderWorkerSet group's leader and workers."""
    if kind == "Deployment":
        yield _at(obj, "spec", "template", "spec")
        return
    group = _at(obj, "spec", "leaderWorkerTemplate")
    leader = _part(group, "leaderTemplate", dict)
    yield _at(group, "leaderTemplate" if leader is not None else "workerTemplate", "spec")
    if _number(group, "size", 1) > 1:
        yield _at(group, "workerTemplate", "spec")
