"""What the loop does around jobs that finished (reconcile/finished.py). Found by a hunt.

A finished job whose file changed runs again (plan/live.py: another spec digest is another run), and the loop
makes it run: before, the plan placed it (a unit held, the pool grown) while the loop only noted "never started
again (is its completion recorded?)", since a JobSet that exists is never applied again. And a job that may
have finished unseen (its cluster's completion records could not be read) is not started: no pool grows for
it either (before, the pool grew for a job that then waited)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from kube_api import KubeCluster
from kube_objects import job_objects
from test_reconcile import Rig, cluster_yaml, fleet_files, running, servers, slice_nodes
from test_reconcile_decide import KNOBS, NOW, cluster, kinds, place, plan, pool, snap
from test_restart_memory import jobs_done, once
from test_tenants import digest_of

from reconciler.models import DIGEST_ANNOTATION
from reconciler.observe.parse import parse_jobset
from reconciler.reconcile.decide import JobFacts, LoopMemory, decide

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
    assert "its file changed since it finished" in start.action.reason and "finished run is cleared" in \
        stop.action.reason
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


# --- found by a review of the above -----------------------------------------------------------------------------

V5P = frozenset({"tpu-v5p"})
FACTS = {"vision/train": JobFacts("training", 30, 10, accelerators=V5P),
         "vision/eval": JobFacts("training", 30, 1, accelerators=V5P)}
GPU_JOB = ("name: gpu\nteam: vision\npriority: production\noptions:\n  - {accelerator: nvidia-h100-80gb, count: 8}\n"
           "duration_hours: 24\ncheckpoint_minutes: 30\nimage: us-docker.pkg.dev/ml/train:1\ncommand: [python]\n")


def test_a_pool_grows_only_as_far_as_the_jobs_not_held_back_need() -> None:
    a = cluster("a").model_copy(update={"unreadable_records": ("vision/train",)})
    p = plan(place("vision/train", "a", "v5p", (0,), status="new"),
             place("vision/eval", "a", "v5p", (1,), status="new"), pools=(pool("a", "v5p", 2),))
    (resize,) = [x for x in decide(p, snap(a), LoopMemory(), KNOBS, NOW, jobs=FACTS).actions if x.kind == "resize"]
    assert (resize.current, resize.target) == (0, 2) and resize.reason == "2 more unit(s) for vision/eval"
    p = plan(place("vision/train", "a", "v5p", (1,), status="new"),
             place("vision/eval", "a", "v5p", (0,), status="new"), pools=(pool("a", "v5p", 2),))
    (resize,) = [x for x in decide(p, snap(a), LoopMemory(), KNOBS, NOW, jobs=FACTS).actions if x.kind == "resize"]
    assert (resize.current, resize.target) == (0, 1)          # before: 2, a slice for the held job too


def test_a_held_jobs_pool_does_not_grow_through_its_clusters_stack(tmp_path: Path) -> None:
    """Another pool of the cluster resizing brought the whole infra stack up at the plan's targets, the held
    job's pool at its planned size among them."""
    from kube_api import clusters
    with clusters("a", "b", "mgmt") as servers:
        servers["b"].add(*running("vision", "train"))
        servers["b"].faults["*"] = 500
        files = fleet_files()
        files["fleet/clusters/a.yaml"] = cluster_yaml("a").replace(
            "pools:\n", "pools:\n  - {name: h100, accelerator: nvidia-h100-80gb, max: 2}\n")
        files["jobs/vision/gpu.yaml"] = GPU_JOB
        rig = Rig(tmp_path, servers, files)
        done = jobs_done(once(rig, 0, tmp_path / "memory.json"))
        assert [(k, c) for k, c, _ in done] == [("resize", "a"), ("start", "a")]      # the GPU job, on a
        (spec,) = [s for s in rig.runner.ups if s["layer"] == "infra"]
        assert "v5p" not in json.dumps(spec["node_pools"])    # before: a v5p slice for the held vision/train


def test_a_lost_cluster_holds_nothing_even_in_a_memory_that_kept_no_read() -> None:
    old = json.dumps({"unreachable_since": {"b": (NOW - timedelta(minutes=60)).isoformat()}, "quotas": {"a": []}})
    mem = LoopMemory.model_validate_json(old)                  # the previous version's memory: no `read`
    s = snap(cluster("a"), cluster("b", status="unreachable"))
    p = plan(place("vision/train", "a", "v5p", (0,), status="new"), pools=(pool("a", "v5p", 1),))
    d = decide(p, s, mem, KNOBS, NOW, jobs=FACTS, accelerators={"a": V5P, "b": V5P})
    assert d.lost_clusters == ("b",) and ("start", "vision/train", "a") in kinds(d.actions)
    assert d.memory.read == ["a"]                              # a read now (and in `quotas`); b never


def test_a_failover_is_not_held_by_another_cluster_never_read() -> None:
    js = parse_jobset(job_objects("vision", "train", "v5p")[0])
    mem = LoopMemory(read=["a", "c"], last_running={"c": [js]}, unreachable_since={"c": NOW - timedelta(minutes=20)})
    c = cluster("c", status="unreachable").model_copy(update={"last_running": (js,)})
    s = snap(cluster("a"), cluster("b", status="unreachable"), c)        # b: a cluster file just added
    p = plan(place("vision/train", "a", "v5p", (0,), status="moved", reason="cluster c is lost"),
             pools=(pool("a", "v5p", 1),))
    d = decide(p, s, mem, KNOBS, NOW, jobs=FACTS, accelerators={n: V5P for n in "abc"})
    assert d.lost_clusters == ("c",) and ("start", "vision/train", "a") in kinds(d.actions)
