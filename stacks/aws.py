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

Compact placement (`placement_policy: COMPACT`) is an EC2 cluster placement group, which a managed node group
can only use through a launch template. Such a group gets its own `ec2.PlacementGroup` (strategy `cluster`)
and `ec2.LaunchTemplate` whose only settings are the placement and the instance metadata hop limit 2 that
EKS's own default template sets (pods reach IMDSv2 through one extra hop). Everything else stays on the node
group, as the EKS launch template rules require: no subnet, IAM instance profile or shutdown behaviour in the
template (EKS forbids them); no AMI in the template, so `ami_type` stays on the node group; instance types in
one place only (the node group); no security groups (EKS would then drop the cluster security group); and
the node group sets neither `disk_size` nor `remote_access` (forbidden with a launch template). The node
group follows the template's latest version, so a template change rolls the nodes.

EFA (`efa_interfaces` > 0, p5/p5e/p5en; render/network.py): the launch template gets one network interface
per network card, `interface_type: efa`, card 0 at device index 0 (the primary interface) and every other
card at device index 1, as the EC2 user guide's "Maximize network bandwidth on accelerated instances"
(efa-acc-inst-types) and the EKS user guide's EFA page lay them out. The interfaces name no subnet (EKS
forbids it: the node group's subnets apply) and no security group, so EKS applies the cluster security
group, which admits all traffic between the cluster's nodes, as EFA needs. The EFA Kubernetes device
plugin (a cluster add-on, see the README) then advertises them as `vpc.amazonaws.com/efa`.

A cluster placement group lives in one Availability Zone, so a compact node group gets exactly one subnet.
It comes from its own key, not from the order of `fleet:eksSubnetIds`: the subnet decides the zone, and the
zone decides where the capacity (and any On-Demand Capacity Reservation, which is per zone) must be, which
is a choice to make on purpose, not a side effect of list order.

The IAM node role and the subnets are not in the fleet YAML (they belong to the account's network and
security setup, not to the fleet), so they come from the stack config; a missing key fails the stack with
a message naming it:
    fleet:eksNodeRoleArn       ARN of the IAM role the nodes assume
    fleet:eksSubnetIds         JSON list of subnet IDs, e.g. ["subnet-0abc", "subnet-0def"]
    fleet:eksCompactSubnetId   the one subnet (so the one AZ) of compact node groups; needed only if any
