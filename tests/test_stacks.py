"""The Pulumi programs of `stacks/`, run against Pulumi's mock engine (`pulumi.runtime.set_mocks`).

Each program runs for a spec built to the contract; the mocks record every resource registration (type,
name, inputs, provider, dependencies) and the tests check the resources and their key properties.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest
import stack_specs as specs
from pulumi.runtime import mocks as pulumi_mocks

from reconciler import pipeline
from reconciler.catalog import load_catalog
from stacks import SpecError, program_for, validate_spec

import builders


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]
    provider: str | None
    depends_on: list[str] = field(default_factory=list)  # "Kind/name" of the resources it depends on


# importing pulumi_aws.ec2 warns about a deprecated resource this project does not use
pytestmark = pytest.mark.filterwarnings("ignore:aws.ec2/encryptioncontrol:DeprecationWarning")

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"


class Recorder(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[Registered] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(Registered(args.typ, args.name, args.inputs, args.provider))
        if args.typ == LAUNCH_TEMPLATE:  # the provider computes the version; a new template is version 1
            return f"{args.name}-id", {**args.inputs, "latestVersion": 1}
        return f"{args.name}-id", args.inputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


class DependencyMonitor(pulumi_mocks.MockMonitor):
    """The stock mock monitor does not pass dependencies to Mocks; record them by resource name."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.dependencies: dict[tuple[str, str], list[str]] = {}

    def RegisterResource(self, request: Any) -> Any:
        self.dependencies[(request.type, request.name)] = sorted(_short(urn) for urn in request.dependencies)
        return super().RegisterResource(request)


def _short(urn: str) -> str:
    """`urn:pulumi:s::p::pulumi:pulumi:Stack$kubernetes:kueue.x-k8s.io/v1beta2:Cohort::org` -> `Cohort/org`."""
    *_, typ, name = urn.split("::")
    return f"{typ.rsplit(':', 1)[-1]}/{name}"


@pytest.fixture(autouse=True)
def clean_config() -> Iterator[None]:
    pulumi.runtime.set_all_config({})
    yield
    pulumi.runtime.set_all_config({})


last_exports: dict[str, Any] = {}


def run(spec: dict[str, Any], config: dict[str, str] | None = None) -> list[Registered]:
    """Run the program for `spec` under mocks; return the custom resources it registered, in order.
    The stack's exports are left in last_exports."""
    recorder = Recorder()
    monitor = DependencyMonitor(recorder)
    pulumi.runtime.set_mocks(recorder, project="fleet", stack=spec["stack"], preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(config or {})
    program = program_for(spec)
    last_exports.clear()
    real_export = pulumi.export
    # under mocks the root stack is finished before the program runs, so exports never reach the monitor
    pulumi.export = last_exports.__setitem__
    try:
        pulumi.runtime.test(lambda: program())()
    finally:
        pulumi.export = real_export
    for r in recorder.resources:
        r.depends_on = monitor.dependencies.get((r.typ, r.name), [])
    return recorder.resources


def by_name(resources: list[Registered]) -> dict[str, Registered]:
    return {r.name: r for r in resources}


# --- GKE ---------------------------------------------------------------------------------------------------

def test_gke_tpu_multihost_slice_is_one_compact_node_pool_per_slice() -> None:
    pools = by_name(run(specs.gke_infra()))
    assert sorted(pools) == ["h100-compact", "h100-reserved", "h100-spot", "v5p-8x8x8-s0", "v5p-8x8x8-s1",
                             "v6e-4x4-spot-s0"]
    for name in ("v5p-8x8x8-s0", "v5p-8x8x8-s1"):
        p = pools[name]
        assert p.typ == "gcp:container/nodePool:NodePool"
        assert p.inputs["name"] == name
        assert p.inputs["cluster"] == "ml-use5"
        assert p.inputs["location"] == "us-east5-a"
        assert p.inputs["nodeLocations"] == ["us-east5-a"]
        assert p.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "8x8x8"}
        assert p.inputs["nodeCount"] == 128
        assert "autoscaling" not in p.inputs
        cfg = p.inputs["nodeConfig"]
        assert cfg["machineType"] == "ct5p-hightpu-4t"
        assert cfg["labels"] == {"fleet.dev/pool": "v5p-8x8x8"}
        assert cfg["taints"] == [{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}]
        assert "spot" not in cfg and "guestAccelerators" not in cfg


