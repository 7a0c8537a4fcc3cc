"""What the loop does around jobs that finished (reconcile/finished.py). Found by a hunt.

A finished job whose file changed runs again (plan/live.py: another spec digest is another run), and the loop
makes it run: before, the plan placed it (a unit held, the pool grown) while the loop only noted "never started
again (is its completion recorded?)", since a JobSet that exists is never applied again. And a job that may
have finished unseen (its cluster's completion records could not be read) is not started: no pool grows for
it either (before, the pool grew for a job that then waited)."""

from __future__ import annotations

from pathlib import Path

from kube_api import KubeCluster
from test_reconcile import Rig, fleet_files, running, servers, slice_nodes
from test_tenants import digest_of

from reconciler.models import DIGEST_ANNOTATION

__all__ = ["servers"]          # the fixture, imported for pytest


def finished_with(a: KubeCluster, digest: str, phase: str) -> None:
    objs = running("vision", "train", "0", phase=phase, admitted=0, ended=55)
    objs[0]["metadata"]["annotations"][DIGEST_ANNOTATION] = digest
    a.add(*objs)


def test_a_job_that_failed_and_whose_image_was_fixed_runs_again(tmp_path: Path,
                                                                 servers: dict[str, KubeCluster]) -> None:
    a = servers["a"]
    slice_nodes(a, 0)
    rig = Rig(tmp_path, servers, fleet_files())
    old = digest_of(rig, "vision/train")
    finished_with(a, old, "failed")
    loop = rig.reconciler()
    first = loop.cycle()
    assert [r.action.kind for r in first.results if r.action.job] == []    # failed with this spec: not again
    job = rig.repo / "jobs/vision/train.yaml"
    job.write_text(job.read_text().replace("train:1", "train:2"))         # the image fixed
    new = digest_of(rig, "vision/train")
    rig.at(1)
    report = loop.cycle()
    stop, start = [r for r in report.results if r.action.job]
    assert (stop.action.kind, stop.action.from_uid, stop.status) == ("stop", "uid-vision-train", "done")
    assert f"failed under an earlier spec of jobs/vision/train.yaml (spec digest {old}, now {new})" in \
        stop.action.reason
    assert (start.action.kind, start.action.cluster) == ("start", "a")
    assert "its file changed since it finished" in start.action.reason
    a.finish_deletions()
    rig.at(2)
    loop.cycle()
    made = a.objects["jobsets"][("vision", "train")]
    assert made["metadata"]["annotations"][DIGEST_ANNOTATION] == new
    assert made["metadata"]["uid"] != "uid-vision-train"


def test_a_job_that_succeeded_with_this_spec_is_never_started_again(tmp_path: Path,
                                                                    servers: dict[str, KubeCluster]) -> None:
    a = servers["a"]
    slice_nodes(a, 0)
    rig = Rig(tmp_path, servers, fleet_files())
    finished_with(a, digest_of(rig, "vision/train"), "succeeded")
    report = rig.reconciler().cycle()
    assert [r for r in report.results if r.action.job] == []
    assert [r.path for r in rig.writes("a") if "/jobsets" in r.path] == []
    assert a.objects["jobsets"][("vision", "train")]["metadata"]["uid"] == "uid-vision-train"


def test_no_pool_grows_for_a_job_that_may_have_finished_unseen(tmp_path: Path,
                                                               servers: dict[str, KubeCluster]) -> None:
    rig = Rig(tmp_path, servers, fleet_files())
    loop = rig.reconciler()
    servers["a"].faults["configmaps"] = 500                            # the records of a cannot be read
    report = loop.cycle()
    assert [r.action.kind for r in report.results if r.action.kind != "kueue"] == []
    assert report.decision is not None and any(
        "vision/train waits this cycle" in n and "no pool grows for it" in n for n in report.decision.notes)
    assert [s for s in rig.runner.ups if s["layer"] == "infra"] == []
    del servers["a"].faults["configmaps"]
    rig.at(1)
    grown = [r.action for r in loop.cycle().results if r.action.kind != "kueue"]
    assert [(a.kind, a.target) for a in grown] == [("resize", 1), ("start", None)]
    assert "vision/train" in grown[0].reason
