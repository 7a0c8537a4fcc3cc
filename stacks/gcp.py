"""GKE node pools for one cluster's `infra` stack spec (`pulumi_gcp.container.NodePool`).

What each spec entry becomes, and why:
- A multi-host TPU slice is one node pool: `placement_policy {type: COMPACT, tpu_topology}` makes GKE build
  the pool as one ICI-connected slice, and `node_count` is the slice's hosts. With `scaling: autoscaler` the
  pool gets `autoscaling {min_node_count: 0, max_node_count: hosts}` instead (GKE scales a multi-host slice
  atomically, all hosts or none). Single-host slices are the same with one host.
- GPU pools carry their GPUs as `guest_accelerators` (GKE installs the default driver), `node_count` for
  `scaling: plan` or `autoscaling` for `scaling: autoscaler`, and COMPACT placement when the fleet pool asks
  for `placement: compact`.
- `capacity: spot` sets `node_config.spot`; `capacity: reserved` consumes any matching reservation
  (`ANY_RESERVATION`): the spec names no reservation, and a project's reservations are matched by machine type.
  GKE falls back to on-demand when no reservation is free, so the pool still comes up, at on-demand price;
  naming a specific reservation would need a field the contract does not have yet.
- Every pool is pinned to ONE zone (`node_locations`): TPU slices and compact placement need a single zone, and
  GKE counts nodes per zone, so one zone makes `node_count`/`min`/`max` the pool's totals, as planned. The zone
  is the spec's `zone`, else the stack config `fleet:nodeZone` (the fleet YAML may leave `zone` out).
- The location is the spec's zone if set, else its region; the cluster is `kubernetes.cluster`; the project
  comes from the provider config (`gcp:project`), never from the spec.
- GPUDirect (`gpu_direct: {kind, networks}`, A3 High/Mega/Ultra; render/network.py): the pool gets gVNIC
  (`node_config.gvnic`) and one additional node network per NIC (`network_config.additional_node_network_configs`,
  GKE "Maximize GPU network bandwidth with GPUDirect and multi-networking": `--additional-node-network
  network=...,subnetwork=...` once per NIC). The VPCs and subnets belong to the project's network setup,
  not to the fleet YAML, so they come from the stack config `fleet:gpuNetworks`, a JSON list of
  `{"network": ..., "subnetwork": ...}` in the order of the pods' interfaces eth1.. (A3 Ultra: the gVNIC
  network first, then the 8 RDMA networks); a pool takes the first `networks` of them, and a list too
  short fails the stack naming the key.
- Queued pools (`provisioning: queued`, GKE flex-start with queued provisioning; render/provisioning.py) are
  made as GKE's "Run a large-scale workload with flex-start with queued provisioning" creates them
  (`gcloud container node-pools create ... --enable-queued-provisioning --flex-start --enable-autoscaling
  --num-nodes=0 --total-max-nodes N --location-policy=ANY --reservation-affinity=none --no-enable-autorepair`):
  `queued_provisioning {enabled: true}` (nodes come only through the ProvisioningRequest API, which Kueue's
  admission check uses), `node_config.flex_start`, `reservation_affinity NO_RESERVATION`, `management
  {auto_repair: false}` (auto-upgrade is left as GKE sets it: the command does not change it), and no
  `node_count` or `initial_node_count` (the pool is created empty, `--num-nodes=0`; a set initial count would
  force a replacement whenever GKE reports another). GPU pools get that command's total limits, 0 to the
  spec's max, with `location_policy: ANY`; a TPU slice keeps the per-zone 0 to its hosts of every autoscaled
  slice (the node pool is one zone, so per zone is the total; GKE grows a multi-host slice whole).
  `queued_provisioning` is set only when a node pool is created (the provider replaces the pool to change
  it), so a queued pool that an older Fleet created at a fixed size is replaced, empty, by the next apply.
- Node pools get their spec name as the GKE name (no random suffix) so names stay stable across runs; a change
  that forces a replacement therefore deletes the old pool before creating the new one.
"""

from __future__ import annotations

from typing import Any

from . import Program

ZONE_CONFIG_KEY = "fleet:nodeZone"
NETWORKS_KEY = "gpuNetworks"


