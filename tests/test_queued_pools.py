"""Queued pools (`provisioning: queued`, GKE flex-start) end to end past the plan: the infra stack spec, the GKE
program under Pulumi's mocks, the spec contract's checks, the reconcile loop and the simulator's `fleet` policy.

A queued pool's nodes come only from the ProvisioningRequests Kueue creates for admitted workloads, so no stack
sets its node count and the loop never resizes it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import stack_specs as specs
from test_reconcile_decide import FACTS, KNOBS, at, cluster, place, plan, slice_nodes, snap
from test_stacks import GPU_NETWORKS, Registered, by_name, clean_config, run  # noqa: F401  (clean_config: autouse)
from test_workloads import queued_fleet, validated

from reconciler.catalog import load_catalog
from reconciler.plan import plan as make_plan
from reconciler.plan.types import PoolPlan
from reconciler.reconcile.decide import LoopMemory, decide
from reconciler.render import render
from reconciler.simulate import loop as sim_loop
from reconciler.simulate.engine import SCALE_DOWN_S, Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.policies import make
from reconciler.simulate.trace import Trace, load_trace, write_lines
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


# --- the reconcile loop ---------------------------------------------------------------------------------------


def queued_pool(cl: str, name: str, target: int) -> PoolPlan:
    return PoolPlan(cl, name, 0, 4, target, target, 16, 21.6, 21.6 * target, provisioning="queued")


def test_the_loop_never_resizes_a_queued_pool() -> None:
    """Before: a job placed on a queued pool made the loop grow it (`resize` to the planned count, a stack run
    setting a node count the spec no longer has, asked again and again since no node comes before the grant),
    and idle granted slices were shrunk by it. Now the job is only started: Kueue's ProvisioningRequest asks
    GKE for the slice; GKE's autoscaler removes it when unneeded."""
    new = decide(plan(place("vision/train", "a", "v6e", (0,), status="new"), pools=(queued_pool("a", "v6e", 1),)),
                 snap(cluster("a")), LoopMemory(), KNOBS, at(0), jobs=FACTS)
    assert [(a.kind, a.job or a.pool) for a in new.actions] == [("start", "vision/train")]
    assert new.memory.targets == {}
    idle = snap(cluster("a", *slice_nodes("v6e", 0, 1)))
    first = decide(plan(pools=(queued_pool("a", "v6e", 0),)), idle, LoopMemory(), KNOBS, at(0), jobs=FACTS)
    ripe = decide(plan(pools=(queued_pool("a", "v6e", 0),)), idle, first.memory, KNOBS, at(60), jobs=FACTS)
    assert first.actions == ripe.actions == ()


# --- the simulator's `fleet` policy -------------------------------------------------------------------------


def test_the_simulated_loop_sends_no_resize_for_a_queued_pool_and_its_granted_slice_goes_once_idle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet simulate` runs the loop's own decision: the job's start provisions the slice (the grant, after
    QUEUED_GRANT_MINUTES), no resize ever names the queued pool, and the slice is released SCALE_DOWN_S after
    the job ends, as GKE's autoscaler removes an unneeded node."""
    asked: list[tuple[str, str]] = []
    real = sim_loop.SimActuator.resize

    def resize(self: sim_loop.SimActuator, cl: str, actions: Any) -> Any:
        asked.extend((cl, a.pool) for a in actions)
        return real(self, cl, actions)

    monkeypatch.setattr(sim_loop.SimActuator, "resize", resize)
    job = json.dumps({"name": "t", "team": "vision", "options": [{"accelerator": "tpu-v6e", "topology": "4x4"}],
                      "duration_hours": 2, "checkpoint_minutes": 30, "image": "img:1", "submit_at_minutes": 0})
    tr = load_trace("t.jsonl", write_lines([job]).encode(), queued_fleet(), load_catalog())
    assert isinstance(tr, Trace), tr
    sim = Engine(tr, FaultModel.off(), 1, 1, 60)
    sim.run(make("fleet", sim))
    j, p = sim.jobs[0], sim.pools["gke-use5/v6e-flex"]
    assert j.state == "done" and j.finish_s is not None
    assert ("gke-use5", "v6e-flex") not in asked
    assert p.present == set()
    released = max(u.since_s for u in p.units)
    assert j.finish_s + SCALE_DOWN_S <= released <= j.finish_s + SCALE_DOWN_S + 60
