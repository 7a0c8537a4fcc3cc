"""The loop applies a cluster's Kueue objects that git changed, not only its quotas (reconcile/kueuesync.py with
`render.kueue_config`): `fleet apply` applies a merge's cohorts, fair-sharing weights, priority classes and
flavors, and when that apply failed the loop used to leave them stale for good, since its memory held quotas only.
Now it applies them once, retries them while the update fails, and writes nothing while nothing changes."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from kube_api import clusters
from test_kueue_flavors import NOW, empty, fleet
from test_reconcile import Rig, StackRunner, fleet_files

from reconciler.apply.orchestrate import StackFailed
from reconciler.catalog import load_catalog
from reconciler.reconcile.decide import Action, Knobs, LoopMemory, settle
from reconciler.reconcile.step import Step, step
from reconciler.render import kueue_config, pool_and_kueue_docs
from reconciler.validate import Validated

from builders import PRIORITIES, TEAMS, job

JOBS = {"jobs/vision/small.yaml": job("small", count=8)}
HEAVIER = TEAMS.replace("    weight: 2\n", "    weight: 3\n")
URGENT = PRIORITIES.replace("classes:\n", "classes:\n  - {name: urgent, value: 2000}\n")


def cycle(v: Validated, minutes: float, memory: LoopMemory, last: Step | None = None) -> Step:
    return step(v, empty(minutes), memory, last_snapshot=last.snapshot if last else None,
                last_plan=last.plan if last else None, knobs=Knobs(), now=NOW + timedelta(minutes=minutes),
                kueue=kueue_config(v, load_catalog()))


def kueue(s: Step) -> list[Action]:
    return [a for a in s.decision.actions if a.kind == "kueue"]


def test_a_weight_and_a_priority_class_changed_in_git_update_every_cluster_once_naming_them() -> None:
    before = fleet(JOBS)
    after = fleet({**JOBS, "policies/teams.yaml": HEAVIER, "policies/priorities.yaml": URGENT})
    first = cycle(before, 0, LoopMemory())
    assert [a.cluster for a in kueue(first)] == ["gke-usc1", "onprem-sjc"]
    assert kueue(cycle(before, 1, first.decision.memory, first)) == []      # nothing changed: no update
    second = cycle(after, 2, first.decision.memory, first)
    assert second.plan.quotas == first.plan.quotas                                    # the quotas did not move
    assert [(a.cluster, a.reason) for a in kueue(second)] == [
        (c, "2 other Kueue object(s) changed in git: ClusterQueue vision changed; WorkloadPriorityClass urgent added")
        for c in ("gke-usc1", "onprem-sjc")]
    assert kueue(cycle(after, 3, second.decision.memory, second)) == []


def test_the_lines_follow_the_rendered_objects_of_the_stack() -> None:
    """Each line is an object of the cluster's Kueue stack; the queues' lines leave out the quotas."""
    v = fleet(JOBS)
    from reconciler.plan import plan
    spec = pool_and_kueue_docs(v, plan(v), load_catalog(), {"gke-usc1-kueue"})["gke-usc1-kueue"]
    rendered = {f"{o['kind']} {o['metadata']['name']}" for o in spec["objects"]}
    lines = kueue_config(v, load_catalog())["gke-usc1"]
    assert {x.rsplit(" ", 1)[0].replace("vision/", "").replace("lang/", "") for x in lines} == rendered
    assert "ClusterQueue vision" in {x.rsplit(" ", 1)[0] for x in lines}
    assert kueue_config(fleet({**JOBS, "jobs/vision/more.yaml": job("more", count=16)}), load_catalog()) == \
        kueue_config(v, load_catalog())                                               # jobs are not git's Kueue


def test_a_failed_update_is_tried_again_in_the_next_cycle_until_it_is_done() -> None:
    before, after = fleet(JOBS), fleet({**JOBS, "policies/teams.yaml": HEAVIER})
    first = cycle(before, 0, LoopMemory())
    second = cycle(after, 1, first.decision.memory, first)
    failed = kueue(second)
    assert [a.cluster for a in failed] == ["gke-usc1", "onprem-sjc"]
    memory = settle(first.decision.memory, second.decision.memory, failed)           # both updates failed
    assert memory.kueue == first.decision.memory.kueue
    third = cycle(after, 2, memory, second)
    assert [(a.cluster, a.reason) for a in kueue(third)] == [(a.cluster, a.reason) for a in failed]
    assert kueue(cycle(after, 3, third.decision.memory, third)) == []


def test_a_memory_of_an_older_version_applies_each_cluster_once_saying_why() -> None:
    v = fleet(JOBS)
    fresh = cycle(v, 0, LoopMemory())
    older = fresh.decision.memory.model_copy(update={"kueue": {}})      # an older loop kept quotas only
    upgraded = cycle(v, 1, older, fresh)
    assert [a.cluster for a in kueue(upgraded)] == ["gke-usc1", "onprem-sjc"]
    assert all(a.reason.startswith("the cluster's other Kueue objects are tracked now") for a in kueue(upgraded))
    assert upgraded.decision.memory.kueue == fresh.decision.memory.kueue
    assert kueue(cycle(v, 2, upgraded.decision.memory, upgraded)) == []


def test_a_cluster_removed_from_git_and_added_back_is_applied_afresh() -> None:
    """It may be a new cluster of the same name, whose Kueue holds nothing the loop applied to the old one."""
    v = fleet(JOBS)
    gone = fleet({**JOBS, "fleet/clusters/onprem-sjc.yaml": None})
    first = cycle(v, 0, LoopMemory())
    second = cycle(gone, 1, first.decision.memory, first)
    assert "onprem-sjc" not in second.decision.memory.quotas and "onprem-sjc" not in second.decision.memory.kueue
    back = cycle(v, 2, second.decision.memory, second)
    assert {a.cluster: a.reason for a in kueue(back)}["onprem-sjc"] == "quotas not applied yet by this reconciler"


class FailingOnce(StackRunner):
    """The stack runner the loop is given: once armed, the next update of `stack` fails as Pulumi's would."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: str | None = None

    def up(self, spec: dict[str, object]) -> dict[str, int]:
        if spec["stack"] == self.fail:
            self.fail = None
            raise StackFailed("update failed: the API server timed out")
        return super().up(spec)


