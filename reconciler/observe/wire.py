"""A list response's bytes -> its items, pruned to the fields `parse` reads. Pure.

Why: decoding a whole page with `json.loads` builds a Python dict for every field of every object (pod
templates, managedFields, resource usage, ...), and that was most of `fleet observe`'s time. Here pydantic-core
decodes the bytes in Rust against a schema of only the fields `parse.py` reads, so the rest is skipped without
ever becoming Python objects; what it keeps is the same plain JSON (`dict`, `list`, `str`, ...) that `json.loads`
would give for those fields, so `parse_*` runs unchanged on it and gives the same models and the same messages.
A page holding a JobSet with a spec digest and no pod digest is decoded in full (`_unstamped`): parse reads
what such a JobSet's pods run from its pod template (observe/podfields.py), which the schema leaves out.

A field `parse` walks into (metadata, spec, status, a pod set assignment) is a `TypedDict` here, so a page
where one is not an object (or `items` is not a list) does not validate: `decode_page` then returns None and
the caller decodes that page with `json.loads` and parses it object by object, as before, so every bad object
is still skipped one by one with its name and field. Leaves `parse` type-checks itself are `Any`.
"""

from __future__ import annotations

from typing import Any, Literal, Required

from pydantic import TypeAdapter, ValidationError
from typing_extensions import TypedDict

from ..models import DIGEST_ANNOTATION, POD_DIGEST_ANNOTATION

# `total=False`: an absent field stays absent (parse reads it as its default); `| None`: null stays null.


class _Meta(TypedDict, total=False):
    name: Any
    uid: Any
    namespace: Any
    labels: Any
    creationTimestamp: Any
    ownerReferences: Any


class _JobSetMeta(_Meta, total=False):
    annotations: Any        # fleet.dev/spec-digest, fleet.dev/units (only JobSets': Nodes' are large)
    deletionTimestamp: Any  # being deleted (a move's old copy, deleted in the foreground)


class _Conditions(TypedDict, total=False):
    conditions: Any


class _PodSetAssignment(TypedDict, total=False):
    flavors: Any
    count: Any


class _Admission(TypedDict, total=False):
    clusterQueue: Any
    podSetAssignments: list[_PodSetAssignment] | None


class _RequeueState(TypedDict, total=False):
    count: Any
    requeueAt: Any


class _SchedulingStats(TypedDict, total=False):
    evictions: Any


class _WorkloadSpec(TypedDict, total=False):
    queueName: Any
    priority: Any


class _WorkloadStatus(TypedDict, total=False):
    conditions: Any
    admission: _Admission | None
    requeueState: _RequeueState | None
    accumulatedPastExecutionTimeSeconds: Any
    schedulingStats: _SchedulingStats | None
    admissionChecks: Any


class _Workload(TypedDict, total=False):
    metadata: _Meta | None
    spec: _WorkloadSpec | None
    status: _WorkloadStatus | None


class _Resources(TypedDict, total=False):
    requests: Any
    limits: Any             # a limit stands for a request the container does not state


class _Container(TypedDict, total=False):
    resources: _Resources | None
    restartPolicy: Any      # `Always`: a sidecar (an init container that runs beside the app containers)


class _PodTemplateSpec(TypedDict, total=False):
    containers: list[_Container] | None
    initContainers: list[_Container] | None
    overhead: Any
    resources: Any          # pod-level requests and limits


class _PodTemplate(TypedDict, total=False):
    spec: _PodTemplateSpec | None


class _JobTemplateSpec(TypedDict, total=False):
    template: _PodTemplate | None


class _JobTemplate(TypedDict, total=False):
    spec: _JobTemplateSpec | None


class _ReplicatedJob(TypedDict, total=False):
    template: _JobTemplate | None


class _JobSetSpec(TypedDict, total=False):
    suspend: Any
    replicatedJobs: list[_ReplicatedJob] | None   # only what a pod runs with (asks.pod_asks)


class _JobSetStatus(TypedDict, total=False):
    conditions: Any
    terminalState: Any
    restarts: Any
    replicatedJobsStatus: Any


