"""The loop applies a cluster's Kueue objects that git changed, not only its quotas (reconcile/kueuesync.py with
`render.kueue_config`): `fleet apply` applies a merge's cohorts, fair-sharing weights, priority classes and
flavors, and when that apply failed the loop used to leave them stale for good, since its memory held quotas only.
Now it applies them once, retries them while the update fails, and writes nothing while nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from kube_api import clusters
from test_kueue_flavors import NOW, empty, fleet
from test_reconcile import Rig, StackRunner, fleet_files

from reconciler.apply.orchestrate import StackFailed
from reconciler.catalog import load_catalog
from reconciler.reconcile.decide import Action, Knobs, LoopMemory, settle
from reconciler.reconcile.step import Step, step
from reconciler.render import kueue_config, pool_and_kueue_docs
from reconciler.validate import Validated

from builders import GKE, ONPREM, PRIORITIES, TEAMS, job

ROOT = Path(__file__).resolve().parents[1]
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


def test_the_lines_cover_the_stack_but_its_quotas() -> None:
    """A line per object of the cluster's Kueue stack (the queues without quotas), per flavor's terms in the
    queues, and for the stack's own settings; jobs change none of them."""
    v = fleet(JOBS)
    from reconciler.plan import plan
    spec = pool_and_kueue_docs(v, plan(v), load_catalog(), {"gke-usc1-kueue"})["gke-usc1-kueue"]
    rendered = {f"{o['kind']} {o['metadata']['name']}" for o in spec["objects"]}
    keys = {x.rsplit(" ", 1)[0] for x in kueue_config(v, load_catalog())["gke-usc1"]}
    objects = {k.replace("vision/", "").replace("lang/", "") for k in keys if not k.startswith(("flavor ", "stack "))}
    assert objects == rendered
    assert keys - {k for k in keys if k.split()[0] in {o["kind"] for o in spec["objects"]}} == {
        "flavor h100 in the ClusterQueues", "flavor h100-spot in the ClusterQueues",
        "flavor v5p-4x4x4 in the ClusterQueues", "stack gke-usc1-kueue settings"}
    assert kueue_config(fleet({**JOBS, "jobs/vision/more.yaml": job("more", count=16)}), load_catalog()) == \
        kueue_config(v, load_catalog())                                               # jobs are not git's Kueue


@pytest.mark.parametrize(("change", "named"), [
    ({"fleet/clusters/onprem-sjc.yaml": ONPREM.replace("cpus: 192, memory_gib: 2048", "cpus: 224, memory_gib: 3072")},
     "onprem-sjc: 1 other Kueue object(s) changed in git: flavor h100-owned in the ClusterQueues changed"),
    ({"fleet/clusters/gke-usc1.yaml": GKE.replace("    placement: compact\n", "    provisioning: queued\n")},
     "gke-usc1: 3 other Kueue object(s) changed in git: AdmissionCheck fleet-queued-provisioning added; "
     "ProvisioningRequestConfig fleet-queued-provisioning added; flavor h100 in the ClusterQueues changed"),
    ({"fleet/clusters/gke-usc1.yaml": GKE.replace("{cluster: ml-usc1}", "{cluster: ml-usc1, context: ctx-usc1}")},
     "gke-usc1: 1 other Kueue object(s) changed in git: stack gke-usc1-kueue settings changed"),
])
def test_what_git_decides_of_a_queue_beyond_its_objects_is_applied_too(change: dict[str, str], named: str) -> None:
    """Found in review: a node's cpus (the flavors' cpu and memory quotas), a queued pool (its admission check)
    and the cluster's context change the stack without changing an object rendered without quotas."""
    before, after = fleet(JOBS), fleet({**JOBS, **change})
    first = cycle(before, 0, LoopMemory())
    second = cycle(after, 1, first.decision.memory, first)
    said = [f"{a.cluster}: {a.reason}" for a in kueue(second)]
    assert any(x.startswith(named) for x in said), said
    assert kueue(cycle(after, 2, second.decision.memory, second)) == []


def test_a_pool_no_queue_holds_changes_no_queue() -> None:
    """Second review: the terms of a flavor whose accelerator no team has quota of are in no ClusterQueue (and
    validation refuses jobs that ask for it), so changing its nodes changes nothing Kueue holds."""
    a100 = ("  - name: a100-owned\n    accelerator: nvidia-a100-80gb\n    capacity: owned\n    min: 4\n    max: 4\n"
            "    node: {accelerators: 8, cpus: 96, memory_gib: 1024}\n    hourly_usd: 20.0\n")
    before = fleet({**JOBS, "fleet/clusters/onprem-sjc.yaml": ONPREM + a100})
    after = fleet({**JOBS, "fleet/clusters/onprem-sjc.yaml": ONPREM + a100.replace("cpus: 96", "cpus: 128")})
    first = cycle(before, 0, LoopMemory())
    assert kueue(cycle(after, 1, first.decision.memory, first)) == []


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


def test_the_reasons_say_what_is_new_where_nothing_was_applied_before() -> None:
    """Found in review: a cluster with no quota lines before (its teams had none there) whose first line is a
    split over its flavors was said to have a split "tracked now" by an older version; and a cluster with no
    quotas at all (no pools) was said to have quotas not applied yet."""
    from reconciler.plan.types import Plan
    from reconciler.reconcile.kueuesync import kueue_updates
    objs = ["ClusterQueue vision 0123456789ab"]
    nothing = Plan((), (), (), (), (), None)      # type: ignore[arg-type]
    (a,) = kueue_updates(nothing, LoopMemory(kueue={"c": objs}), {"c"},
                         {"c": ["vision nvidia-h100-80gb flavors 0123ab"]}, {"c": objs})[0]
    assert a.reason == "1 quota(s) changed: vision nvidia-h100-80gb now has quota in the cluster's flavors"
    (b,) = kueue_updates(nothing, LoopMemory(), {"c"}, {}, {"c": objs})[0]
    assert b.reason == "Kueue objects not applied yet by this reconciler"


def test_the_lines_are_the_same_in_every_process() -> None:
    """The memory outlives the process: a line that hashed differently in the next one would be a write per
    restart. Two processes with different hash seeds, on the repository's example fleet."""
    script = ("import json; from pathlib import Path; from reconciler.catalog import load_catalog; "
              "from reconciler.pipeline import check; from reconciler.render import kueue_config; "
              "from reconciler.sources import read_worktree; "
              f"print(json.dumps(kueue_config(check(read_worktree(Path({str(ROOT)!r})), load_catalog()), "
              "load_catalog())))")
    outs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "12345")]
    assert outs[0] == outs[1] and len(json.loads(outs[0])) >= 2


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


def test_a_render_refusal_leaves_the_cycle_going_with_its_quotas(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation should catch what render refuses; where `kueue_config` refuses anyway, the cycle still plans
    and decides its quota updates, and says why it tracks no Kueue objects (before `kueue_config`, such a
    refusal failed only the cycles with a Kueue or pool action, in the act stage)."""
    from reconciler.problems import RejectedError
    from reconciler.reconcile import loop as loop_module

    def refuse(*_: object) -> None:
        raise RejectedError("policies/priorities.yaml: a rule Kueue refuses", "change it")

    monkeypatch.setattr(loop_module, "kueue_config", refuse)
    with clusters("a", "b", "mgmt") as servers:
        rig = Rig(tmp_path, servers, fleet_files())
        report = rig.reconciler().cycle()
        assert sorted(r.action.cluster for r in report.results if r.action.kind == "kueue") == ["a", "b"]
        assert any("the Kueue objects git decides are not tracked" in line for line in rig.lines)
