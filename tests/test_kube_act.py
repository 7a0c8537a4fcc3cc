"""The reconciler's actuator (reconcile/kube_act.py) against a local Kubernetes API server (tests/kube_api.py):
what one start, stop or move sends for inference services and JobSets."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kube_api import KubeCluster, clusters, write_kubeconfig
from kube_objects import job_objects, serving

from reconciler.reconcile.decide import Action
from reconciler.reconcile.kube_act import ClusterActuator
from reconciler.reconcile.kubeio import Client

NOW = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[KubeCluster, Any]]:
    """Cluster `a` and an actuator whose render of a start is the test's `docs` list."""
    with clusters("a") as cs:
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"ctx-a": cs["a"].url})
        docs: list[dict[str, Any]] = []
        act = ClusterActuator({"a": Client("a", "ctx-a", str(kc))}, dict, lambda a: docs,
                              {"serving": "serving", "vision": "vision"}, None, "r1", NOW)
        yield cs["a"], (act, docs)
        act.close()


def rendered(obj: dict[str, Any]) -> dict[str, Any]:
    """What render writes: the object without the server's fields."""
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def service_doc(job: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": job, "namespace": "serving", "labels": {"fleet.dev/team": "serving", "fleet.dev/job": job}},
        "spec": {"selector": {"fleet.dev/team": "serving", "fleet.dev/job": job}, "clusterIP": "None"}}


def names(c: KubeCluster, plural: str) -> list[str]:
    return sorted(name for _, name in c.objects[plural])


def test_a_spread_service_leaving_a_pool_of_a_cluster_deletes_that_pools_object_by_its_labels(
        rig: tuple[KubeCluster, Any]) -> None:
    """chat ran on h100 and a100 of cluster a (`chat-h100`, `chat-a100`); the plan keeps only h100 there, so
    render writes one Deployment named `chat`. The start applies it first, then deletes the job's other
    objects found by its labels; another job's Deployment and Fleet's Service stay."""
    a, (act, docs) = rig
    a.add(serving("serving", "chat", "h100", name="chat-h100"), serving("serving", "chat", "a100", name="chat-a100"),
          serving("serving", "other", "a100", name="other"), service_doc("chat"))
    docs += [rendered(serving("serving", "chat", "h100")), service_doc("chat")]
    out = act.start(Action(kind="start", cluster="a", pool="h100", job="serving/chat", service=True,
                           reason="the plan places its replicas on a/h100"))
    assert out.ok, out.message
    assert names(a, "deployments") == ["chat", "other"] and names(a, "services") == ["chat"]
    writes = [(r.method, r.path.rsplit("/", 1)[-1]) for r in a.requests
              if r.method != "GET" and "/events" not in r.path]
    assert writes[:2] == [("PATCH", "chat"), ("PATCH", "chat")]            # the new copy first
    assert sorted(writes[2:]) == [("DELETE", "chat-a100"), ("DELETE", "chat-h100")]
    listed = [r.query.get("labelSelector") for r in a.requests if r.method == "GET" and r.path.endswith("s")]
    assert listed and all(q == "fleet.dev/job=chat,fleet.dev/team=serving" for q in listed)


def test_stopping_a_spread_service_deletes_every_pools_object_and_its_service(
        rig: tuple[KubeCluster, Any]) -> None:
    a, (act, _) = rig
    a.add(serving("serving", "chat", "h100", name="chat-h100"),
          serving("serving", "chat", "v5e", name="chat-v5e", kind="LeaderWorkerSet"),
          serving("serving", "other", "a100", name="other"), service_doc("chat"))
    out = act.stop(Action(kind="stop", cluster="a", pool="h100", job="serving/chat", service=True,
                          from_cluster="a", from_pool="h100", reason="preempted by serving/critical"))
    assert out.ok, out.message
    assert (names(a, "deployments"), names(a, "leaderworkersets"), names(a, "services")) == (["other"], [], [])


def test_a_start_reads_its_jobset_once(rig: tuple[KubeCluster, Any]) -> None:
    a, (act, docs) = rig
    docs.append(rendered(job_objects("vision", "train", "v5p")[0]))
    out = act.start(Action(kind="start", cluster="a", pool="v5p", job="vision/train", reason="the plan starts it"))
    assert out.ok, out.message
    reads = [r for r in a.requests if r.method == "GET" and "/jobsets" in r.path]
    assert len(reads) == 1 and ("vision", "train") in a.objects["jobsets"]
    again = act.start(Action(kind="start", cluster="a", pool="v5p", job="vision/train", reason="the plan starts it"))
    assert again.ok and len([r for r in a.requests if "/jobsets" in r.path]) == 3    # one more read, no write


