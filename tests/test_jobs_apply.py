"""Jobs by server-side apply (reconciler/apply/jobs.py) against the local Kubernetes API servers of kube_api."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_api import KubeCluster, clusters, write_kubeconfig

from reconciler import pipeline
from reconciler.apply import jobs, safety
from reconciler.catalog import load_catalog
from reconciler.observe.kube import ContextError, Target
from reconciler.observe.model import JobSet

from builders import base_files, shared_file

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/vision/jobsets/train"


def rendered_jobset() -> dict[str, Any]:
    """The JobSet `fleet render` writes for vision/train of the builders' fleet."""
    head = pipeline.check(base_files(), load_catalog())
    files = pipeline.render(head, pipeline.plan(head), load_catalog())
    spec = json.loads(next(t for p, t in files.items() if p.startswith("stacks/") and p.endswith("-jobs.json")
                           and "JobSet" in t))
    return next(o for o in spec["objects"] if o["kind"] == "JobSet")


MANIFEST = rendered_jobset()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[KubeCluster, jobs.ClusterClient]]:
    with clusters("a") as cs:
        kc = write_kubeconfig(tmp_path / "kc", {"ctx-a": cs["a"].url})
        with jobs.ClusterClient.open(Target("a", "ctx-a", "fleet/clusters/a.yaml:5"), str(kc),
                                     timeout_s=(1.0, 1.0)) as client:
            yield cs["a"], client


def patches(cluster: KubeCluster) -> list[Any]:
    return [r for r in cluster.requests if r.method == "PATCH"]


def kueue_admits(cluster: KubeCluster, client: jobs.ClusterClient) -> None:
    """What Kueue does on admission: unsuspend (taking spec.suspend over) and inject the flavor's node selector
    and tolerations into the pod template (a forced apply by another manager moves ownership like its Update)."""
    body = {"apiVersion": MANIFEST["apiVersion"], "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "vision"},
            "spec": {"suspend": False, "replicatedJobs": [{"name": MANIFEST["spec"]["replicatedJobs"][0]["name"],
                     "template": {"spec": {"template": {"spec": {
                         "nodeSelector": {"cloud.google.com/gke-nodepool": "v5p-4x4x4-s0"},
                         "tolerations": [{"key": "google.com/tpu", "operator": "Exists"}]}}}}}]}}
    status, _ = jobs._call(client, "PATCH", JOBSETS, query=[("fieldManager", "kueue"), ("force", "true")],
                           body=body, content_type=jobs.APPLY_PATCH, verb="patch")
    assert status == 200


def test_a_new_jobset_is_created_suspended_by_field_manager_fleet(api: tuple[KubeCluster, Any]) -> None:
    cluster, client = api
    result = jobs.apply_job(client, MANIFEST)
    assert (result.action, result.ok) == ("create", True), result.line()
    [req] = patches(cluster)
    assert req.path == JOBSETS and req.query == {"fieldManager": "fleet"}      # never force
    assert req.content_type == "application/apply-patch+yaml"
    assert req.body["spec"]["suspend"] is True
    live = cluster.objects["jobsets"][("vision", "train")]
    assert live["spec"]["suspend"] is True
    assert [m["manager"] for m in live["metadata"]["managedFields"]] == ["fleet"]
    assert live["metadata"]["labels"]["fleet.dev/team"] == "vision"      # a dotted label key stays one key


