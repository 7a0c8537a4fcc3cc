"""Queued pools (`provisioning: queued`, GKE flex-start) past the plan: the infra stack spec, the GKE program
under Pulumi's mocks and the spec contract's checks.

A queued pool's nodes come only from the ProvisioningRequests Kueue creates for admitted workloads, so no stack
sets its node count and the loop never resizes it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import stack_specs as specs
from test_stacks import GPU_NETWORKS, Registered, by_name, clean_config, run  # noqa: F401  (clean_config: autouse)
from test_workloads import queued_fleet, validated

from reconciler.catalog import load_catalog
from reconciler.plan import plan as make_plan
from reconciler.render import render
from stacks import SpecError, validate_spec

from builders import with_files

NODE_POOL = "gcp:container/nodePool:NodePool"
QUEUED_ARGS = {"queuedProvisioning": {"enabled": True}, "management": {"autoRepair": False}}


def queued_h100_fleet() -> dict[str, bytes]:
    """queued_fleet (gke-use5: the queued TPU v6e 4x4 pool `v6e-flex`, max 4) with gke-usc1's H100 pool queued too
    (a GPU pool, max 8, compact placement); gke-usc1 keeps its fixed TPU pool and its spot pool."""
    gke = with_files({})["fleet/clusters/gke-usc1.yaml"].decode().replace(
        "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8\n",
        "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8\n    provisioning: queued\n")
    return {**queued_fleet(), "fleet/clusters/gke-usc1.yaml": gke.encode()}


def infra_specs() -> dict[str, dict[str, Any]]:
    v = validated(queued_h100_fleet())
    files = render(v, make_plan(v), load_catalog())
    return {c: json.loads(files[f"stacks/{c}-infra.json"]) for c in ("gke-use5", "gke-usc1")}


def _gke(resources: list[Registered]) -> dict[str, dict[str, Any]]:
    return {name: r.inputs for name, r in by_name(resources).items() if r.typ == NODE_POOL}


# --- the GKE program, under Pulumi's mocks ------------------------------------------------------------------


def test_a_queued_tpu_pool_is_one_queued_provisioning_node_pool_per_slice_from_zero() -> None:
    """Before: one node pool of 4 hosts (`node_count`, the plan's one requested slice), bought at once at the
    on-demand price and no queued-provisioning pool for the ProvisioningRequest. Now every slice up to max is a
    node pool GKE creates empty and grows, whole, only for a granted request."""
    made = _gke(run(infra_specs()["gke-use5"], {"fleet:nodeZone": "us-east5-a"}))
    assert sorted(made) == [f"v6e-flex-s{i}" for i in range(4)]
    for p in made.values():
        assert "nodeCount" not in p and "initialNodeCount" not in p
        assert {k: p[k] for k in QUEUED_ARGS} == QUEUED_ARGS
        assert p["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4}          # a 4x4 slice: 4 hosts
        assert p["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x4"}
        cfg = p["nodeConfig"]
        assert cfg["flexStart"] is True and "spot" not in cfg
        assert cfg["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
        assert cfg["machineType"] == "ct6e-standard-4t"


def test_a_queued_gpu_pool_gets_gke_total_limits_and_the_other_pools_stay_as_they_were() -> None:
    """GKE's queued-provisioning node pool for GPUs: `--num-nodes=0 --total-max-nodes N --location-policy=ANY`.
    The cluster's spot pool (`scaling: plan`, no job: 0 nodes) keeps its node count, with none of the queued
    settings (its fixed TPU pool has no slice: no job there)."""
    made = _gke(run(infra_specs()["gke-usc1"], {"fleet:gpuNetworks": GPU_NETWORKS}))
    h100 = made["h100"]
    assert "nodeCount" not in h100 and {k: h100[k] for k in QUEUED_ARGS} == QUEUED_ARGS
    assert h100["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 8, "locationPolicy": "ANY"}
    assert h100["nodeConfig"]["flexStart"] is True
    assert h100["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert h100["nodeConfig"]["guestAccelerators"][0]["type"] == "nvidia-h100-80gb"
    assert sorted(made) == ["h100", "h100-spot"]
    spot = made["h100-spot"]
    assert spot["nodeCount"] == 0 and spot["nodeConfig"]["spot"] is True
    assert not {"queuedProvisioning", "management", "autoscaling"} & set(spot)
    assert not {"flexStart", "reservationAffinity"} & set(spot["nodeConfig"])


# --- the stack spec contract ------------------------------------------------------------------------------


def _queued_entry(**over: Any) -> dict[str, Any]:
    entry = specs.pool("h100-flex", "h100-flex", scaling="autoscaler", node_count=None,
                      autoscaling={"min_nodes": 0, "max_nodes": 8}, provisioning="queued",
                      guest_accelerator={"type": "nvidia-h100-80gb", "count": 8}, taints=[specs.GPU_TAINT])
    entry.update(over)
    return entry


@pytest.mark.parametrize(("over", "message"), [
    ({"scaling": "plan", "node_count": 4, "autoscaling": None}, r"node_pools\[6\]\.provisioning: a queued node "
     r"pool autoscales from zero .*got scaling 'plan', node_count 4"),
    ({"autoscaling": {"min_nodes": 2, "max_nodes": 8}}, r"node_pools\[6\]\.provisioning: .*min_nodes 2"),
    ({"capacity": "spot"}, r"node_pools\[6\]\.provisioning: queued provisioning is flex-start capacity, neither "
     r"spot nor a reservation; got capacity 'spot'"),
    ({"provisioning": "flex"}, r"node_pools\[6\]\.provisioning: 'flex' is not one of fixed, queued"),
])
def test_a_queued_entry_that_would_set_a_size_or_buy_other_capacity_is_rejected(over: dict[str, Any],
                                                                                 message: str) -> None:
    spec = specs.gke_infra()
    spec["node_pools"].append(_queued_entry(**over))
    with pytest.raises(SpecError, match=message):
        validate_spec(spec, "gke-use5-infra.json")
    spec["node_pools"][6] = _queued_entry()
    assert validate_spec(spec, "gke-use5-infra.json") is spec


def test_a_queued_entry_in_an_eks_or_on_prem_stack_is_rejected_not_bought_as_a_node_group() -> None:
    """Only GKE has queued-provisioning node pools: an EKS program would have made an ordinary autoscaled node
    group of it, on-prem would have exported it as expected nodes."""
    for spec, n in ((specs.eks_infra(), 3), (specs.onprem_infra(), 1)):
        entry = _queued_entry(machine_type=spec["node_pools"][0]["machine_type"])
        spec["node_pools"].append(entry)
        with pytest.raises(SpecError, match=rf"{spec['stack']}: node_pools\[{n}\]\.provisioning: queued "
                           rf"provisioning is GKE's .*a {spec['provider']} stack has none"):
            validate_spec(spec, spec["stack"])


def test_validate_names_the_file_line_and_field_of_a_queued_pool_off_gke() -> None:
    """`fleet validate` already refuses a queued pool on EKS (and on-prem, Slurm): located, with a fix."""
    from reconciler.pipeline import check
    eks = ("name: eks-use1\nprovider: aws\nregion: us-east-1\nkubernetes: {cluster: ml-use1}\npools:\n"
           "  - name: p5\n    accelerator: nvidia-h100-80gb\n    max: 4\n    provisioning: queued\n")
    [p] = check(with_files({"fleet/clusters/eks-use1.yaml": eks}), load_catalog()).errors
    assert (p.path, p.line, p.field) == ("fleet/clusters/eks-use1.yaml", 9, "pools[0].provisioning")
    assert "GKE's flex-start" in p.message and "remove `provisioning`" in p.hint