def test_the_loop_applies_a_merge_whose_apply_failed_and_retries_its_own_failure(tmp_path: Path) -> None:
    with clusters("a", "b", "mgmt") as servers:
        rig = Rig(tmp_path, servers, fleet_files())
        runner = rig.runner = FailingOnce()
        loop = rig.reconciler()
        loop.cycle()                                         # a fresh memory: every cluster's Kueue once
        rig.at(1)
        assert loop.cycle().results == ()                    # nothing changed: no update
        (rig.repo / "policies/teams.yaml").write_text(fleet_files()["policies/teams.yaml"].replace(
            "weight: 2", "weight: 5"))                       # merged; say its `fleet apply` failed
        runner.fail = "a-kueue"
        rig.at(2)
        first = loop.cycle()
        assert {(r.action.cluster, r.status) for r in first.results} == {
            ("a", "failed"), ("b", "done"), ("mgmt", "done")}
        assert all("ClusterQueue vision changed" in r.action.reason for r in first.results)
        rig.at(3)
        (again,) = loop.cycle().results
        assert (again.action.cluster, again.status) == ("a", "done")
        weights = [o["spec"]["fairSharing"]["weight"] for o in runner.ups[-1]["objects"]
                   if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "vision"]
        assert weights == ["5"]
        rig.at(4)
        assert loop.cycle().results == ()
        assert [json.loads(line)["status"] for line in rig.log.read_text().splitlines()
                if '"kueue"' in line and '"a"' in line][-2:] == ["failed", "done"]