def program(spec: dict[str, Any]) -> Program:
    def run() -> None:
        import pulumi
        from pulumi_gcp import container

        zone = spec["zone"] or pulumi.Config("fleet").get("nodeZone")
        if not zone:
            raise pulumi.RunError(
                f"stack {spec['stack']}: GKE node pools need a zone (TPU slices and node counts are per zone); "
                f"set `zone:` in fleet/clusters/{spec['cluster']}.yaml or the stack config {ZONE_CONFIG_KEY} "
                f"(pulumi config set --stack {spec['stack']} {ZONE_CONFIG_KEY} {spec['region']}-a)")
        networks: Any = None
        for pool in spec["node_pools"]:
            args = node_pool_args(pool, container)
            direct = pool.get("gpu_direct")
            if direct:
                networks = networks if networks is not None else pulumi.Config("fleet").get_object(NETWORKS_KEY)
                args["network_config"] = additional_networks(spec, pool, direct["networks"], networks, container)
            container.NodePool(
                pool["name"],
                name=pool["name"],
                cluster=spec["kubernetes"]["cluster"],
                location=spec["zone"] or spec["region"],
                node_locations=[zone],
                opts=pulumi.ResourceOptions(delete_before_replace=True),
                **args,
            )
        pulumi.export("node_pools", [p["name"] for p in spec["node_pools"]])

    return run


def additional_networks(spec: dict[str, Any], pool: dict[str, Any], count: int, networks: Any,
                        container: Any) -> Any:
    """The pool's additional node networks: the first `count` of the stack config `fleet:gpuNetworks`."""
    import pulumi

    ok = isinstance(networks, list) and all(
        isinstance(n, dict) and isinstance(n.get("network"), str) and isinstance(n.get("subnetwork"), str)
        for n in networks)
    if not ok or len(networks) < count:
        have = len(networks) if isinstance(networks, list) else 0
        raise pulumi.RunError(
            f"stack {spec['stack']}: node pool {pool['name']} ({pool['machine_type']}, GPUDirect "
            f"{pool['gpu_direct']['kind']}) needs {count} additional node networks from the stack config "
            f"fleet:{NETWORKS_KEY}, a JSON list of {{\"network\": ..., \"subnetwork\": ...}} (has {have}); set it "
            f"with: pulumi config set --stack {spec['stack']} fleet:{NETWORKS_KEY} "
            f"'[{{\"network\":\"gpu-vpc-1\",\"subnetwork\":\"gpu-sub-1\"}}, ...]'")
    return container.NodePoolNetworkConfigArgs(additional_node_network_configs=[
        container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=n["network"], subnetwork=n["subnetwork"])
        for n in networks[:count]])


def node_pool_args(pool: dict[str, Any], container: Any) -> dict[str, Any]:
    """The NodePool arguments that depend on one spec entry (`container` is `pulumi_gcp.container`)."""
    args: dict[str, Any] = {"node_config": _node_config(pool, container)}
    if _queued(pool):
        args.update(_queued_args(pool, container))
    elif pool["scaling"] == "autoscaler":
        auto = pool["autoscaling"]
        args["autoscaling"] = container.NodePoolAutoscalingArgs(
            min_node_count=auto["min_nodes"], max_node_count=auto["max_nodes"])
    else:
        args["node_count"] = pool["node_count"]
    if pool["placement_policy"]:
        args["placement_policy"] = container.NodePoolPlacementPolicyArgs(
            type=pool["placement_policy"], tpu_topology=pool["tpu_topology"] if pool["kind"] == "tpu" else None)
    return args


def _queued(pool: dict[str, Any]) -> bool:
    return pool.get("provisioning") == "queued"


def _queued_args(pool: dict[str, Any], container: Any) -> dict[str, Any]:
    """A queued node pool's own arguments (module docstring); the spec check made it autoscale from 0."""
    high = pool["autoscaling"]["max_nodes"]
    auto = (container.NodePoolAutoscalingArgs(min_node_count=0, max_node_count=high) if pool["kind"] == "tpu"
            else container.NodePoolAutoscalingArgs(total_min_node_count=0, total_max_node_count=high,
                                                   location_policy="ANY"))
    return {"queued_provisioning": container.NodePoolQueuedProvisioningArgs(enabled=True), "autoscaling": auto,
            "management": container.NodePoolManagementArgs(auto_repair=False)}


def _node_config(pool: dict[str, Any], container: Any) -> Any:
    config: dict[str, Any] = {
        "machine_type": pool["machine_type"],
        "labels": dict(pool["labels"]),
        "taints": [container.NodePoolNodeConfigTaintArgs(key=t["key"], value=t["value"], effect=t["effect"])
                   for t in pool["taints"]],
    }
    if _queued(pool):
        config["flex_start"] = True
        config["reservation_affinity"] = container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="NO_RESERVATION")
    elif pool["capacity"] == "spot":
        config["spot"] = True
    elif pool["capacity"] == "reserved":
        config["reservation_affinity"] = container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="ANY_RESERVATION")
    if pool.get("gpu_direct"):
        config["gvnic"] = container.NodePoolNodeConfigGvnicArgs(enabled=True)
    guest = pool["guest_accelerator"]
    if guest is not None:
        config["guest_accelerators"] = [container.NodePoolNodeConfigGuestAcceleratorArgs(
            type=guest["type"], count=guest["count"],
            gpu_driver_installation_config=container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                gpu_driver_version="DEFAULT"))]
    return container.NodePoolNodeConfigArgs(**config)