def test_a_move_within_a_cluster_starts_the_new_copy_only_once_the_old_ones_pods_are_gone(
        rig: tuple[KubeCluster, Any]) -> None:
    """A JobSet moves to other units (or another pool) of its cluster: same name. The old copy is deleted in
    the foreground, so it stays until its pods (here its Workload stands for them) are gone; the new copy is
    not created beside pods still terminating (they would write the same checkpoint), but in the next cycle."""
    a, (act, docs) = rig
    a.graceful = True
    a.add(*job_objects("vision", "train", "v5p"))
    docs.append(rendered(job_objects("vision", "train", "v5p")[0]))
    move = Action(kind="move", cluster="a", pool="v5p", job="vision/train", units=(1,), from_cluster="a",
                  from_pool="v5p", from_namespace="vision", from_name="train", from_uid="uid-vision-train",
                  reason="unit 0 of a/v5p failed", force=True)
    out = act.move(move)
    assert out.ok and "next cycle" in out.message, out.message
    [delete] = [r for r in a.requests if r.method == "DELETE"]
    assert delete.body == {"propagationPolicy": "Foreground", "preconditions": {"uid": "uid-vision-train"}}
    assert not [r for r in a.requests if r.method == "PATCH"]                      # nothing created yet
    assert a.objects["jobsets"][("vision", "train")]["metadata"]["deletionTimestamp"]
    assert act.move(move).ok and not [r for r in a.requests if r.method == "PATCH"]  # still terminating
    a.finish_deletions()
    assert a.objects["jobsets"] == {} and a.objects["workloads"] == {}
    started = act.start(Action(kind="start", cluster="a", pool="v5p", job="vision/train", units=(1,),
                               reason="the plan starts it"))
    assert started.ok and ("vision", "train") in a.objects["jobsets"]


@pytest.mark.parametrize("fault, refused", [(403, True), (422, True), (409, True), (500, False), (401, False)])
def test_a_refused_object_holds_back_its_own_job_not_the_other_jobs_on_the_cluster(
        tmp_path: Path, fault: int, refused: bool) -> None:
    """The cluster refuses `vision/bad`'s JobSet (403: its namespace's admission policy or ResourceQuota; 422;
    409) at every cycle: the API works. Before, that failure held back every later action on the cluster, so one
    team's refused object stopped every other team's starts there, cycle after cycle. Now only what assumes the
    refused action happened waits: the job's own later actions and the release of the cluster's capacity. A
    failure that may be the cluster's (500, 401) still holds back the cluster."""
    from reconciler.reconcile.act import execute
    from reconciler.reconcile.decide import Decision, LoopMemory

    with clusters("a") as cs:
        a = cs["a"]
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"ctx-a": cs["a"].url})
        docs = {j: [rendered(job_objects("vision", j.split("/")[1], "h100")[0])] for j in ("vision/bad", "vision/ok")}
        act = ClusterActuator({"a": Client("a", "ctx-a", str(kc))}, dict, lambda x: docs[x.job or ""],
                              {"vision": "vision"}, None, "r1", NOW)
        a.faults["jobsets/vision/bad"] = fault
        start = [Action(kind="start", cluster="a", pool="h100", job=j, reason="the plan starts it")
                 for j in ("vision/bad", "vision/ok")]
        shrink = Action(kind="resize", cluster="a", pool="h200", reason="idle", target=0, current=1)
        try:
            results = execute(Decision((*start, shrink), LoopMemory()), act)
        finally:
            act.close()
    status = [(r.action.job or r.action.kind, r.status) for r in results]
    assert status[0] == ("vision/bad", "failed")
    if refused:
        assert status[1:] == [("vision/ok", "done"), ("resize", "skipped")]
        assert ("vision", "ok") in a.objects["jobsets"] and ("vision", "bad") not in a.objects["jobsets"]
        assert "its capacity is not released" in results[2].message
    else:
        assert status[1:] == [("vision/ok", "skipped"), ("resize", "skipped")]
        assert "cluster a failed earlier in this cycle" in results[1].message
