"""`fleet apply` never lets Pulumi replace a node pool (or delete one the plan keeps) unreviewed: the engine's
capture of Pulumi's step events, the refusal through the orchestrator, `--preview`'s listing, the CLI flag."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import stack_specs as specs
from kube_api import KubeCluster, clusters
from kube_objects import job_objects
from test_apply import INFRA, KUEUE, FakeAutoStack, FakeEngine, FakeUi, fake_engine, stack_specs
from test_reconcile import Rig, fleet_files, running, slice_nodes

from reconciler.apply import orchestrate
from reconciler.apply.pool_guard import Step
from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[1]
NODE_POOL, NODE_GROUP = "gcp:container/nodePool:NodePool", "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def urn(stack: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::fleet::{type_}::{name}"


def replaced(stack: str, type_: str, name: str, *keys: str) -> list[Step]:
    """The three steps Pulumi emits for a delete-before-replace replacement (the keys on replace and create)."""
    u = urn(stack, type_, name)
    return [Step("delete-replaced", u, type_), Step("replace", u, type_, keys, keys),
            Step("create-replacement", u, type_, keys, keys)]


QUEUED = replaced("gke-use5-infra", NODE_POOL, "v6e-4x4-spot-s0", "queuedProvisioning")


class EventStack(FakeAutoStack):
    """The Automation API's stack whose preview reports `events` through `on_event`, as Pulumi's event log does."""

    def __init__(self, events: list[Any]) -> None:
        super().__init__()
        self.events = events

    def preview(self, **kwargs: Any) -> Any:
        result = super().preview(**kwargs)
        for event in self.events:
            kwargs["on_event"](event)
        return result


def test_the_engine_captures_each_resource_step_of_the_preview(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    from pulumi.automation.events import DiagnosticEvent, EngineEvent, OpType, ResourcePreEvent, StepEventMetadata

    pool = urn("gke-use5-infra", NODE_POOL, "v6e-4x4-spot-s0")
    events = [
        EngineEvent(1, 0, diagnostic_event=DiagnosticEvent("refreshing", "never", "info")),
        EngineEvent(2, 0, resource_pre_event=ResourcePreEvent(StepEventMetadata(
            OpType.SAME, urn("gke-use5-infra", NODE_POOL, "h100-spot"), NODE_POOL, "gcp"))),
        EngineEvent.from_json({"sequence": 3, "timestamp": 0, "resourcePreEvent": {"metadata": {
            "op": "replace", "urn": pool, "type": NODE_POOL, "provider": "gcp",
            "keys": ["queuedProvisioning"], "diffs": ["queuedProvisioning", "nodeCount"]}}}),
        EngineEvent.from_json({"sequence": 4, "timestamp": 0, "resourcePreEvent": {"metadata": {
            "op": "update", "urn": urn("gke-use5-infra", NODE_POOL, "h100"), "type": NODE_POOL, "provider": "gcp",
            "diffs": ["nodeConfig"], "detailedDiff": {"nodeConfig.machineType": {"diffKind": "update",
                                                                                 "inputDiff": True}}}}}),
    ]
    stack = EventStack(events)
    eng, _ = fake_engine(monkeypatch, tmp_path, stack)
    got = eng.preview_steps(specs.gke_infra())
    assert got.counts == {"create": 2, "same": 1}
    assert got.steps == (Step("same", urn("gke-use5-infra", NODE_POOL, "h100-spot"), NODE_POOL),
                         Step("replace", pool, NODE_POOL, ("queuedProvisioning",), ("queuedProvisioning", "nodeCount")),
                         Step("update", urn("gke-use5-infra", NODE_POOL, "h100"), NODE_POOL, (), ("nodeConfig",),
                              ("nodeConfig.machineType",)))
    assert stack.calls[0][1]["refresh"] is True


def test_apply_refuses_a_pool_replacement_and_applies_nothing() -> None:
    engine, ui = FakeEngine(steps={"gke-use5-infra": QUEUED}), FakeUi()
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=ui)
    assert engine.calls == [("preview", s) for s in INFRA]             # every infra stack checked, none updated
    assert {r.stack: r.status for r in results} == {
        **dict.fromkeys(INFRA + KUEUE, "skipped"), "gke-use5-infra": "failed"}
    (refused,) = [r for r in results if r.status == "failed"]
    assert refused.error == (
        "stack gke-use5-infra: refusing to update: REPLACES node pool gke-use5/v6e-4x4-spot-s0 (NodePool, forced by "
        "queuedProvisioning): its nodes go, and every job on them stops; the plan does not show this")
    assert "`status: draining`" in refused.hint and "--allow-replace gke-use5/v6e-4x4-spot-s0" in refused.hint
    assert "eks-use1-infra: skipped: not applied: node pool replacement refused (gke-use5-infra)" in ui.lines
    assert orchestrate.summary(results, preview=False) == (
        "0 of 6 stack(s) applied; failed: gke-use5-infra; skipped: eks-use1-infra, onprem-sjc-infra, eks-use1-kueue, "
        "gke-use5-kueue, onprem-sjc-kueue; nothing applied: 1 node pool(s) would be replaced, re-created or deleted: "
        "gke-use5/v6e-4x4-spot-s0")


def test_allow_replace_names_the_pool_and_each_pool_is_named_on_its_own() -> None:
    steps = {"gke-use5-infra": QUEUED,
             "eks-use1-infra": [*replaced("eks-use1-infra", NODE_GROUP, "p5", "capacityType"),
                                *replaced("eks-use1-infra", LAUNCH_TEMPLATE, "p5-launch-template", "name")]}
    engine = FakeEngine(steps=steps)
    allowed = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi(),
                              allow={"gke-use5/v6e-4x4-spot-s0", "eks-use1/p5"})
    assert engine.calls == [("preview", s) for s in INFRA] + [("up", s) for s in INFRA + KUEUE]
    assert all(r.status == "ok" for r in allowed)
    engine = FakeEngine(steps=steps)
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi(),
                              allow={"gke-use5/v6e-4x4-spot-s0", "gke-use5/p5"})   # p5 of another cluster
    assert [c for c in engine.calls if c[0] == "up"] == []
    (refused,) = [r for r in results if r.status == "failed"]
    assert refused.stack == "eks-use1-infra"     # the node group and its launch template: one pool, one message
    assert [d.describe() for d in refused.disruptions] == [
        "REPLACES node pool eks-use1/p5 (NodeGroup, LaunchTemplate, forced by capacityType, name): its nodes go, "
        "and every job on them stops; the plan does not show this"]


def test_a_pool_the_plan_keeps_may_not_be_deleted_one_it_released_may() -> None:
    gone = Step("delete", urn("gke-use5-infra", NODE_POOL, "v5p-8x8x8-s2"), NODE_POOL)      # not in the spec
    kept = Step("delete", urn("gke-use5-infra", NODE_POOL, "h100-spot"), NODE_POOL)         # in the spec
    engine = FakeEngine(steps={"gke-use5-infra": [gone]})
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi())
    assert all(r.status == "ok" for r in results) and ("up", "gke-use5-infra") in engine.calls
    engine = FakeEngine(steps={"gke-use5-infra": [gone, kept]})
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi())
    (refused,) = [r for r in results if r.status == "failed"]
    assert [d.ref for d in refused.disruptions] == ["gke-use5/h100-spot"]
    assert "DELETES node pool gke-use5/h100-spot although the plan keeps it (NodePool)" in refused.error
    assert [c for c in engine.calls if c[0] == "up"] == []


def updated(stack: str, type_: str, name: str, diffs: tuple[str, ...], paths: tuple[str, ...] = ()) -> Step:
    return Step("update", urn(stack, type_, name), type_, (), diffs, paths)


def test_an_update_that_re_creates_a_pools_nodes_is_refused_like_a_replacement() -> None:
    """Since the Google provider's 5.10 a GKE machine type change is an in-place update that migrates the pool's
    nodes, and an EKS node group following its launch template's latest version rolls its nodes when the template
    changes: Pulumi says `update`, the jobs on the nodes stop all the same."""
    gke = [updated("gke-use5-infra", NODE_POOL, "h100-spot", ("nodeConfig",), ("nodeConfig.machineType",))]
    eks = [updated("eks-use1-infra", LAUNCH_TEMPLATE, "p5-launch-template", ("networkInterfaces",),
                   ("networkInterfaces[1].interfaceType",)),
           updated("eks-use1-infra", NODE_GROUP, "p5", ("launchTemplate",), ("launchTemplate.version",))]
    engine = FakeEngine(steps={"gke-use5-infra": gke, "eks-use1-infra": eks})
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi())
    assert [c for c in engine.calls if c[0] == "up"] == []
    assert {r.stack: [d.describe() for d in r.disruptions] for r in results if r.status == "failed"} == {
        "gke-use5-infra": ["RE-CREATES THE NODES OF node pool gke-use5/h100-spot (NodePool, forced by "
                           "nodeConfig.machineType): its nodes go, and every job on them stops; the plan does not "
                           "show this"],
        "eks-use1-infra": ["RE-CREATES THE NODES OF node pool eks-use1/p5 (LaunchTemplate, NodeGroup, forced by "
                           "networkInterfaces[1].interfaceType, launchTemplate.version): its nodes go, and every job "
                           "on them stops; the plan does not show this"]}
    engine = FakeEngine(steps={"gke-use5-infra": gke, "eks-use1-infra": eks})
    allowed = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi(),
                              allow={"gke-use5/h100-spot", "eks-use1/p5"})
    assert all(r.status == "ok" for r in allowed) and ("up", "gke-use5-infra") in engine.calls


def test_a_gke_pool_moved_to_another_zone_in_place_is_refused() -> None:
    """The Google provider updates a node pool's `node_locations` in place, and GKE removes the nodes of a zone the
    pool leaves (UpdateNodePoolRequest.locations): each pool has one zone (stacks/gcp.py), so a new
    `fleet:nodeZone` is an `update` that takes every node, and it was applied unrefused."""
    step = updated("gke-use5-infra", NODE_POOL, "h100-spot", ("nodeLocations",), ("nodeLocations[0]",))
    engine = FakeEngine(steps={"gke-use5-infra": [step]})
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi())
    (refused,) = [r for r in results if r.status == "failed"]
    assert [(d.ref, d.op, d.keys) for d in refused.disruptions] == [
        ("gke-use5/h100-spot", "roll", ("nodeLocations[0]",))]
    assert [c for c in engine.calls if c[0] == "up"] == []


@pytest.mark.parametrize("step", [
    updated("gke-use5-infra", NODE_POOL, "h100-spot", ("nodeConfig",), ("nodeConfig.labels.team",)),
    updated("gke-use5-infra", NODE_POOL, "h100-spot", ("nodeConfig",), ("nodeConfig.taints[0].value",)),
    updated("gke-use5-infra", NODE_POOL, "h100-spot", ("autoscaling",), ("autoscaling.totalMaxNodeCount",)),
    updated("gke-use5-infra", NODE_POOL, "h100-compact", ("nodeCount",)),
    updated("eks-use1-infra", NODE_GROUP, "p5", ("scalingConfig",), ("scalingConfig.desiredSize",)),
    updated("eks-use1-infra", NODE_GROUP, "p5", ("labels", "taints"), ("labels.team", "taints[0].effect")),
    updated("eks-use1-infra", LAUNCH_TEMPLATE, "p5-launch-template", ("tags", "tagsAll"), ("tags.owner",)),
], ids=["gke-labels", "gke-taints", "gke-autoscaling", "gke-node-count", "eks-scaling", "eks-labels-taints",
        "eks-template-tags"])
def test_an_update_the_provider_makes_on_the_running_nodes_is_applied(step: Step) -> None:
    """Labels, taints, scaling and tags change on the running nodes (GKE's and EKS's node pool update APIs): no
    refusal, so the loop's resizes and a label edit apply as before."""
    stack = "gke-use5-infra" if step.type == NODE_POOL else "eks-use1-infra"
    engine = FakeEngine(steps={stack: [step]})
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=False, ui=FakeUi())
    assert all(r.status == "ok" and not r.disruptions for r in results) and ("up", stack) in engine.calls


