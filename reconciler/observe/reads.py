"""What `fleet observe` lists on every cluster, in order, and how each item is parsed (observe/kube.py). Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .parse import (
    JOB_LABEL,
    parse_deployment,
    parse_jobset,
    parse_leader_worker_set,
    parse_node,
    parse_pod,
    parse_workload,
)
from .ray import parse_raycluster, parse_rayjob, parse_rayservice
from .wire import Kind


@dataclass(frozen=True)
class _Read:
    resource: Kind | Literal["completions"]
    parse: Callable[[Any], Any]
    path: str
    selector: str = ""            # a label selector (Fleet's objects only)
    absent_ok: bool = False       # 404 (its CRD is not installed): none there, no problem


READS = (
    _Read("nodes", parse_node, "/api/v1/nodes"),
    _Read("workloads", parse_workload, "/apis/kueue.x-k8s.io/v1beta2/workloads"),
    _Read("jobsets", parse_jobset, "/apis/jobset.x-k8s.io/v1alpha2/jobsets"),
    _Read("deployments", parse_deployment, "/apis/apps/v1/deployments", selector=JOB_LABEL),
    _Read("leaderworkersets", parse_leader_worker_set, "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets",
          selector=JOB_LABEL, absent_ok=True),
    _Read("pods", parse_pod, "/api/v1/pods", selector=JOB_LABEL),
    # issue 26: KubeRay's gangs and the RayClusters they create (observe/ray.py); no KubeRay CRDs: none
    _Read("rayjobs", parse_rayjob, "/apis/ray.io/v1/rayjobs", selector=JOB_LABEL, absent_ok=True),
    _Read("rayservices", parse_rayservice, "/apis/ray.io/v1/rayservices", selector=JOB_LABEL, absent_ok=True),
    _Read("rayclusters", parse_raycluster, "/apis/ray.io/v1/rayclusters", absent_ok=True),
)