def test_an_admitted_jobset_is_applied_without_suspend_or_kueues_fields(api: tuple[KubeCluster, Any]) -> None:
    shared_file("schemas/jobset/jobset.x-k8s.io_jobsets.yaml")    # the server merges lists by the CRD's keys
    cluster, client = api
    assert jobs.apply_job(client, MANIFEST).action == "create"
    kueue_admits(cluster, client)
    changed = copy.deepcopy(MANIFEST)
    changed["metadata"].setdefault("annotations", {})["fleet.dev/note"] = "relabelled"
    observed = JobSet(namespace="vision", name="train", team="vision", job="train", suspended=False)
    result = jobs.apply_job(client, changed, observed)
    assert (result.action, result.ok) == ("update", True), result.line()
    sent = patches(cluster)[-1]
    assert sent.query == {"fieldManager": "fleet"}
    assert "suspend" not in sent.body["spec"]
    pod = sent.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "tolerations" not in pod and "cloud.google.com/gke-nodepool" not in pod.get("nodeSelector", {})
    live = cluster.objects["jobsets"][("vision", "train")]
    assert live["spec"]["suspend"] is False                             # still running: Kueue's value kept
    live_pod = live["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert live_pod["nodeSelector"]["cloud.google.com/gke-nodepool"] == "v5p-4x4x4-s0"
    assert live_pod["tolerations"] == [{"key": "google.com/tpu", "operator": "Exists"}]


def test_even_a_stale_observation_never_resuspends_what_kueue_unsuspended(api: tuple[KubeCluster, Any]) -> None:
    cluster, client = api
    jobs.apply_job(client, MANIFEST)
    kueue_admits(cluster, client)
    changed = copy.deepcopy(MANIFEST)
    changed["metadata"]["labels"]["extra"] = "x"
    stale = JobSet(namespace="vision", name="train", suspended=True)    # observed before Kueue admitted it
    assert jobs.apply_job(client, changed, stale).ok
    assert "suspend" not in patches(cluster)[-1].body["spec"]
    assert cluster.objects["jobsets"][("vision", "train")]["spec"]["suspend"] is False


def test_rerun_converges_the_second_apply_sends_nothing(api: tuple[KubeCluster, Any]) -> None:
    cluster, client = api
    assert jobs.apply_job(client, MANIFEST).action == "create"
    assert jobs.apply_job(client, MANIFEST).action == "unchanged"
    kueue_admits(cluster, client)
    before = len(patches(cluster))
    again = jobs.apply_job(client, MANIFEST, JobSet(namespace="vision", name="train", suspended=False))
    assert again.action == "unchanged" and len(patches(cluster)) == before


def test_a_queued_jobset_keeps_its_suspend_while_fleet_owns_it(api: tuple[KubeCluster, Any]) -> None:
    """Omitting spec.suspend of a JobSet that Kueue has not admitted would let SSA drop the field (Fleet is its
    only owner) and start the job behind Kueue's back."""
    cluster, client = api
    jobs.apply_job(client, MANIFEST)
    changed = copy.deepcopy(MANIFEST)
    changed["metadata"]["labels"]["extra"] = "x"
    assert jobs.apply_job(client, changed).action == "update"
    assert patches(cluster)[-1].body["spec"]["suspend"] is True
    assert cluster.objects["jobsets"][("vision", "train")]["spec"]["suspend"] is True


def test_a_conflict_is_reported_not_forced(api: tuple[KubeCluster, Any]) -> None:
    cluster, client = api
    jobs.apply_job(client, MANIFEST)
    other = {"apiVersion": MANIFEST["apiVersion"], "kind": "JobSet",
             "metadata": {"name": "train", "namespace": "vision", "labels": {"fleet.dev/pool": "elsewhere"}}}
    jobs._call(client, "PATCH", JOBSETS, query=[("fieldManager", "kubectl"), ("force", "true")], body=other,
               content_type=jobs.APPLY_PATCH, verb="patch")
    result = jobs.apply_job(client, MANIFEST)
    assert result.action == "failed"
    assert "HTTP 409" in result.error and '.metadata.labels.fleet.dev/pool (owned by "kubectl")' in result.error
    assert "not forced" in result.error and "Fleet never forces" in result.hint
    assert all(r.query.get("force") != "true" for r in patches(cluster) if r.query["fieldManager"] == "fleet")
    assert cluster.objects["jobsets"][("vision", "train")]["metadata"]["labels"]["fleet.dev/pool"] == "elsewhere"


def test_delete_needs_the_plans_reason(api: tuple[KubeCluster, Any]) -> None:
    cluster, client = api
    jobs.apply_job(client, MANIFEST)
    refused = jobs.delete_job(client, "vision", "train", "  ")
    assert refused.action == "failed" and "reason" in refused.error
    assert not [r for r in cluster.requests if r.method == "DELETE"]
    done = jobs.delete_job(client, "vision", "train", "moved to gke-b/h100 by the plan")
    assert (done.action, done.reason) == ("delete", "moved to gke-b/h100 by the plan")
    assert ("vision", "train") not in cluster.objects["jobsets"]
    assert jobs.delete_job(client, "vision", "train", "moved").action == "absent"


def test_preview_reads_and_sends_nothing(api: tuple[KubeCluster, Any]) -> None:
    cluster, client = api
    result = jobs.apply_job(client, MANIFEST, preview=True)
    assert result.line() == "a: JobSet vision/train: would create (new: created suspended, Kueue admits it)"
    assert result.sent is not None and result.sent["spec"]["suspend"] is True
    assert {r.method for r in cluster.requests} == {"GET"}


@pytest.mark.parametrize(("fault", "message", "hint"), [
    (401, "HTTP 401", "credentials are missing or expired"),
    (403, "HTTP 403 workloads.kueue.x-k8s.io is forbidden", "grant Fleet's identity `get`"),
    (404, None, None),
    (500, "HTTP 500 internal error", "rerun `fleet apply` later"),
    ("garbage", "a body that is not JSON", "not a Kubernetes API server"),
    ("hang", "no answer within 1 s (connect) / 1 s (read)", "reachable from here"),
    ("refuse", "cannot connect", "reachable from here"),
])
def test_every_api_failure_is_a_located_result_with_a_hint(api: tuple[KubeCluster, Any], fault: Any,
                                                          message: str | None, hint: str | None) -> None:
    cluster, client = api
    if fault == "refuse":
        cluster.refuse()
    else:
        cluster.faults["jobsets"] = fault
    result = jobs.apply_job(client, MANIFEST)
    if message is None:          # a 404 on GET is "absent", then the apply itself gets the 404: still a result
        assert result.action == "failed" and "HTTP 404" in result.error
        return
    assert result.action == "failed"
    assert f"cluster `a` (context `ctx-a`, {client.server}{JOBSETS})" in result.error
    assert message in result.error and hint is not None and hint in result.hint
    assert not jobs.delete_job(client, "vision", "train", "preempted").ok


def test_a_cluster_without_a_context_is_a_located_error(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", {"ctx": "http://127.0.0.1:9"})
    target = Target("b", None, "fleet/clusters/b.yaml:4")
    with pytest.raises(ContextError) as e:
        jobs.ClusterClient.open(target, str(kc))
    result = jobs.context_failed(target, e.value)
    assert result.error.startswith("fleet/clusters/b.yaml:4: cluster `b` names no kubeconfig context")
    assert "never uses the current context" in result.hint


def js(job: str, *, pool: str = "h100", suspended: bool = False, terminal: str | None = None) -> JobSet:
    team, name = job.split("/")
    return JobSet(namespace=team, name=name, team=team, job=name, pool=pool, suspended=suspended,
                  terminal_state=terminal)


def test_decide_keeps_running_work_unless_the_plan_preempts_or_moves_it() -> None:
    live = {"gke-a": [js("vision/keep"), js("vision/cut"), js("vision/moved"), js("vision/bumped"),
                      js("vision/gone")],
            "gke-b": [js("nlp/here")]}
    placed = {"vision/keep": ("gke-a", "h100"), "vision/moved": ("gke-b", "h100"), "nlp/here": ("gke-b", "h100")}
    in_git = {"vision/keep", "vision/cut", "vision/moved", "vision/bumped", "nlp/here"}
    deletions, kept = safety.decide(placed, {"vision/bumped": "by vision/big (production)"}, in_git, live)
    assert [(d.cluster, d.job, d.reason) for d in deletions] == [
        ("gke-a", "vision/moved", "moved to gke-b/h100 by the plan"),
        ("gke-a", "vision/bumped", "preempted: by vision/big (production)"),
        ("gke-a", "vision/gone", "job file jobs/vision/gone.yaml removed")]
    assert [(k.cluster, k.job) for k in kept] == [("gke-a", "vision/cut")]     # a budget cut stops nothing


def test_a_running_job_the_plan_places_nowhere_is_a_disruption_only_a_review_allows() -> None:
    """Kept running by apply, but its pool would shrink under it: `fleet apply` needs it in the reviewed plan."""
    from reconciler.plan.types import Cost, Pending, Plan

    pending = Plan((), (Pending("vision/cut", ("over budget",)),), (), (), (), Cost(0.0, 0.0, 0.0))
    live = {"gke-a": [js("vision/cut")]}
    [d] = safety.disruptions(pending, {"vision/cut"}, live, pools={})
    assert (d.job, d.what) == ("vision/cut", "stop") and "pool would shrink" in d.reason
    assert safety.beyond_review([d], []) == [d]
    assert safety.beyond_review([d], safety.disruptions(pending, {"vision/cut"}, live, pools={})) == []