def test_without_a_detailed_diff_a_node_config_change_counts_as_a_roll() -> None:
    """A step with no detailed diff says only that `nodeConfig` changed: a label edit cannot be told from a machine
    type change, so the apply is refused (the message names the property; `--allow-replace` proceeds)."""
    step = updated("gke-use5-infra", NODE_POOL, "h100-spot", ("nodeConfig", "nodeCount"))
    results = orchestrate.run(orchestrate.select(stack_specs(), None), FakeEngine(steps={"gke-use5-infra": [step]}),
                              preview=False, ui=FakeUi())
    (refused,) = [r for r in results if r.status == "failed"]
    assert [(d.ref, d.op, d.keys) for d in refused.disruptions] == [("gke-use5/h100-spot", "roll", ("nodeConfig",))]


def test_preview_lists_each_replacement_under_its_stack_and_refuses_nothing() -> None:
    engine, ui = FakeEngine(steps={"gke-use5-infra": QUEUED}), FakeUi()
    results = orchestrate.run(orchestrate.select(stack_specs(), None), engine, preview=True, ui=ui)
    assert engine.calls == [("preview", s) for s in INFRA + KUEUE] and all(r.status == "ok" for r in results)
    line = next(line for line in ui.lines if line.startswith("gke-use5-infra"))
    assert line == ("gke-use5-infra: preview: to create 1, to update 1, to delete 0, same 1\n"
                    "  !! REPLACES node pool gke-use5/v6e-4x4-spot-s0 (NodePool, forced by queuedProvisioning): its "
                    "nodes go, and every job on them stops; the plan does not show this")
    assert orchestrate.summary(results, preview=True) == (
        "6 of 6 stack(s) previewed; 1 node pool(s) replaced, re-created or deleted: gke-use5/v6e-4x4-spot-s0 "
        "(`fleet apply` refuses unless `--allow-replace CLUSTER/POOL` names each one)")


