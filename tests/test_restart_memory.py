"""What the loop must remember across a restart (its `--memory` file), found by a hunt for broken live-side rules:

- a cluster that cannot be read keeps its jobs until it counts as lost. The jobs that ran there were known only
  from the previous snapshot, which a new process (the scheduled `--once` workflow is one per run) does not
  have: the loop started a second copy elsewhere ("the plan starts it"), then deleted the original as "stale".
  Now the memory keeps each cluster's running JobSets and its jobs' completion records as last read;
- a first run (no memory file yet, or a lost one) while a cluster cannot be read knew nothing of what ran there,
  and did the same. Now no job starts until the cluster is read or counts as lost (reconcile/finished.py);
- the last job file removed from git stopped nothing ("the plan leaves it pending: kept"): an empty `jobs/`
  was taken for "the jobs are not known"."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from kube_api import KubeCluster, clusters
from test_kueue_flavors import NOW, fleet
from test_kueue_objects import JOBS
from test_reconcile import Rig, fleet_files, kueue_admits, running, slice_nodes

from reconciler.models import spec_digest
from reconciler.observe.model import ClusterObservation, Completion, Snapshot
from reconciler.reconcile.decide import Knobs, LoopMemory
from reconciler.reconcile.loop import CycleReport
from reconciler.reconcile.step import step


def once(rig: Rig, minutes: float, memory: Path) -> CycleReport:
    """One run of the scheduled workflow: a new process with the memory file, then the Lease given back."""
    rig.at(minutes)
    loop = rig.reconciler(memory_file=memory)
    report = loop.cycle()
    loop.release_lease()
    return report


def jobs_done(report: CycleReport) -> list[tuple[str, str | None, str]]:
    return [(r.action.kind, r.action.cluster, r.action.reason) for r in report.results if r.action.kind != "kueue"]


def test_a_restarted_loop_keeps_a_running_job_where_a_cluster_cannot_be_read(tmp_path: Path) -> None:
    with clusters("a", "b", "mgmt") as servers:
        b: KubeCluster = servers["b"]
        b.add(*running("vision", "train"))                  # running on b
        rig, memory = Rig(tmp_path, servers, fleet_files()), tmp_path / "memory.json"
        once(rig, 0, memory)
        assert jobs_done(once(rig, 1, memory)) == []
        for fault in ({"jobsets": 500}, {"*": 500}):       # one list that fails; the whole cluster
            b.faults.clear()
            b.faults.update(fault)
            report = once(rig, 2, memory)
            assert jobs_done(report) == [], fault           # before: ("start", "a", "the plan starts it")
            assert not [r for r in rig.writes("a") if "jobsets" in r.path]
        b.faults.clear()
        assert jobs_done(once(rig, 3, memory)) == []        # before: b's copy stopped as "stale"
        assert ("vision", "train") in b.objects["jobsets"]


@pytest.mark.parametrize("fault", [{"jobsets": 500}, {"*": 500}])
def test_a_first_run_starts_nothing_while_a_cluster_it_never_read_cannot_be_read(tmp_path: Path,
                                                                                 fault: dict[str, int]) -> None:
    with clusters("a", "b", "mgmt") as servers:
        b: KubeCluster = servers["b"]
        b.add(*running("vision", "train"))                  # running on b, which the first run cannot read
        slice_nodes(b, 0)
        b.faults.update(fault)
        rig, memory = Rig(tmp_path, servers, fleet_files()), tmp_path / "memory.json"
        first = once(rig, 0, memory)                         # no memory file yet
        assert jobs_done(first) == []                        # before: ("start", "a", "the plan starts it")
        assert first.decision is not None and any(
            n.startswith("1 job(s) wait this cycle: b cannot be read and this reconciler never read it")
            and n.endswith("until it is read or counts as lost: vision/train")
            for n in first.decision.notes)
        assert not [r for r in rig.writes("a") if "jobsets" in r.path or "infra" in r.path]
        assert [s for s in rig.runner.ups if s["layer"] == "infra"] == []          # no pool grew for it
        assert jobs_done(once(rig, 5, memory)) == []         # still within cluster_lost_after_minutes (15)
        b.faults.clear()
        assert jobs_done(once(rig, 6, memory)) == []         # read: it runs there; before, stopped as "stale"
        assert ("vision", "train") in b.objects["jobsets"] and b.objects["jobsets"][("vision", "train")][
            "metadata"]["uid"] == "uid-vision-train"
        b.faults.update(fault)                               # read once: now the memory knows what ran there
        assert jobs_done(once(rig, 7, memory)) == []


@pytest.mark.parametrize("failing", ["jobsets", "nodes"])
def test_a_cluster_never_read_that_answers_in_part_never_gets_a_second_copy(tmp_path: Path, failing: str) -> None:
    """Found by a review: the hold ended after cluster_lost_after_minutes, but a cluster that answers in part is
    never lost, so at minute 16 the job started on a, and its original on b was stopped as stale. Where only
    the nodes fail, b's jobs' lists were read: the job is seen running there from the first cycle."""
    with clusters("a", "b", "mgmt") as servers:
        a, b = servers["a"], servers["b"]
        b.add(*running("vision", "train"))
        slice_nodes(b, 0)
        slice_nodes(a, 0)
        b.faults[failing] = 500
        rig, memory = Rig(tmp_path, servers, fleet_files()), tmp_path / "memory.json"
        for minutes in (0, 16, 40):               # (a's idle slice is released at 30)
            assert [x for x in jobs_done(once(rig, minutes, memory)) if x[0] != "resize"] == [], minutes
        b.faults.clear()
        assert [x for x in jobs_done(once(rig, 41, memory)) if x[0] != "resize"] == []
        assert ("vision", "train") not in a.objects["jobsets"] and ("vision", "train") in b.objects["jobsets"]


def test_a_cluster_never_read_holds_starts_only_until_it_counts_as_lost(tmp_path: Path) -> None:
    with clusters("a", "b", "mgmt") as servers:
        servers["b"].faults["*"] = 500
        slice_nodes(servers["a"], 0)
        rig, memory = Rig(tmp_path, servers, fleet_files()), tmp_path / "memory.json"
        assert jobs_done(once(rig, 0, memory)) == []
        assert jobs_done(once(rig, 14, memory)) == []
        started = jobs_done(once(rig, 15, memory))           # b lost: the job starts, fenced as any failover
        assert [(kind, cluster) for kind, cluster, _ in started] == [("start", "a")]


def test_a_restarted_loop_does_not_start_again_a_job_that_finished_where_it_cannot_read() -> None:
    """The cycle itself (step.py), as a new process runs it: no earlier snapshot, the memory of the last run."""
    v = fleet(JOBS)
    record = Completion(job="vision/small", digest=spec_digest(v.job_by_id["vision/small"]), result="succeeded")
    read = Snapshot(observed_at=NOW, clusters=(
        ClusterObservation(name="gke-usc1", status="ok", completions=(record,)),
        ClusterObservation(name="onprem-sjc", status="ok")))
    first = step(v, read, LoopMemory(), last_snapshot=None, last_plan=None, knobs=Knobs(), now=NOW)
    assert "vision/small" not in {p.job for p in first.plan.placements}           # it finished
    assert first.decision.memory.last_completions == {"gke-usc1": [record]}
    later = NOW + timedelta(minutes=1)
    unread = Snapshot(observed_at=later, clusters=(ClusterObservation(name="gke-usc1", status="unreachable"),
                                                   ClusterObservation(name="onprem-sjc", status="ok")))
    restarted = step(v, unread, first.decision.memory, last_snapshot=None, last_plan=None, knobs=Knobs(), now=later)
    assert "vision/small" not in {a.job for a in restarted.decision.actions}     # before: started again
    assert restarted.decision.memory.last_completions == {"gke-usc1": [record]}  # kept while it cannot be read


def test_removing_the_last_job_file_stops_the_job(tmp_path: Path) -> None:
    with clusters("a", "b", "mgmt") as servers:
        slice_nodes(servers["a"], 0)
        rig = Rig(tmp_path, servers, fleet_files())
        loop = rig.reconciler()
        loop.cycle()
        kueue_admits(servers["a"], "train", 61)
        (rig.repo / "jobs/vision/train.yaml").unlink()
        rig.at(2)
        (stop,) = loop.cycle().results
        assert (stop.action.kind, stop.action.cluster, stop.status) == ("stop", "a", "done")
        assert stop.action.reason == "jobs/vision/train.yaml is gone from the repository"