def test_gke_exports_node_pool_names() -> None:
    run(specs.gke_infra())
    assert last_exports == {"node_pools": [p["name"] for p in specs.gke_infra()["node_pools"]]}


def test_gke_autoscaled_spot_tpu_slice_scales_whole_slice() -> None:
    p = by_name(run(specs.gke_infra()))["v6e-4x4-spot-s0"]
    assert p.inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4}
    assert "nodeCount" not in p.inputs
    assert p.inputs["nodeConfig"]["spot"] is True
    assert p.inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}


def test_gke_gpu_pools_spot_compact_reserved_and_accelerators() -> None:
    pools = by_name(run(specs.gke_infra()))
    gpu = [{"type": "nvidia-h100-80gb", "count": 8, "gpuDriverInstallationConfig": {"gpuDriverVersion": "DEFAULT"}}]
    compact, reserved, spot = pools["h100-compact"], pools["h100-reserved"], pools["h100-spot"]
    assert compact.inputs["placementPolicy"] == {"type": "COMPACT"}  # no TPU topology on GPU pools
    assert compact.inputs["nodeCount"] == 4
    assert compact.inputs["nodeConfig"]["guestAccelerators"] == gpu
    assert compact.inputs["nodeConfig"]["taints"] == [specs.GPU_TAINT]
    assert reserved.inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "ANY_RESERVATION"}
    assert "spot" not in reserved.inputs["nodeConfig"]
    assert spot.inputs["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 32}
    assert spot.inputs["nodeConfig"]["spot"] is True
    assert "placementPolicy" not in spot.inputs and "nodeCount" not in spot.inputs


def test_gke_regional_cluster_takes_zone_from_stack_config() -> None:
    spec = specs.gke_infra()
    spec["zone"] = None
    p = by_name(run(spec, {"fleet:nodeZone": "us-east5-b"}))["v5p-8x8x8-s0"]
    assert p.inputs["location"] == "us-east5"
    assert p.inputs["nodeLocations"] == ["us-east5-b"]


def test_gke_without_any_zone_fails_naming_the_config_key() -> None:
    spec = specs.gke_infra()
    spec["zone"] = None
    with pytest.raises(pulumi.RunError, match=r"fleet:nodeZone.*pulumi config set --stack gke-use5-infra"):
        run(spec)


# --- EKS ---------------------------------------------------------------------------------------------------

EKS_CONFIG = {"fleet:eksNodeRoleArn": "arn:aws:iam::1:role/nodes", "fleet:eksSubnetIds": '["subnet-a","subnet-b"]',
              "fleet:eksCompactSubnetId": "subnet-c"}


def of_type(resources: list[Registered], typ: str) -> dict[str, Registered]:
    return {r.name: r for r in resources if r.typ == typ}


def test_eks_node_groups_on_demand_spot_and_zero() -> None:
    groups = of_type(run(specs.eks_infra(), EKS_CONFIG), NODE_GROUP)
    assert sorted(groups) == ["p5", "p5-spot", "p5en"]
    p5, spot, p5en = groups["p5"], groups["p5-spot"], groups["p5en"]
    assert p5.inputs["clusterName"] == "ml-use1"
    assert p5.inputs["nodeGroupName"] == "p5"
    assert p5.inputs["region"] == "us-east-1"
    assert p5.inputs["nodeRoleArn"] == "arn:aws:iam::1:role/nodes"
    assert spot.inputs["subnetIds"] == p5en.inputs["subnetIds"] == ["subnet-a", "subnet-b"]
    assert p5.inputs["capacityType"] == "ON_DEMAND"
    assert p5.inputs["instanceTypes"] == ["p5.48xlarge"]
    assert p5.inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    assert p5.inputs["scalingConfig"] == {"minSize": 3, "desiredSize": 3, "maxSize": 3}
    assert p5.inputs["labels"] == {"fleet.dev/pool": "p5"}
    assert p5.inputs["taints"] == [specs.GPU_TAINT]
    assert p5.inputs["tags"] == {"fleet.dev/cluster": "eks-use1", "fleet.dev/pool": "p5"}
    assert spot.inputs["capacityType"] == "SPOT"
    assert spot.inputs["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 16}
    # EKS rejects max_size 0: an empty pool keeps max 1, min = desired = 0
    assert p5en.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 1}
    assert p5en.inputs["taints"] == []


def test_eks_compact_group_gets_cluster_placement_group_through_launch_template() -> None:
    resources = run(specs.eks_infra(), EKS_CONFIG)
    groups, templates = of_type(resources, PLACEMENT_GROUP), of_type(resources, LAUNCH_TEMPLATE)
    assert sorted(groups) == ["p5-placement"] and sorted(templates) == ["p5-launch-template"]
    group, template = groups["p5-placement"], templates["p5-launch-template"]
    tags = {"fleet.dev/cluster": "eks-use1", "fleet.dev/pool": "p5"}
    assert group.inputs == {"name": "eks-use1-infra-p5", "strategy": "cluster", "region": "us-east-1", "tags": tags}
    assert template.inputs["name"] == "eks-use1-infra-p5"
    assert template.inputs["region"] == "us-east-1"
    assert template.inputs["placement"] == {"groupName": "eks-use1-infra-p5"}
    assert template.inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpPutResponseHopLimit": 2}
    assert template.depends_on == ["PlacementGroup/p5-placement"]
    # settings EKS forbids in the template, or that may be set in only one place (the node group sets them)
    for key in ("instanceType", "imageId", "iamInstanceProfile", "networkInterfaces", "vpcSecurityGroupIds",
                "instanceInitiatedShutdownBehavior", "hibernationOptions", "keyName", "blockDeviceMappings"):
        assert key not in template.inputs, key
    p5 = of_type(resources, NODE_GROUP)["p5"]
    assert p5.inputs["launchTemplate"] == {"id": "p5-launch-template-id", "version": "1"}
    assert p5.inputs["subnetIds"] == ["subnet-c"]  # one subnet: a cluster placement group lives in one AZ
    assert p5.inputs["instanceTypes"] == ["p5.48xlarge"]
    assert "diskSize" not in p5.inputs and "remoteAccess" not in p5.inputs  # forbidden with a launch template
    assert "LaunchTemplate/p5-launch-template" in p5.depends_on


def test_eks_non_compact_groups_get_no_placement_group_or_launch_template() -> None:
    spec = specs.eks_infra()
    spec["node_pools"][0]["placement_policy"] = None
    config = {k: v for k, v in EKS_CONFIG.items() if k != "fleet:eksCompactSubnetId"}  # not needed then
    resources = run(spec, config)
    assert {r.typ for r in resources} == {NODE_GROUP}
    for group in resources:
        assert "launchTemplate" not in group.inputs
        assert group.inputs["subnetIds"] == ["subnet-a", "subnet-b"]


def test_eks_compact_placement_logs_no_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: warnings.append(message))
    run(specs.eks_infra(), EKS_CONFIG)
    assert warnings == []