"""

from __future__ import annotations

import hashlib
from typing import Any

from . import Program

ROLE_KEY = "eksNodeRoleArn"
SUBNETS_KEY = "eksSubnetIds"
COMPACT_SUBNET_KEY = "eksCompactSubnetId"
AMI_KEY = "eksAmiType"
AMI_BY_KIND = {"gpu": "AL2023_x86_64_NVIDIA", "trainium": "AL2023_x86_64_NEURON"}
# Launch template names are 3-128 characters of [A-Za-z0-9().-/_]; placement group names up to 255 ASCII
# characters, unique per account and region. One name serves both, so one limit: the shorter.
AWS_NAME_LIMIT = 128
# EKS's default launch template sets this; a template of our own must too, or pods lose IMDSv2 access.
IMDS_HOP_LIMIT = 2


def program(spec: dict[str, Any]) -> Program:
    def run() -> None:
        import pulumi
        from pulumi_aws import ec2, eks

        config = pulumi.Config("fleet")
        role_arn = config.get(ROLE_KEY)
        subnets = config.get_object(SUBNETS_KEY)
        for key, value in ((ROLE_KEY, role_arn), (SUBNETS_KEY, subnets)):
            if not value:
                raise pulumi.RunError(_missing(spec, key))
        if not isinstance(subnets, list) or not all(isinstance(s, str) for s in subnets):
            raise pulumi.RunError(f"stack {spec['stack']}: fleet:{SUBNETS_KEY} must be a JSON list of subnet IDs, "
                                  f"got {subnets!r}")
        compact_subnet = None
        if any(pool["placement_policy"] for pool in spec["node_pools"]):
            compact_subnet = config.get(COMPACT_SUBNET_KEY)
            if not compact_subnet or not compact_subnet.strip():
                raise pulumi.RunError(_missing(spec, COMPACT_SUBNET_KEY))
        ami_override = config.get(AMI_KEY)
        for pool in spec["node_pools"]:
            tags = {"fleet.dev/cluster": spec["cluster"], "fleet.dev/pool": pool["pool"]}
            ignore = ["scalingConfig.desiredSize"] if pool["scaling"] == "autoscaler" else []
            args = node_group_args(pool, eks)
            args["subnet_ids"] = subnets
            if pool["placement_policy"] or pool.get("efa_interfaces"):
                template = launch_template(spec, pool, tags, ec2)
                if pool["placement_policy"]:
                    args["subnet_ids"] = [compact_subnet]
                # EKS wants a version number; `latest_version` follows every template update
                args["launch_template"] = eks.NodeGroupLaunchTemplateArgs(
                    id=template.id, version=template.latest_version.apply(str))
            eks.NodeGroup(
                pool["name"],
                cluster_name=spec["kubernetes"]["cluster"],
                node_group_name=pool["name"],
                node_role_arn=role_arn,
                region=spec["region"],
                ami_type=ami_override or AMI_BY_KIND.get(pool["kind"]),
                tags=tags,
                opts=pulumi.ResourceOptions(delete_before_replace=True, ignore_changes=ignore),
                **args,
            )
        pulumi.export("node_groups", [p["name"] for p in spec["node_pools"]])

    return run


def launch_template(spec: dict[str, Any], pool: dict[str, Any], tags: dict[str, str], ec2: Any) -> Any:
    """The launch template of one node group (`ec2` is `pulumi_aws.ec2`): its cluster placement group for
    compact pools, its EFA interfaces for EFA machines. Both resources have stable names, so a replacement
    deletes the old one first."""
    import pulumi

    name = aws_name(spec["stack"], pool["name"])
    opts = pulumi.ResourceOptions(delete_before_replace=True)
    extra: dict[str, Any] = {}
    what = []
    if pool["placement_policy"]:
        group = ec2.PlacementGroup(f"{pool['name']}-placement", name=name, strategy="cluster",
                                   region=spec["region"], tags=tags, opts=opts)
        extra["placement"] = ec2.LaunchTemplatePlacementArgs(group_name=group.name)
        what.append("compact placement")
    if pool.get("efa_interfaces"):
        extra["network_interfaces"] = efa_interfaces(pool["efa_interfaces"], ec2)
        what.append(f"{pool['efa_interfaces']} EFA interfaces")
    return ec2.LaunchTemplate(
        f"{pool['name']}-launch-template",
        name=name,
        description=f"fleet {spec['cluster']}: {' and '.join(what)} for EKS node group {pool['name']}",
        region=spec["region"],
        metadata_options=ec2.LaunchTemplateMetadataOptionsArgs(http_endpoint="enabled",
                                                               http_put_response_hop_limit=IMDS_HOP_LIMIT),
        update_default_version=True,
        tags=tags,
        opts=opts,
        **extra,
    )


def efa_interfaces(count: int, ec2: Any) -> list[Any]:
    """One EFA interface per network card (module docstring)."""
    return [ec2.LaunchTemplateNetworkInterfaceArgs(network_card_index=card, device_index=0 if card == 0 else 1,
                                                   interface_type="efa", delete_on_termination="true")
            for card in range(count)]


def aws_name(stack: str, node_group: str) -> str:
    """`<stack>-<node group>`, e.g. `eks-use1-infra-p5`: unique per account and region as long as fleet cluster
    names are, and the same on every run. A name over AWS_NAME_LIMIT keeps its start and ends in a hash of
    the whole, so it stays unique and stable."""
    name = f"{stack}-{node_group}"
    if len(name) <= AWS_NAME_LIMIT:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[:AWS_NAME_LIMIT - len(digest) - 1]}-{digest}"


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


_EXAMPLES = {SUBNETS_KEY: '\'["subnet-0abc","subnet-0def"]\'', COMPACT_SUBNET_KEY: "subnet-0abc",
             ROLE_KEY: "arn:aws:iam::123456789012:role/eks-nodes"}


def _missing(spec: dict[str, Any], key: str) -> str:
    why = ("compact node groups need it: a cluster placement group lives in one Availability Zone, so they get "
           "one subnet, and the fleet YAML does not hold it"
           if key == COMPACT_SUBNET_KEY else "EKS node groups need it and the fleet YAML does not hold it")
    return (f"stack {spec['stack']}: missing stack config fleet:{key} ({why}); set it with: "
            f"pulumi config set --stack {spec['stack']} fleet:{key} {_EXAMPLES[key]}")