@pytest.mark.parametrize("value", ["gke-use5", "/v6e", "gke-use5/", "a/b/c"])
def test_allow_replace_must_name_cluster_and_pool(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["apply", "--repo", str(ROOT), "--preview", "--allow-replace", value])
    assert e.value.code == 2
    assert capsys.readouterr().err.startswith(f"error: --allow-replace {value!r}: expected CLUSTER/POOL")


# --- the reconcile loop (tests/test_reconcile.py's rig): it reports and holds -------------------------------

@pytest.fixture
def servers() -> Iterator[dict[str, KubeCluster]]:
    with clusters("a", "b", "mgmt") as cs:
        yield cs


def test_the_loop_never_replaces_a_pool_on_its_own_it_reports_and_holds(tmp_path: Path,
                                                                        servers: dict[str, KubeCluster]) -> None:
    """test_reconcile's idle release, but Pulumi's preview of the stack would replace a node pool (a Fleet upgrade
    made a property the provider cannot change in place): the loop makes no update, and says why."""
    a = servers["a"]
    slice_nodes(a, 0)
    a.add(*running("vision", "train"))
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler()
    pool = "urn:pulumi:a-infra::fleet::gcp:container/nodePool:NodePool::v5p-s0"
    rig.runner.steps["a-infra"] = (Step("replace", pool, "gcp:container/nodePool:NodePool", ("queuedProvisioning",)),)
    loop.cycle()
    for obj in job_objects("vision", "train", "v5p", phase="succeeded", ended=65):
        obj["metadata"].setdefault("annotations", {})["fleet.dev/units"] = "0"
        a.add(obj)
    rig.at(10)
    loop.cycle()
    rig.at(40)
    (release,) = loop.cycle().results
    assert (release.action.kind, release.status) == ("resize", "failed")
    assert release.message.startswith("stack a-infra: refusing to update: REPLACES node pool a/v5p-s0 (NodePool, "
                                      "forced by queuedProvisioning)")
    assert "--allow-replace a/v5p-s0" in release.hint
    assert [s for s in rig.runner.ups if s["layer"] == "infra"] == []
    rig.runner.steps["a-infra"] = (Step("delete", pool, "gcp:container/nodePool:NodePool"),)   # the release itself
    rig.at(80)
    (release,) = loop.cycle().results
    assert release.status == "done" and rig.runner.slices("a-infra") == []


def test_an_allowance_that_names_no_replaced_pool_is_said_not_silently_ignored() -> None:
    """`--allow-replace gke-use5/p5` where the previews replace only eks-use1/p5 (a cluster mistyped): the apply is
    refused for eks-use1/p5, and the allowance that allowed nothing is said, so the mistake is seen."""
    steps = {"eks-use1-infra": replaced("eks-use1-infra", NODE_GROUP, "p5", "capacityType")}
    ui = FakeUi()
    results = orchestrate.run(orchestrate.select(stack_specs(), None), FakeEngine(steps=steps), preview=False, ui=ui,
                              allow={"gke-use5/p5", "eks-use1/nope"})
    assert [r.stack for r in results if r.status == "failed"] == ["eks-use1-infra"]
    notes = [line for line in ui.lines if line.startswith("note: --allow-replace")]
    assert notes == [f"note: --allow-replace {ref} names no node pool this apply would replace, re-create or delete: "
                     "it allows nothing (check the name against `fleet apply --preview`)"
                     for ref in ("eks-use1/nope", "gke-use5/p5")], ui.lines