@pytest.mark.parametrize("missing", ["fleet:eksNodeRoleArn", "fleet:eksSubnetIds", "fleet:eksCompactSubnetId"])
def test_eks_missing_config_names_the_key(missing: str) -> None:
    config = {k: v for k, v in EKS_CONFIG.items() if k != missing}
    with pytest.raises(pulumi.RunError, match=f"missing stack config {missing}.*--stack eks-use1-infra"):
        run(specs.eks_infra(), config)


def test_eks_compact_subnet_message_says_why() -> None:
    config = {**EKS_CONFIG, "fleet:eksCompactSubnetId": " "}
    with pytest.raises(pulumi.RunError, match=r"eksCompactSubnetId \(compact node groups need it: a cluster "
                                              r"placement group lives in one Availability Zone"):
        run(specs.eks_infra(), config)


def test_eks_placement_names_fit_aws_limits_and_stay_stable() -> None:
    from stacks.aws import AWS_NAME_LIMIT, aws_name

    assert aws_name("eks-use1-infra", "p5") == "eks-use1-infra-p5"
    stack, group = "c" * 63 + "-infra", "g" * 40  # longest fleet cluster and node group names
    assert len(aws_name(stack, group)) <= AWS_NAME_LIMIT
    long_a, long_b = aws_name("x" * 200, "a"), aws_name("x" * 200, "b")
    assert len(long_a) == len(long_b) == AWS_NAME_LIMIT
    assert long_a != long_b and long_a == aws_name("x" * 200, "a")
    assert long_a.startswith("x" * 100)


