"""What rendering needs to know about each pool and placement, resolved once. Pure.

A pool becomes one Kueue ResourceFlavor (named after the pool: pool names are unique in a cluster, and each
Kubernetes cluster has its own Kueue). The flavor's `nodeLabels` must select exactly that pool's nodes, using
labels the platform itself puts on nodes where one exists, and `fleet.dev/pool` (which the infra stack sets
on every node pool / node group it creates) where none does:

- GKE TPU: `cloud.google.com/gke-tpu-accelerator` + `cloud.google.com/gke-tpu-topology` (GKE sets both) and
  `fleet.dev/pool`, because one fleet TPU pool is several GKE node pools (one per slice, see stackspec.py),
  so `cloud.google.com/gke-nodepool` cannot name it;
- GKE GPU: `cloud.google.com/gke-accelerator` and `cloud.google.com/gke-nodepool` (= the pool name);
- GKE spot capacity adds `cloud.google.com/gke-spot: "true"`;
- EKS: `eks.amazonaws.com/nodegroup` and `eks.amazonaws.com/capacityType` (ON_DEMAND/SPOT). EKS labels a node
  with the name of its node group, which the infra stack gives as `node_pool_name(pool)`: the pool name, or for
  a name over MAX_NAME its start and a hash (an EKS pool name may be longer; GKE GPU pool names may not, a
  validation rule);
- on-prem: `fleet.dev/pool`.

Taints: GKE taints TPU nodes `google.com/tpu` and GPU nodes `nvidia.com/gpu`; the infra stack declares the
same taints (and `aws.amazon.com/neuron` on Trainium) everywhere, so every flavor tolerates its device taint.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..catalog import Catalog
from ..kube_rules import ACCELERATOR_RESOURCES
from ..resolve import ResolvedPool

POOL_LABEL = "fleet.dev/pool"
TEAM_LABEL = "fleet.dev/team"

RESOURCE = ACCELERATOR_RESOURCES
"""Kubernetes extended resource of each accelerator kind (device plugins of GKE TPU, NVIDIA, AWS Neuron)."""

NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TPU_SLICE_TOPOLOGY = "gke-tpu-slice"
"""Kueue Topology for multi-host TPU slices: a slice is one GKE node pool, its hosts the level below."""
MAX_NAME = 40
"""Most characters of a node pool / node group name the infra stack creates (the GKE limit; stackspec.py)."""


def node_pool_name(pool: str, suffix: str = "") -> str:
    """The name of the pool's node pool or node group (a TPU slice's: `suffix` `-s<i>`): `pool + suffix`, or a
    longer one cut to MAX_NAME keeping its start, a short hash of the whole and the suffix (stable, distinct)."""
    full = pool + suffix
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:6]
    head = pool[: MAX_NAME - len(suffix) - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}{suffix}"


@dataclass(frozen=True, slots=True)
class PoolFacts:
    pool: ResolvedPool
    resource: str                       # google.com/tpu | nvidia.com/gpu | aws.amazon.com/neuron
    node_labels: tuple[tuple[str, str], ...]
    accelerators_per_node: int
    gke_accelerator: str | None         # GKE accelerator label value (TPU or GPU), None off GKE

    @property
    def name(self) -> str:
        return self.pool.name

    @property
    def multi_host_tpu(self) -> bool:
        return self.pool.kind == "tpu" and self.pool.nodes_per_unit > 1

    @property
    def topology(self) -> str | None:
        """Kueue Topology of the flavor, or None.

        Only multi-host TPU slices with `scaling: plan` get one: their nodes exist whenever the plan placed
        work on them (Kueue's topology-aware scheduling counts existing nodes only, so an autoscaled pool
        at zero would never admit), and the levels it uses are labels GKE always sets. GPU pools get none:
        the `cloud.google.com/gce-topology-*` labels are not guaranteed on every GPU machine type, and a
        flavor whose nodes lack a level's label admits nothing."""
        if self.multi_host_tpu and self.pool.scaling == "plan" and self.pool.provider == "gcp":
            return TPU_SLICE_TOPOLOGY
        return None


def pool_facts(pool: ResolvedPool, catalog: Catalog) -> PoolFacts:
    acc = catalog.accelerators[pool.accelerator]
    mt = catalog.machine_types.get(pool.machine_type or "")
    gke = (mt.gke_accelerator if mt and mt.gke_accelerator else acc.gke_accelerator) if pool.provider == "gcp" \
        else None
    labels: dict[str, str] = {}
    if pool.provider == "gcp":
        if pool.kind == "tpu":
            assert gke is not None and pool.shape is not None
            labels["cloud.google.com/gke-tpu-accelerator"] = gke
            labels["cloud.google.com/gke-tpu-topology"] = pool.shape
            labels[POOL_LABEL] = pool.name
        else:
            if gke is not None:
                labels["cloud.google.com/gke-accelerator"] = gke
            labels[NODE_POOL_LABEL] = pool.name
        if pool.capacity == "spot":
            labels["cloud.google.com/gke-spot"] = "true"
    elif pool.provider == "aws":
        labels["eks.amazonaws.com/nodegroup"] = node_pool_name(pool.name)
        labels["eks.amazonaws.com/capacityType"] = "SPOT" if pool.capacity == "spot" else "ON_DEMAND"
    else:
        labels[POOL_LABEL] = pool.name
    per_node = pool.unit_accelerators // pool.nodes_per_unit
    return PoolFacts(pool, RESOURCE[pool.kind], tuple(sorted(labels.items())), per_node, gke)
