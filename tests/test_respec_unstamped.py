"""A running JobSet made before Fleet stamped `fleet.dev/pod-digest`, whose file changed what its pods run: the
pull request's plan (from git, against the base commit) and the plan from what runs (`fleet apply`, the loop)
must say the same, and truly. What its pods run is read back from its pod template (observe/podfields.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from kube_api import KubeCluster
from test_apply_immutable import _images, _new_image
from test_apply_live import _git, _runs_a, fleet_cli, sent
from test_apply_live import fleet as fleet


def _made_before(cluster: KubeCluster, name: str = "a") -> dict[str, Any]:
    """The JobSet `vision/<name>` as a Fleet that did not stamp the pod digest made it (its spec digest kept)."""
    js = cluster.objects["jobsets"][("vision", name)]
    del js["metadata"]["annotations"]["fleet.dev/pod-digest"]
    cluster.add(js)
    return js


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def _placement(path: Path) -> dict[str, Any]:
    [p] = json.loads(path.read_text())["placements"]
    return dict(p)


def _plans(repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """vision/a's placement in the pull request's plan (from git against HEAD~1: tmp/pr) and in the plan from
    what runs (`fleet observe`, then `fleet plan --observed`, as apply and the loop plan: tmp/live)."""
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--base", "HEAD~1", "--format", "json",
                     "--out", str(tmp_path / "pr"))[0] == 0
    snap = str(tmp_path / "snapshot.json")
    assert fleet_cli(capsys, "observe", "--repo", str(repo), "--format", "json", "--out", snap)[0] == 0
    assert fleet_cli(capsys, "plan", "--repo", str(repo), "--observed", snap, "--format", "json", "--out",
                     str(tmp_path / "live"))[0] == 0
    return _placement(tmp_path / "pr/plan.json"), _placement(tmp_path / "live/plan.json")


WHY = "its file changed what its pods run{}, which a running JobSet cannot take: re-created with it where it runs, " \
      "from its last checkpoint"


def _unstamped_a_in_git(repo: Path, cs: dict[str, KubeCluster], capsys: pytest.CaptureFixture[str],
                        message: str) -> KubeCluster:
    """`vision/a` running on onprem-sjc from a JobSet made before the pod digest, its repository committed."""
    sjc = cs["sjc"]
    _runs_a(repo, cs, capsys, 8)
    _made_before(sjc)
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, message)
    return sjc


def test_a_jobset_made_before_the_pod_digest_whose_image_changed_is_re_created_as_the_pr_plan_says(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`vision/a` runs img:1 on node 0 of onprem-sjc/h100-owned, its JobSet made before Fleet stamped
    `fleet.dev/pod-digest`; its file now says img:2. Before, the pull request's plan (from git) re-created it
    ("its file changed what its pods run (image)") while the plan from what runs, which read no pod digest as "not
    changed", kept it, and apply kept it running img:1 ("kept ... nothing sent"): the reviewed plan and what apply
    did disagreed. Now what its pods run is read from its pod template: both re-create it, and apply with the
    reviewed plan deletes the JobSet and creates it again with img:2."""
    repo, cs = fleet
    sjc = _unstamped_a_in_git(repo, cs, capsys, "a runs img:1")
    _new_image(repo)
    _commit(repo, "a runs img:2")
    pr, live = _plans(repo, capsys, tmp_path)
    assert (pr["cluster"], pr["pool"], pr["units"], pr["status"], pr["reason"]) == (
        "onprem-sjc", "h100-owned", [0], "moved", WHY.format(" (image)"))
    assert (live["cluster"], live["pool"], live["units"], live["status"], live["reason"]) == (
        "onprem-sjc", "h100-owned", [0], "moved", WHY.format(""))
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    assert "JobSet vision/a: kept" not in out, out
    [delete] = sent(sjc, "DELETE")
    assert delete.path.endswith("/namespaces/vision/jobsets/a")
    assert "onprem-sjc: JobSet vision/a: deleted (moved by the plan: its file changed what its pods run" in out, out
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes")
    assert code == 0, out + err
    assert _images(sjc, "a") == ["img:2"]
    assert "fleet.dev/pod-digest" in sjc.objects["jobsets"][("vision", "a")]["metadata"]["annotations"]


def test_a_jobset_made_before_the_pod_digest_whose_pods_are_unchanged_is_kept_by_both_plans(
        fleet: tuple[Path, dict[str, KubeCluster]], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The other side: its file changed only its duration (its spec digest differs, its pods do not). Both plans
    keep it where it runs, and apply with the reviewed plan deletes nothing and leaves its pod template alone."""
    repo, cs = fleet
    sjc = _unstamped_a_in_git(repo, cs, capsys, "a")
    job = repo / "jobs/vision/a.yaml"
    job.write_text(job.read_text() + "duration_hours: 9\n")
    _commit(repo, "a runs 9 hours")
    pr, live = _plans(repo, capsys, tmp_path)
    assert (pr["units"], pr["status"]) == ([0], "kept") and (live["units"], live["status"]) == ([0], "kept")
    before = copy.deepcopy(sjc.objects["jobsets"][("vision", "a")]["spec"])
    code, out, err = fleet_cli(capsys, "apply", "--repo", str(repo), "--yes", "--reviewed",
                               str(tmp_path / "pr/plan.json"))
    assert code == 0, out + err
    assert not sent(sjc, "DELETE") and sjc.objects["jobsets"][("vision", "a")]["spec"] == before