# --- on-prem -----------------------------------------------------------------------------------------------

def test_onprem_creates_no_cloud_resources_and_exports_expected_pools() -> None:
    assert run(specs.onprem_infra()) == []
    assert last_exports["expected_nodes"] == 16
    assert [p["name"] for p in last_exports["expected_pools"]] == ["h100-owned"]


def test_onprem_exports_expected_pools() -> None:
    from stacks.onprem import expected_pools

    assert expected_pools(specs.onprem_infra()) == [
        {"name": "h100-owned", "pool": "h100-owned", "accelerator": "nvidia-h100-80gb", "kind": "gpu",
         "machine_type": None, "capacity": "owned", "node_count": 16, "labels": {"fleet.dev/pool": "h100-owned"},
         "taints": []}]


# --- Kubernetes (kueue, jobs) ------------------------------------------------------------------------------

def test_kueue_objects_through_one_provider_for_the_cluster() -> None:
    resources = run(specs.kueue())
    providers = [r for r in resources if r.typ == "pulumi:providers:kubernetes"]
    assert [(p.name, p.inputs["context"]) for p in providers] == [("k8s-gke-use5", "gke_ml_us-east5_ml-use5")]
    objects = [r for r in resources if r is not providers[0]]
    assert len(objects) == len(specs.kueue()["objects"]) == 9
    assert {r.provider for r in objects} == {
        "urn:pulumi:gke-use5-kueue::fleet::pulumi:pulumi:Stack$pulumi:providers:kubernetes::k8s-gke-use5"
        "::k8s-gke-use5-id"}
    assert sorted((r.typ, r.name) for r in objects) == [
        ("kubernetes:core/v1:Namespace", "foundation"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "foundation"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:Cohort", "org"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:Cohort", "research"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", "foundation/foundation"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "h100-spot"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor", "v5p-8x8x8"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:Topology", "tpu"),
        ("kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass", "production"),
    ]


def test_manifests_pass_through_whole_including_top_level_fields() -> None:
    objects = {(r.typ.rsplit(":", 1)[-1], r.name): r.inputs for r in run(specs.kueue())}
    assert objects[("WorkloadPriorityClass", "production")] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "production"},
        "value": 1000, "description": "production"}
    assert objects[("LocalQueue", "foundation/foundation")]["spec"] == {"clusterQueue": "foundation"}


def test_kueue_ordering_flavors_and_cohorts_before_cluster_queues_before_local_queues() -> None:
    deps = {(r.typ.rsplit(":", 1)[-1], r.name): r.depends_on for r in run(specs.kueue())}
    assert deps[("Namespace", "foundation")] == []
    assert deps[("Topology", "tpu")] == ["Namespace/foundation"]
    assert deps[("WorkloadPriorityClass", "production")] == ["Namespace/foundation"]
    flavors_need = ["Topology/tpu", "WorkloadPriorityClass/production"]
    assert deps[("ResourceFlavor", "v5p-8x8x8")] == deps[("Cohort", "research")] == flavors_need
    assert deps[("ClusterQueue", "foundation")] == [
        "Cohort/org", "Cohort/research", "ResourceFlavor/h100-spot", "ResourceFlavor/v5p-8x8x8"]
    assert deps[("LocalQueue", "foundation/foundation")] == ["ClusterQueue/foundation"]