class _JobSet(TypedDict, total=False):
    metadata: _JobSetMeta | None
    spec: _JobSetSpec | None
    status: _JobSetStatus | None


class _NodeSpec(TypedDict, total=False):
    unschedulable: Any


class _Node(TypedDict, total=False):
    metadata: _Meta | None
    spec: _NodeSpec | None
    status: _Conditions | None


class _LeaderWorkerTemplate(TypedDict, total=False):
    size: Any                                   # pods per group, the leader included
    leaderTemplate: _PodTemplate | None
    workerTemplate: _PodTemplate | None


class _ServiceSpec(TypedDict, total=False):
    replicas: Any
    template: _PodTemplate | None               # a Deployment's pods (asks.pod_asks)
    leaderWorkerTemplate: _LeaderWorkerTemplate | None    # a LeaderWorkerSet's


class _ReadyReplicas(TypedDict, total=False):
    readyReplicas: Any


class _Workload_(TypedDict, total=False):
    """A Deployment or a LeaderWorkerSet: both keep `spec.replicas` and `status.readyReplicas`, and their pods'
    templates (what their pods request: observe/asks.py)."""

    metadata: _Meta | None
    spec: _ServiceSpec | None
    status: _ReadyReplicas | None


class _PodSpec(TypedDict, total=False):
    nodeName: Any


class _PodStatus(TypedDict, total=False):
    phase: Any
    conditions: Any


class _Pod(TypedDict, total=False):
    metadata: _Meta | None
    spec: _PodSpec | None
    status: _PodStatus | None


# functional syntax: `continue` is a Python keyword
_ListMeta = TypedDict("_ListMeta", {"continue": Any}, total=False)


class _WorkloadPage(TypedDict, total=False):
    items: Required[list[_Workload]]
    metadata: _ListMeta | None


class _JobSetPage(TypedDict, total=False):
    items: Required[list[_JobSet]]
    metadata: _ListMeta | None


class _NodePage(TypedDict, total=False):
    items: Required[list[_Node]]
    metadata: _ListMeta | None


class _ServicePage(TypedDict, total=False):
    items: Required[list[_Workload_]]
    metadata: _ListMeta | None


class _PodPage(TypedDict, total=False):
    items: Required[list[_Pod]]
    metadata: _ListMeta | None


Kind = Literal["workloads", "jobsets", "nodes", "deployments", "leaderworkersets", "pods", "rayjobs", "rayservices",
               "rayclusters"]
_PAGES: dict[str, TypeAdapter[Any]] = {
    "workloads": TypeAdapter(_WorkloadPage), "jobsets": TypeAdapter(_JobSetPage), "nodes": TypeAdapter(_NodePage),
    "deployments": TypeAdapter(_ServicePage), "leaderworkersets": TypeAdapter(_ServicePage),
    "pods": TypeAdapter(_PodPage)}


def decode_page(kind: Kind, body: bytes) -> tuple[list[dict[str, Any]], Any] | None:
    """The page's items (pruned) and its `metadata.continue` token (None at the end), or None when the page is
    not one the pruned schema describes (not JSON, not a list, a field `parse` walks into is not an object):
    the caller then decodes it in full and reports exactly what is wrong, object by object."""
    adapter = _PAGES.get(kind)
    if adapter is None:                 # Ray objects (observe/ray.py): few, decoded in full
        return None
    try:
        page = adapter.validate_json(body)
    except ValidationError:
        return None
    if kind == "jobsets" and any(_unstamped(item) for item in page["items"]):
        return None
    return page["items"], (page.get("metadata") or {}).get("continue") or None


def _unstamped(item: dict[str, Any]) -> bool:
    """A JobSet of Fleet's made before Fleet stamped `fleet.dev/pod-digest`: what its pods run is read from its
    pod template (observe/podfields.py), which this schema prunes, so its page is decoded in full (rare: only
    such JobSets, until they are re-created)."""
    annotations = (item.get("metadata") or {}).get("annotations")
    return type(annotations) is dict and DIGEST_ANNOTATION in annotations and POD_DIGEST_ANNOTATION not in annotations
