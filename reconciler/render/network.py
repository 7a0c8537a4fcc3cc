"""Fast GPU networking per machine type: what the node pool needs and what the pods ask for. Pure.

Without it NCCL falls back to TCP on the node's one primary NIC. The numbers are machine facts from
../shared/catalog/FACTS.md (section 3, "Interconnect", and section 4), each named with its source there:

- EKS `p5.48xlarge` and `p5e.48xlarge`: 32 EFA interfaces (AWS's multi-card EFA example requests 32 EFA
  devices, FACTS S16); `p5en.48xlarge`: 16 (FACTS S15). The launch template gets one interface per network
  card (`stacks/aws.py`), the EFA Kubernetes device plugin (aws-efa-k8s-device-plugin, a cluster add-on the
  README names) advertises them as `vpc.amazonaws.com/efa`, and a pod that takes whole nodes requests all of
  them (AWS EKS user guide, "Run machine learning training on Amazon EKS with Elastic Fabric Adapter").
- GKE A3 High (`a3-highgpu-8g`): GPUDirect-TCPX, 4 GPU NICs; A3 Mega (`a3-megagpu-8g`): GPUDirect-TCPXO,
  8 GPU NICs (GKE "Maximize GPU network bandwidth with GPUDirect and multi-networking": up to 4 secondary
  NICs on A3 High, up to 8 on A3 Mega; FACTS S5, S11); A3 Ultra (`a3-ultragpu-8g`): GPUDirect RDMA over
  8 ConnectX-7 NICs plus a second gVNIC (FACTS S5; GKE "Maximize GPU network bandwidth ... GPUDirect RDMA").
  The node pool gets one additional node network per NIC (`stacks/gcp.py`, from the stack config
  `fleet:gpuNetworks`, since the VPCs belong to the project's network setup, not to the fleet YAML), and
  the pods name the matching Kubernetes `Network` objects in `networking.gke.io/interfaces`, with the
  names GKE's documentation uses (`vpc1`..`vpcN` for TCPX/TCPXO, `gvnic-1` and `rdma-0`..`rdma-7` for RDMA).

Only pods of multi-node gangs get the devices or interfaces: a job on one node talks over NVLink.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

EFA_RESOURCE = "vpc.amazonaws.com/efa"
EFA_INTERFACES = {"p5.48xlarge": 32, "p5e.48xlarge": 32, "p5en.48xlarge": 16}
"""EFA network interfaces per instance (FACTS.md section 4: S16 for p5/p5e, S15 for p5en)."""


@dataclass(frozen=True, slots=True)
class GpuNetworking:
    kind: str                           # tcpx | tcpxo | rdma
    gpu_nics: int                       # additional NICs carrying GPU traffic
    gvnic_extra: int                    # additional gVNIC networks besides the GPU NICs

    @property
    def networks(self) -> int:
        """Additional node networks of the node pool."""
        return self.gvnic_extra + self.gpu_nics

    def pod_networks(self) -> list[str]:
        """Kubernetes `Network` names the pod's interfaces eth1.. attach to (GKE's documented names)."""
        if self.kind == "rdma":
            return [f"gvnic-{i + 1}" for i in range(self.gvnic_extra)] + [f"rdma-{i}" for i in range(self.gpu_nics)]
        return [f"vpc{i + 1}" for i in range(self.gpu_nics)]


GKE_GPU_NETWORKING = {
    "a3-highgpu-8g": GpuNetworking("tcpx", 4, 0),
    "a3-megagpu-8g": GpuNetworking("tcpxo", 8, 0),
    "a3-ultragpu-8g": GpuNetworking("rdma", 8, 1),
}
"""GPUDirect networking per GKE machine type (FACTS.md section 3, S5 and S11; module docstring)."""


def efa_interfaces(provider: str, machine_type: str | None) -> int:
    return EFA_INTERFACES.get(machine_type or "", 0) if provider == "aws" else 0


def gke_networking(provider: str, machine_type: str | None) -> GpuNetworking | None:
    return GKE_GPU_NETWORKING.get(machine_type or "") if provider == "gcp" else None


def interfaces_annotation(net: GpuNetworking) -> dict[str, str]:
    """The pod annotations of GKE multi-networking: eth0 on the default network, eth1.. on the GPU NICs."""
    ifaces = [{"interfaceName": "eth0", "network": "default"}]
    ifaces += [{"interfaceName": f"eth{i + 1}", "network": n} for i, n in enumerate(net.pod_networks())]
    return {"networking.gke.io/default-interface": "eth0",
            "networking.gke.io/interfaces": json.dumps(ifaces, separators=(",", ":"))}
