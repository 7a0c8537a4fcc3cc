"""EKS managed node groups for one cluster's `infra` stack spec (`pulumi_aws.eks.NodeGroup`).

Each spec entry becomes one node group named after it (stable names, no random suffix; a replacement deletes
the old group first), in the spec's region, with:
- `scaling_config`: `scaling: plan` pins min = desired = node_count; `scaling: autoscaler` sets min/max and
  leaves `desired_size` to the cluster autoscaler (Pulumi ignores its changes, else every apply would undo
  the autoscaler). EKS rejects `max_size` 0, so an empty pool keeps max 1 with min = desired = 0.
- `capacity_type`: SPOT for spot pools, ON_DEMAND otherwise. `reserved` is ON_DEMAND too: EC2 On-Demand
  Capacity Reservations with open matching are consumed by on-demand instances of the same type and zone.
- `instance_types` (the machine type), `labels`, `taints`, an accelerated AMI (NVIDIA for GPUs, Neuron for
  Trainium; override with `fleet:eksAmiType`) and tags naming the fleet cluster and pool for cost reports.

The IAM node role and the subnets are not in the fleet YAML (they belong to the account's network and
security setup, not to the fleet), so they come from the stack config; a missing key fails the stack with
a message naming it:
    fleet:eksNodeRoleArn   ARN of the IAM role the nodes assume
    fleet:eksSubnetIds     JSON list of subnet IDs, e.g. ["subnet-0abc", "subnet-0def"]
Compact placement (a cluster placement group) needs a launch template, which this program does not create
yet: a pool asking for it gets a warning in the Pulumi output rather than silently spread nodes.
"""

from __future__ import annotations

from typing import Any

from . import Program

ROLE_KEY = "eksNodeRoleArn"
SUBNETS_KEY = "eksSubnetIds"
AMI_KEY = "eksAmiType"
AMI_BY_KIND = {"gpu": "AL2023_x86_64_NVIDIA", "trainium": "AL2023_x86_64_NEURON"}


def program(spec: dict[str, Any]) -> Program:
    def run() -> None:
        import pulumi
        from pulumi_aws import eks

        config = pulumi.Config("fleet")
        role_arn = config.get(ROLE_KEY)
        subnets = config.get_object(SUBNETS_KEY)
        for key, value in ((ROLE_KEY, role_arn), (SUBNETS_KEY, subnets)):
            if not value:
                raise pulumi.RunError(_missing(spec, key))
        if not isinstance(subnets, list) or not all(isinstance(s, str) for s in subnets):
            raise pulumi.RunError(f"stack {spec['stack']}: fleet:{SUBNETS_KEY} must be a JSON list of subnet IDs, "
                                  f"got {subnets!r}")
        ami_override = config.get(AMI_KEY)
        for pool in spec["node_pools"]:
            if pool["placement_policy"]:
                pulumi.log.warn(f"{pool['name']}: compact placement is not applied on EKS yet (it needs a launch "
                                "template with a cluster placement group); nodes may spread across racks")
            ignore = ["scalingConfig.desiredSize"] if pool["scaling"] == "autoscaler" else []
            eks.NodeGroup(
                pool["name"],
                cluster_name=spec["kubernetes"]["cluster"],
                node_group_name=pool["name"],
                node_role_arn=role_arn,
                subnet_ids=subnets,
                region=spec["region"],
                ami_type=ami_override or AMI_BY_KIND.get(pool["kind"]),
                tags={"fleet.dev/cluster": spec["cluster"], "fleet.dev/pool": pool["pool"]},
                opts=pulumi.ResourceOptions(delete_before_replace=True, ignore_changes=ignore),
                **node_group_args(pool, eks),
            )
        pulumi.export("node_groups", [p["name"] for p in spec["node_pools"]])

    return run


def node_group_args(pool: dict[str, Any], eks: Any) -> dict[str, Any]:
    """The NodeGroup arguments that depend on one spec entry (`eks` is `pulumi_aws.eks`)."""
    if pool["scaling"] == "autoscaler":
        low, high = pool["autoscaling"]["min_nodes"], pool["autoscaling"]["max_nodes"]
        scaling = eks.NodeGroupScalingConfigArgs(min_size=low, desired_size=low, max_size=max(high, 1))
    else:
        count = pool["node_count"]
        scaling = eks.NodeGroupScalingConfigArgs(min_size=count, desired_size=count, max_size=max(count, 1))
    return {
        "scaling_config": scaling,
        "capacity_type": "SPOT" if pool["capacity"] == "spot" else "ON_DEMAND",
        "instance_types": [pool["machine_type"]],
        "labels": dict(pool["labels"]),
        "taints": [eks.NodeGroupTaintArgs(key=t["key"], value=t["value"], effect=t["effect"])
                   for t in pool["taints"]],
    }


def _missing(spec: dict[str, Any], key: str) -> str:
    example = '\'["subnet-0abc","subnet-0def"]\'' if key == SUBNETS_KEY else "arn:aws:iam::123456789012:role/eks-nodes"
    return (f"stack {spec['stack']}: missing stack config fleet:{key} (EKS node groups need it and the fleet YAML "
            f"does not hold it); set it with: pulumi config set --stack {spec['stack']} fleet:{key} {example}")
