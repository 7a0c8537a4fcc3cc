"""Stack specs for tests, built to the stack spec contract (what `fleet render` writes per cluster).

Each builder returns a fresh dict, so a test may change it freely. `write_specs(dir, specs)` writes them the
way `fleet render --out` does (`<dir>/<stack>.json`, indent 2, sorted keys, trailing newline).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Spec = dict[str, Any]


def _common(cluster: str, layer: str, provider: str, region: str, zone: str | None, kube_cluster: str,
            context: str | None) -> Spec:
    return {"version": 1, "stack": f"{cluster}-{layer}", "layer": layer, "cluster": cluster, "provider": provider,
            "region": region, "zone": zone, "kubernetes": {"cluster": kube_cluster, "context": context}}


def pool(name: str, fleet_pool: str, **over: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name, "pool": fleet_pool, "slice": None, "accelerator": "nvidia-h100-80gb", "kind": "gpu",
        "machine_type": "a3-highgpu-8g", "capacity": "on-demand", "scaling": "plan", "node_count": 0,
        "autoscaling": None, "tpu_topology": None, "placement_policy": None, "guest_accelerator": None,
        "labels": {"fleet.dev/pool": fleet_pool}, "taints": []}
    entry.update(over)
    return entry


TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}


def gke_infra() -> Spec:
    """GKE: a planned 2-slice v5p 8x8x8 pool (128 hosts each), a v6e autoscaled slice, and three GPU pools."""
    spec = _common("gke-use5", "infra", "gcp", "us-east5", "us-east5-a", "ml-use5", "gke_ml_us-east5_ml-use5")
    tpu = {"accelerator": "tpu-v5p", "kind": "tpu", "machine_type": "ct5p-hightpu-4t", "tpu_topology": "8x8x8",
           "placement_policy": "COMPACT", "taints": [TPU_TAINT]}
    gpu = {"guest_accelerator": {"type": "nvidia-h100-80gb", "count": 8}, "taints": [GPU_TAINT]}
    spec["node_pools"] = [
        pool("h100-compact", "h100-compact", placement_policy="COMPACT", node_count=4, **gpu),
        pool("h100-reserved", "h100-reserved", capacity="reserved", node_count=2, **gpu),
        pool("h100-spot", "h100-spot", capacity="spot", scaling="autoscaler", node_count=None,
             autoscaling={"min_nodes": 0, "max_nodes": 32}, **gpu,
             ),
        pool("v5p-8x8x8-s0", "v5p-8x8x8", slice=0, node_count=128, **tpu),
        pool("v5p-8x8x8-s1", "v5p-8x8x8", slice=1, node_count=128, **tpu),
        pool("v6e-4x4-spot-s0", "v6e-4x4-spot", slice=0, accelerator="tpu-v6e", kind="tpu",
             machine_type="ct6e-standard-4t", capacity="spot", scaling="autoscaler", node_count=None,
             autoscaling={"min_nodes": 0, "max_nodes": 4}, tpu_topology="4x4", placement_policy="COMPACT",
             taints=[TPU_TAINT]),
    ]
    return spec


def eks_infra() -> Spec:
    """EKS: p5 on-demand (planned, 3 nodes), p5 spot (autoscaler), p5en on-demand at zero."""
    spec = _common("eks-use1", "infra", "aws", "us-east-1", None, "ml-use1", None)
    spec["node_pools"] = [
        pool("p5", "p5", machine_type="p5.48xlarge", node_count=3, placement_policy="COMPACT",
             taints=[GPU_TAINT]),
        pool("p5-spot", "p5-spot", machine_type="p5.48xlarge", capacity="spot", scaling="autoscaler",
             node_count=None, autoscaling={"min_nodes": 1, "max_nodes": 16}, taints=[GPU_TAINT]),
        pool("p5en", "p5en", accelerator="nvidia-h200-141gb", machine_type="p5en.48xlarge", node_count=0),
    ]
    return spec


def onprem_infra() -> Spec:
    spec = _common("onprem-sjc", "infra", "onprem", "onprem-sjc", None, "sjc-ml", "sjc-ml-admin")
    spec["node_pools"] = [pool("h100-owned", "h100-owned", machine_type=None, capacity="owned", node_count=16)]
    return spec


def kueue(cluster: str = "gke-use5", provider: str = "gcp", context: str | None = "gke_ml_us-east5_ml-use5") -> Spec:
    """Kueue objects in apply order: a namespace, flavors, a topology, cohorts, priority classes, queues."""
    spec = _common(cluster, "kueue", provider, "us-east5", None, "ml-use5", context)
    kq = "kueue.x-k8s.io/v1beta2"
    spec["objects"] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foundation"}},
        {"apiVersion": kq, "kind": "ResourceFlavor", "metadata": {"name": "v5p-8x8x8"},
         "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "v5p-8x8x8-s0"}, "topologyName": "tpu"}},
        {"apiVersion": kq, "kind": "ResourceFlavor", "metadata": {"name": "h100-spot"},
         "spec": {"nodeLabels": {"cloud.google.com/gke-spot": "true"}}},
        {"apiVersion": kq, "kind": "Topology", "metadata": {"name": "tpu"},
         "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": kq, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}},
        {"apiVersion": kq, "kind": "Cohort", "metadata": {"name": "research"}, "spec": {"parentName": "org"}},
        {"apiVersion": kq, "kind": "WorkloadPriorityClass", "metadata": {"name": "production"}, "value": 1000,
         "description": "production"},
        {"apiVersion": kq, "kind": "ClusterQueue", "metadata": {"name": "foundation"},
         "spec": {"cohortName": "research", "resourceGroups": []}},
        {"apiVersion": kq, "kind": "LocalQueue", "metadata": {"name": "foundation", "namespace": "foundation"},
         "spec": {"clusterQueue": "foundation"}},
    ]
    return spec


def jobs(cluster: str = "gke-use5", context: str | None = "gke_ml_us-east5_ml-use5") -> Spec:
    spec = _common(cluster, "jobs", "gcp", "us-east5", None, "ml-use5", context)
    spec["objects"] = [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
         "metadata": {"name": name, "namespace": "foundation",
                      "labels": {"kueue.x-k8s.io/queue-name": "foundation"}},
         "spec": {"replicatedJobs": [{"name": "slice", "replicas": 2}]}}
        for name in ("pi0-pretrain", "pi0-sweep")]
    return spec


def fleet_of_specs() -> list[Spec]:
    """Every layer of three clusters, as `fleet render` would write them for a small fleet."""
    return [gke_infra(), kueue(), jobs(),
            eks_infra(), kueue("eks-use1", "aws", "eks-ctx"), jobs("eks-use1", "eks-ctx"),
            onprem_infra(), kueue("onprem-sjc", "onprem", "sjc-ml-admin"), jobs("onprem-sjc", "sjc-ml-admin")]


def write_specs(directory: Path, specs: list[Spec]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        (directory / f"{spec['stack']}.json").write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    return directory