def test_no_stack_holds_jobs() -> None:
    """JobSets go by server-side apply (reconciler/apply/jobs.py): a `jobs` spec is refused as a program, and the
    stacks Fleet renders for the builders' fleet create no JobSet, Deployment, LeaderWorkerSet or Service."""
    with pytest.raises(SpecError, match=r"gke-use5-jobs: layer: jobs are applied by server-side apply"):
        program_for(specs.jobs())
    head = pipeline.check(builders.base_files(), load_catalog())
    rendered = pipeline.render(head, pipeline.plan(head), load_catalog())
    kueue = [json.loads(t) for p, t in rendered.items() if p.startswith("stacks/") and p.endswith("-kueue.json")]
    assert any("JobSet" in t for p, t in rendered.items() if p.endswith("-jobs.json"))    # there are jobs
    types = {r.typ.rsplit(":", 1)[-1] for spec in kueue for r in run(spec, {"fleet:kubeContext": "ctx"})}
    assert "ClusterQueue" in types and not types & {"JobSet", "Deployment", "LeaderWorkerSet", "Service"}


def test_kubernetes_without_context_uses_stack_config_or_fails() -> None:
    resources = run(specs.kueue(context=None), {"fleet:kubeContext": "arn:eks:ml-use1"})
    assert [r.inputs["context"] for r in resources if r.typ == "pulumi:providers:kubernetes"] == ["arn:eks:ml-use1"]
    with pytest.raises(pulumi.RunError, match=r"fleet:kubeContext.*never falls back to the current context"):
        run(specs.kueue(context=None))


def test_duplicate_object_is_rejected_before_pulumi_runs() -> None:
    spec = specs.kueue()
    spec["objects"].append(dict(spec["objects"][0]))
    n = len(spec["objects"]) - 1
    with pytest.raises(SpecError, match=rf"gke-use5-kueue: objects\[{n}\]\.metadata\.name: Namespace foundation"):
        program_for(spec)


# --- spec validation ---------------------------------------------------------------------------------------

def _without(spec: dict[str, Any], *path: str | int) -> dict[str, Any]:
    target: Any = spec
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return spec


