"""Stack specs: what `stacks/` turns into Pulumi resources, one JSON file per cluster and layer. Pure.

The format is a contract shared with `stacks/` (see the brief in the design notes): common keys, then
`node_pools` for the infra layer and `objects` (full manifests, in apply order) for the kueue and jobs layers.

Node pools (sorted by name): a TPU pool is one entry per slice (`<pool>-s<i>`; one multi-host slice is one
GKE node pool, created and scaled atomically). `scaling: plan` pools get the plan's target (TPU: the slices the
plan's jobs occupy, whatever their indices, topped up to the target with the lowest free ones, each with
`node_count` = hosts; others: `node_count` = target, also at zero, so scaling to zero is an
update, not a delete). `scaling: autoscaler` pools get min/max (TPU: one entry per slice up to `max`, each
autoscaling between 0 and its hosts, or pinned at its hosts for slices below the pool's `min`).
Fast networking (network.py): `efa_interfaces` (EKS: EFA interfaces of the launch template, 0 for none) and
`gpu_direct` (GKE: `{kind: tcpx|tcpxo|rdma, networks: N}` additional node networks, or null).
A `provisioning: queued` pool (GKE flex-start; render/provisioning.py) gets `provisioning: "queued"` on each of
its entries (the key is absent on every other pool) and never a `node_count`: its nodes come only from the
ProvisioningRequests Kueue creates, so each entry is `scaling: autoscaler` from 0 up to the pool's max (TPU:
every slice up to `max`, each 0 to its hosts), whatever the plan's target and the pool's `scaling` (the plan's
target is capacity requested, not a size to set; validation admits queued pools with `min: 0` only).
Names are RFC 1123 labels of at most 40 characters (the GKE limit); a longer one keeps its start and its
`-s<i>` suffix and gets a short hash of the full name, so it stays stable and unique.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Cluster
from .facts import MAX_NAME, POOL_LABEL, PoolFacts, node_pool_name
from .network import efa_interfaces, gke_networking

__all__ = ["MAX_NAME", "common", "infra_spec", "node_pool_name", "node_pools", "objects_spec", "plan_slices",
           "to_json"]
Obj = dict[str, Any]


def common(cluster: Cluster, layer: str) -> Obj:
    return {"version": 1, "stack": f"{cluster.name}-{layer}", "layer": layer, "cluster": cluster.name,
            "provider": cluster.provider, "region": cluster.region, "zone": cluster.zone,
            "kubernetes": {"cluster": cluster.kubernetes.cluster if cluster.kubernetes else None,
                           "context": cluster.kubernetes.context if cluster.kubernetes else None}}


def plan_slices(target: int, occupied: set[int]) -> list[int]:
    """The slices a `scaling: plan` TPU pool creates: exactly the occupied ones (any freed slice is released,
    whatever its index), then the lowest free indices while fewer than `target` (the pool's min)."""
    out = set(occupied)
    i = 0
    while len(out) < target:
        if i not in out:
            out.add(i)
        i += 1
    return sorted(out)


def node_pools(f: PoolFacts, target: int, occupied: set[int] | None = None) -> list[Obj]:
    """The pool's node pools (a TPU pool: one per slice), each its own objects: no two share a dict or list
    (`render.pool_and_kueue_docs` hands them to the stacks as they are)."""
    queued = {"scaling": "autoscaler", "provisioning": "queued"} if f.pool.queued else {}
    return [{**_node_pool_base(f), **one, **queued} for one in _node_pools(f, target, occupied)]


def _node_pool_base(f: PoolFacts) -> Obj:
    p = f.pool
    return {
        "pool": p.name, "accelerator": p.accelerator, "kind": p.kind, "machine_type": p.machine_type,
        "capacity": p.capacity, "scaling": p.scaling, "tpu_topology": p.shape,
        "placement_policy": "COMPACT" if (f.multi_host_tpu or (p.kind != "tpu" and p.compact)) else None,
        "guest_accelerator": ({"type": f.gke_accelerator, "count": f.accelerators_per_node}
                              if p.provider == "gcp" and p.kind == "gpu" and f.gke_accelerator else None),
        "labels": {POOL_LABEL: p.name},
        "efa_interfaces": efa_interfaces(p.provider, p.machine_type),
        "gpu_direct": _gpu_direct(p.provider, p.machine_type),
        "taints": [{"key": f.resource, "value": "present", "effect": "NO_SCHEDULE"}],
    }


def _node_pools(f: PoolFacts, target: int, occupied: set[int] | None) -> list[Obj]:
    """What differs between the pool's node pools: name, slice, node count, autoscaling."""
    p = f.pool
    fixed = p.scaling == "plan" and not p.queued    # a queued pool's nodes are granted, never a count set here
    if p.kind == "tpu":
        hosts = p.nodes_per_unit
        slices = plan_slices(target, occupied or set()) if fixed else range(p.max)
        out = []
        for i in slices:
            auto = None if fixed else {"min_nodes": hosts if i < p.min else 0, "max_nodes": hosts}
            out.append({"name": node_pool_name(p.name, f"-s{i}"), "slice": i,
                        "node_count": hosts if fixed else None, "autoscaling": auto})
        return out
    auto = None if fixed else {"min_nodes": p.min, "max_nodes": p.max}
    return [{"name": node_pool_name(p.name), "slice": None,
             "node_count": target if fixed else None, "autoscaling": auto}]


def _gpu_direct(provider: str, machine_type: str | None) -> Obj | None:
    net = gke_networking(provider, machine_type)
    return None if net is None else {"kind": net.kind, "networks": net.networks}


def infra_spec(cluster: Cluster, facts: list[PoolFacts], targets: dict[str, int],
               occupied: dict[str, set[int]] | None = None) -> Obj:
    """`occupied`: per pool, the units the plan's jobs occupy (which slices of a TPU pool exist)."""
    occ = occupied or {}
    pools = [np for f in facts for np in node_pools(f, targets.get(f.name, f.pool.min), occ.get(f.name))]
    return {**common(cluster, "infra"), "node_pools": sorted(pools, key=lambda n: n["name"])}


def objects_spec(cluster: Cluster, layer: str, objects: list[Obj]) -> Obj:
    return {**common(cluster, layer), "objects": objects}


def to_json(spec: Obj) -> str:
    return json.dumps(spec, indent=2, sort_keys=True) + "\n"