@pytest.mark.parametrize(("spec", "message"), [
    (_without(specs.gke_infra(), "version"), "gke-use5-infra: version: required key is missing"),
    ({**specs.gke_infra(), "version": 2}, "version: version 2 is not supported"),
    ({**specs.gke_infra(), "layer": "network"}, "layer: 'network' is not one of infra, kueue, jobs"),
    ({**specs.gke_infra(), "stack": "other"}, "stack: 'other' should be gke-use5-infra"),
    (_without(specs.gke_infra(), "kubernetes", "cluster"), "kubernetes.cluster: required key is missing"),
    (_without(specs.gke_infra(), "node_pools"), "node_pools: required key is missing"),
    (_without(specs.gke_infra(), "node_pools", 3, "tpu_topology"), r"node_pools\[3\]\.tpu_topology: required"),
    (_without(specs.kueue(), "objects", 1, "metadata", "name"), r"objects\[1\]\.metadata\.name: required"),
])
def test_invalid_spec_names_stack_and_key(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        program_for(spec)


def test_invalid_pool_values() -> None:
    spec = specs.gke_infra()
    spec["node_pools"][0]["node_count"] = True
    with pytest.raises(SpecError, match=r"node_pools\[0\]\.node_count: expected int or null, got bool True"):
        validate_spec(spec, "x.json")
    spec["node_pools"][0]["node_count"] = -1
    with pytest.raises(SpecError, match=r"node_pools\[0\]\.node_count: scaling `plan` needs a node_count >= 0"):
        validate_spec(spec, "x.json")
    spec = specs.gke_infra()
    spec["node_pools"][2]["autoscaling"] = {"min_nodes": 5, "max_nodes": 1}
    with pytest.raises(SpecError, match=r"x.json: node_pools\[2\]\.autoscaling: needs 0 <= min_nodes <= max_nodes"):
        validate_spec(spec, "x.json")
    spec = specs.eks_infra()
    spec["node_pools"][0]["machine_type"] = None
    with pytest.raises(SpecError, match=r"node_pools\[0\]\.machine_type: a cloud node pool needs"):
        validate_spec(spec, "x.json")


def test_every_fixture_is_valid() -> None:
    for spec in specs.fleet_of_specs():
        assert validate_spec(spec, spec["stack"]) is spec


# --- fast networking (issue 13): EFA on EKS p5/p5en, GPUDirect additional networks on GKE A3 ---------------


def test_eks_efa_machines_get_one_efa_interface_per_network_card() -> None:
    spec = specs.eks_infra()
    for p in spec["node_pools"]:
        p["efa_interfaces"] = 16 if p["machine_type"] == "p5en.48xlarge" else 32
    resources = run(spec, EKS_CONFIG)
    templates = of_type(resources, LAUNCH_TEMPLATE)
    assert sorted(templates) == ["p5-launch-template", "p5-spot-launch-template", "p5en-launch-template"]
    p5 = templates["p5-launch-template"].inputs
    assert p5["placement"] == {"groupName": "eks-use1-infra-p5"}      # compact and EFA in one template
    nics = p5["networkInterfaces"]
    assert len(nics) == 32 and [n["networkCardIndex"] for n in nics] == list(range(32))
    assert nics[0] == {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "efa", "deleteOnTermination": "true"}
    assert all(n["deviceIndex"] == 1 and n["interfaceType"] == "efa" for n in nics[1:])
    assert not any("subnetId" in n or "securityGroups" in n for n in nics)   # EKS: the node group's subnets
    p5en = templates["p5en-launch-template"].inputs
    assert len(p5en["networkInterfaces"]) == 16 and "placement" not in p5en
    groups = of_type(resources, NODE_GROUP)
    assert groups["p5en"].inputs["launchTemplate"] == {"id": "p5en-launch-template-id", "version": "1"}
    assert groups["p5en"].inputs["subnetIds"] == ["subnet-a", "subnet-b"]   # not compact: every subnet
    assert sorted(of_type(resources, PLACEMENT_GROUP)) == ["p5-placement"]


GPU_NETWORKS = '[' + ','.join(f'{{"network":"gpu-vpc-{i}","subnetwork":"gpu-sub-{i}"}}' for i in range(9)) + ']'


def test_gke_a3_pools_get_gvnic_and_one_additional_network_per_gpu_nic() -> None:
    spec = specs.gke_infra()
    pools = {p["name"]: p for p in spec["node_pools"]}
    pools["h100-compact"].update(machine_type="a3-megagpu-8g", gpu_direct={"kind": "tcpxo", "networks": 8})
    pools["h100-reserved"].update(machine_type="a3-highgpu-8g", gpu_direct={"kind": "tcpx", "networks": 4})
    pools["h100-spot"]["gpu_direct"] = None
    made = by_name(run(spec, {"fleet:gpuNetworks": GPU_NETWORKS}))
    mega, high = made["h100-compact"].inputs, made["h100-reserved"].inputs
    assert mega["nodeConfig"]["gvnic"] == {"enabled": True}
    assert mega["networkConfig"]["additionalNodeNetworkConfigs"] == [
        {"network": f"gpu-vpc-{i}", "subnetwork": f"gpu-sub-{i}"} for i in range(8)]
    assert len(high["networkConfig"]["additionalNodeNetworkConfigs"]) == 4
    assert "networkConfig" not in made["h100-spot"].inputs and "gvnic" not in made["h100-spot"].inputs["nodeConfig"]
    assert "networkConfig" not in made["v5p-8x8x8-s0"].inputs


def test_gke_gpu_direct_without_enough_networks_names_the_config_key() -> None:
    spec = specs.gke_infra()
    spec["node_pools"][0].update(machine_type="a3-ultragpu-8g", gpu_direct={"kind": "rdma", "networks": 9})
    with pytest.raises(pulumi.RunError, match=r"needs 9 additional node networks from the stack config "
                       r"fleet:gpuNetworks.*\(has 2\); set it with: pulumi config set --stack gke-use5-infra"):
        run(spec, {"fleet:gpuNetworks": '[{"network":"a","subnetwork":"b"},{"network":"c","subnetwork":"d"}]'})


def test_fast_networking_keys_are_checked() -> None:
    spec = specs.eks_infra()
    spec["node_pools"][0]["efa_interfaces"] = -1
    with pytest.raises(SpecError, match=r"node_pools\[0\].efa_interfaces: needs a count >= 0"):
        validate_spec(spec, "eks-use1-infra")
    spec = specs.gke_infra()
    spec["node_pools"][0]["gpu_direct"] = {"kind": "infiniband", "networks": 4}
    with pytest.raises(SpecError, match=r"node_pools\[0\].gpu_direct.kind: 'infiniband' is not one of"):
        validate_spec(spec, "gke-use5-infra")
