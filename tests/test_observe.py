"""`fleet observe` against real HTTP servers speaking the Kubernetes API (tests/kube_api.py): every failure mode
of a cluster is a located, actionable fact in the snapshot, never an exception; pagination; deterministic bytes;
the fixtures are valid against the real CRDs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_api import KubeCluster, clusters, write_kubeconfig
from kube_objects import cond, job_objects, node, serving

from reconciler.observe.kube import Target, observe, read_snapshot
from reconciler.observe.model import Snapshot, Workload, summary
from reconciler.observe.parse import parse_node, parse_workload
from reconciler.problems import RejectedError

from builders import shared_file

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 23, 4, 0, tzinfo=UTC)
FAST = (0.5, 1.0)


def _observe(kc: Path, targets: list[Target], page_size: int = 500) -> Snapshot:
    return observe(targets, str(kc), NOW, timeout_s=FAST, page_size=page_size)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[KubeCluster, KubeCluster, Path]]:
    """Two clusters: `good` with a running job and a node, `bad` for the fault under test."""
    with clusters("good", "bad") as cs:
        cs["good"].add(*job_objects("vision", "train", "v5e", "running"), node("n0", node_pool="v5e-s0"))
        cs["bad"].add(*job_objects("nlp", "sft", "h100", "running"))
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"ctx-good": cs["good"].url, "ctx-bad": cs["bad"].url})
        yield cs["good"], cs["bad"], kc


TARGETS = [Target("good", "ctx-good", "fleet/clusters/good.yaml:7"),
           Target("bad", "ctx-bad", "fleet/clusters/bad.yaml:7")]


def _refuse(c: KubeCluster, kc: Path) -> None:
    c.refuse()


def _fault(key: str, value: str | int) -> Any:
    def inject(c: KubeCluster, kc: Path) -> None:
        c.faults[key] = value
    return inject


def _token(c: KubeCluster, kc: Path) -> None:
    c.token = "another-token"


def _no_context(c: KubeCluster, kc: Path) -> None:
    doc = yaml.safe_load(kc.read_text())
    doc["contexts"] = [x for x in doc["contexts"] if x["name"] != "ctx-bad"]
    kc.write_text(yaml.safe_dump(doc))


FAULTS = [  # (name, inject, status, kind, words the message must have, words the hint must have)
    ("refused", _refuse, "unreachable", "refused", ["cannot connect", "Connection refused"], ["server URL"]),
    ("hang", _fault("*", "hang"), "unreachable", "timeout", ["no answer within"], ["reachable"]),
    ("401", _token, "unreachable", "unauthorized", ["HTTP 401"], ["credentials", "get-credentials"]),
    ("403", _fault("*", 403), "unreachable", "forbidden", ["HTTP 403", "forbidden"], ["ClusterRole"]),
    ("404 CRD missing", _fault("workloads", 404), "degraded", "not-found", ["HTTP 404", "/workloads"],
     ["install the CRD", "Kueue"]),
    ("500", _fault("jobsets", 500), "degraded", "server-error", ["HTTP 500", "/jobsets"], ["retry later"]),
    ("garbage", _fault("workloads", "garbage"), "degraded", "malformed", ["not a Kubernetes list"], ["server URL"]),
    ("context missing", _no_context, "unreachable", "kubeconfig", ["ctx-bad"], ["add the context", "bad.yaml:7"]),
]


@pytest.mark.parametrize(("name", "inject", "status", "kind", "message", "hint"), FAULTS, ids=[f[0] for f in FAULTS])
def test_a_failing_cluster_is_a_fact_with_a_hint_and_the_others_are_read(
        pair: tuple[KubeCluster, KubeCluster, Path], name: str, inject: Any, status: str, kind: str,
        message: list[str], hint: list[str]) -> None:
    _, bad, kc = pair
    inject(bad, kc)
    started = time.monotonic()
    snap = _observe(kc, TARGETS)
    assert time.monotonic() - started < 5, "a failing cluster must cost at most its timeout"
    ok, failed = snap.cluster("good"), snap.cluster("bad")
    assert ok is not None and failed is not None
    assert (ok.status, len(ok.workloads), len(ok.jobsets), len(ok.nodes)) == ("ok", 1, 1, 1)
    assert failed.status == status
    problem = next(p for p in failed.problems if p.kind == kind)
    assert "`bad`" in problem.message
    assert all(w in problem.message for w in message), problem.message
    assert all(w in problem.hint for w in hint), problem.hint
    if status == "degraded":  # what could be read is kept
        assert failed.workloads or failed.jobsets or failed.nodes is not None


def test_a_cluster_without_a_context_names_its_file_and_line(tmp_path: Path) -> None:
    snap = observe([Target("onprem", None, "fleet/clusters/onprem.yaml:6")], None, NOW)
    (c,) = snap.clusters
    assert (c.status, c.problems[0].kind) == ("unreachable", "no-context")
    assert c.problems[0].message.startswith("fleet/clusters/onprem.yaml:6: cluster `onprem`")
    assert "never uses the current context" in c.problems[0].hint


def test_the_context_the_yaml_names_is_used_never_the_current_one(tmp_path: Path) -> None:
    with clusters("a", "b") as cs:
        cs["b"].add(node("only-in-b"))
        kc = write_kubeconfig(tmp_path / "kc", {"ctx-a": cs["a"].url, "ctx-b": cs["b"].url}, current="ctx-a")
        snap = _observe(kc, [Target("b", "ctx-b", "x")])
    assert [n.name for n in snap.clusters[0].nodes] == ["only-in-b"]
    assert cs["a"].requests == []


def test_malformed_objects_are_skipped_one_by_one_and_named(tmp_path: Path) -> None:
    with clusters("a") as cs:
        bad_cond = job_objects("vision", "odd", "v5e", "running")[1]
        bad_cond["status"]["conditions"][0]["status"] = "Maybe"
        cs["a"].add(*job_objects("vision", "fine", "v5e", "running"), bad_cond,
                    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"unschedulable": "yes"}})
        kc = write_kubeconfig(tmp_path / "kc", {"ctx": cs["a"].url})
        (c,) = _observe(kc, [Target("a", "ctx", "x")]).clusters
    assert c.status == "degraded"
    assert [w.jobset for w in c.workloads] == ["fine"] and c.nodes == ()
    messages = sorted(p.message for p in c.problems)
    assert all(p.kind == "invalid-object" for p in c.problems)
    assert "skipped node n1: field `spec.unschedulable`: expected a boolean, got str" in messages[0]
    assert "skipped workload vision/jobset-odd-0a1b2: field `status.conditions[0]`" in messages[1]


def test_lists_are_read_page_by_page(tmp_path: Path) -> None:
    with clusters("a") as cs:
        for i in range(7):
            cs["a"].add(*job_objects("vision", f"j{i}", "v5e", "running"), node(f"n{i}"))
        kc = write_kubeconfig(tmp_path / "kc", {"ctx": cs["a"].url})
        (c,) = _observe(kc, [Target("a", "ctx", "x")], page_size=3).clusters
        lists = [(r.path, r.query) for r in cs["a"].requests if r.path.endswith("/workloads")]
    assert len(c.workloads) == len(c.jobsets) == len(c.nodes) == 7
    assert [q.get("limit") for _, q in lists] == ["3", "3", "3"]
    assert [bool(q.get("continue")) for _, q in lists] == [False, True, True]


def test_snapshot_bytes_do_not_depend_on_object_order(tmp_path: Path) -> None:
    objs = [o for i in range(5) for o in job_objects("vision", f"j{i}", "v5e", "running")]
    objs += [node(f"n{i}", node_pool=f"v5e-s{i}") for i in range(5)]
    texts = []
    for order in (objs, objs[::-1]):
        with clusters("a", "b") as cs:
            cs["a"].add(*order)
            cs["b"].add(*sorted(objs[:3], key=lambda o: o["kind"], reverse=order is not objs))
            kc = write_kubeconfig(tmp_path / "kc", {"ca": cs["a"].url, "cb": cs["b"].url})
            texts.append(_observe(kc, [Target("b", "cb", "x"), Target("a", "ca", "x")]).to_json()
                         .replace(cs["a"].url, "A").replace(cs["b"].url, "B"))
    assert texts[0] == texts[1]
    snap = Snapshot.model_validate_json(texts[0])
    assert [c.name for c in snap.clusters] == ["a", "b"]
    assert snap.to_json() == texts[0]


@pytest.mark.parametrize(("phase", "expected"), [
    ("queued", "queued"), ("admitted", "admitted"), ("running", "running"), ("succeeded", "succeeded"),
    ("failed", "failed"), ("evicted", "evicted")])
def test_workload_phase_follows_kueue_conditions(phase: str, expected: str) -> None:
    w = parse_workload(job_objects("vision", "j", "v5e", phase)[1])
    assert w.phase() == expected


def test_workload_fields_from_the_v1beta2_object() -> None:
    w = parse_workload(job_objects("vision", "j", "v5e-2x2", "evicted", evictions=2, past_seconds=600)[1])
    assert w == Workload(
        namespace="vision", name="jobset-j-0a1b2", created_at=datetime(2026, 11, 23, tzinfo=UTC), queue_name="vision",
        priority=100, jobset="j", jobset_uid="uid-vision-j", requeue_count=2,
        requeue_at=datetime(2026, 11, 23, 1, 45, tzinfo=UTC), past_execution_seconds=600, evictions=w.evictions,
        conditions=w.conditions)
    assert [(e.reason, e.underlying_cause, e.count) for e in w.evictions] == [("Preempted", "InClusterQueue", 2)]
    assert [c.type for c in w.conditions] == ["Admitted", "Evicted", "Preempted", "QuotaReserved", "Requeued"]
    running = parse_workload(job_objects("vision", "j", "v5e-2x2", "running", replicas=4)[1])
    assert (running.cluster_queue, running.flavors, running.admitted_pods) == (
        "vision", {"google.com/tpu": "v5e-2x2"}, 4)


@pytest.mark.parametrize(("obj", "pool", "unit", "usable", "why"), [
    (node("a", node_pool="v5p-4x4x4-s3"), "v5p-4x4x4", 3, True, []),
    (node("b", pool="h100", node_pool="a3-nodes"), "h100", None, True, []),
    (node("c", node_pool="p5-group", eks=True), "p5-group", None, True, []),
    (node("d", node_pool="v5e-s0", ready=False), "v5e", 0, False, ["Ready"]),
    (node("e", node_pool="v5e-s1", unschedulable=True), "v5e", 1, False, []),
    (node("f", node_pool="p5", eks=True, extra=(cond("AcceleratedHardwareReady", False, "NvidiaXID79", 5),)),
     "p5", None, False, ["AcceleratedHardwareReady"]),
    (node("g", pool="h100", extra=(cond("fleet.dev/AcceleratorHealthy", False, "EccErrors", 5),)),
     "h100", None, False, ["fleet.dev/AcceleratorHealthy"]),
    (node("h", pool="h100", extra=(cond("GPUProblem", True, "XidError", 5),)), "h100", None, False, ["GPUProblem"]),
    (node("i", pool="h100", extra=(cond("AcceleratedHardwareReady", True, "Healthy", 5),
                                   cond("KernelDeadlock", False, "KernelHasNoDeadlock", 5))), "h100", None, True, []),
])
def test_node_pool_unit_and_health_from_labels_and_conditions(obj: dict[str, Any], pool: str, unit: int | None,
                                                              usable: bool, why: list[str]) -> None:
    n = parse_node(obj)
    assert (n.pool, n.unit, n.usable, [c.type for c in n.problems]) == (pool, unit, usable, why)


def test_fixture_objects_validate_against_the_crds(tmp_path: Path) -> None:
    """What the test servers serve is what Kueue and JobSet would accept (../shared/tools/validate_kueue.py)."""
    objs = [o for phase in ("queued", "admitted", "running", "succeeded", "failed", "evicted")
            for o in job_objects("vision", f"j-{phase}", "v5e", phase, restarts=2, evictions=1, past_seconds=60)]
    (tmp_path / "objs.yaml").write_text(yaml.safe_dump_all(objs))
    r = subprocess.run([sys.executable, str(shared_file("tools/validate_kueue.py")), str(tmp_path / "objs.yaml")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "12 document(s), 0 error(s)" in r.stdout


def test_server_side_apply_conflicts_force_and_delete(tmp_path: Path) -> None:
    """The harness's apply semantics, which the apply work builds on."""
    import urllib.error
    import urllib.request

    with clusters("a") as cs:
        url = cs["a"].url + "/apis/jobset.x-k8s.io/v1alpha2/namespaces/vision/jobsets/j"

        def call(method: str, query: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
            data = json.dumps(body).encode() if body else None
            req = urllib.request.Request(f"{url}?{query}", method=method, data=data,
                                         headers={"Authorization": "Bearer fleet-test-token",
                                                  "Content-Type": "application/apply-patch+yaml"})
            try:
                with urllib.request.urlopen(req) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())

        fleet = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                 "metadata": {"name": "j", "namespace": "vision"}, "spec": {"suspend": True}}
        assert call("PATCH", "fieldManager=fleet", fleet)[0] == 200
        kueue = {**fleet, "spec": {"suspend": False}}
        code, status = call("PATCH", "fieldManager=kueue", kueue)
        assert (code, status["reason"]) == (409, "Conflict") and '.spec.suspend (owned by "fleet")' in status["message"]
        code, obj = call("PATCH", "fieldManager=kueue&force=true", kueue)
        assert (code, obj["spec"]["suspend"]) == (200, False)
        assert [m["manager"] for m in obj["metadata"]["managedFields"]] == ["fleet", "kueue"]
        assert call("PATCH", "", fleet)[0] == 400
        assert call("DELETE", "", None)[0] == 200
        assert call("DELETE", "", None)[0] == 404
        assert [r.method for r in cs["a"].requests] == ["PATCH"] * 4 + ["DELETE"] * 2


def test_read_snapshot_names_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "snap.json"
    bad.write_text(json.dumps({"version": 1, "observed_at": "2026-11-23T04:00:00Z", "clusters": [{"name": "a"}]}))
    with pytest.raises(RejectedError, match=r"snap.json: field `clusters.0.status`: Field required") as e:
        read_snapshot(bad)
    assert "fleet observe --format json" in e.value.hint


def _services(c: KubeCluster) -> None:
    c.add(serving("serving", "chat", "h100", name="chat-h100", replicas=3, ready=2),
          serving("serving", "chat", "a100", name="chat-a100", replicas=1, ready=1),
          serving("serving", "big", "v5e", kind="LeaderWorkerSet", replicas=2, ready=1, size=4))
    other = serving("kube-system", "coredns", "system")
    del other["metadata"]["labels"]["fleet.dev/job"]       # not Fleet's: never read
    c.add(other)


def test_inference_deployments_and_leaderworkersets_are_observed_with_pool_and_ready_replicas(
        tmp_path: Path) -> None:
    """`fleet observe` sees which services run where (one workload per pool: render/service.py) and how many
    replicas are ready; only Fleet's objects, asked for by label selector; same bytes whatever the order."""
    with clusters("a", "b") as cs:
        _services(cs["a"])
        for obj in reversed([o for objs in cs["a"].objects.values() for o in objs.values()]):
            cs["b"].add(obj)
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"ctx-a": cs["a"].url, "ctx-b": cs["b"].url})
        snap = _observe(kc, [Target("a", "ctx-a", "a.yaml:1"), Target("b", "ctx-b", "b.yaml:1")], page_size=1)
        asked = {r.path: r.query.get("labelSelector") for r in cs["a"].requests}
    a, b = snap.clusters
    assert a.status == "ok" and a.problems == ()
    assert [(s.kind, s.namespace, s.name, s.job_id, s.pool, s.replicas, s.ready_replicas) for s in a.services] == [
        ("LeaderWorkerSet", "serving", "big", "serving/big", "v5e", 2, 1),
        ("Deployment", "serving", "chat-a100", "serving/chat", "a100", 1, 1),
        ("Deployment", "serving", "chat-h100", "serving/chat", "h100", 3, 2)]
    assert asked["/apis/apps/v1/deployments"] == asked["/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets"] == \
        "fleet.dev/job"
    assert a.model_dump_json(exclude={"name", "context", "server"}) == \
        b.model_dump_json(exclude={"name", "context", "server"})
    assert "3 service workloads (4/6 replicas ready)" in summary(snap)


def test_a_forbidden_service_list_is_a_fact_and_a_cluster_without_the_lws_crd_has_none(tmp_path: Path) -> None:
    with clusters("a", "b") as cs:
        for c in cs.values():
            _services(c)
            c.add(*job_objects("vision", "train", "v5e", "running"))
        cs["a"].faults["deployments"] = 403
        cs["b"].faults["leaderworkersets"] = 404
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"ctx-a": cs["a"].url, "ctx-b": cs["b"].url})
        a, b = _observe(kc, [Target("a", "ctx-a", "a.yaml:1"), Target("b", "ctx-b", "b.yaml:1")]).clusters
    assert a.status == "degraded" and len(a.jobsets) == 1 and [s.name for s in a.services] == ["big"]
    (problem,) = a.problems
    assert (problem.resource, problem.kind) == ("deployments", "forbidden") and "HTTP 403" in problem.message
    assert "`list` on deployments" in problem.hint
    assert b.status == "ok" and b.problems == () and [s.kind for s in b.services] == ["Deployment", "Deployment"]


def test_the_leaderworkerset_fixture_validates_against_its_crd(tmp_path: Path) -> None:
    (tmp_path / "lws.yaml").write_text(yaml.safe_dump(serving("serving", "big", "v5e", kind="LeaderWorkerSet")))
    r = subprocess.run([sys.executable, str(shared_file("tools/validate_kueue.py")), str(tmp_path / "lws.yaml")],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0 and "1 document(s), 0 error(s)" in r.stdout, r.stdout + r.stderr


def test_the_pods_of_fleets_workloads_are_observed_with_their_node_and_give_each_workloads_units(
        tmp_path: Path) -> None:
    """Issue 20 item 1: a Deployment does not say which units its replicas use; its pods do. `fleet observe`
    lists the pods with Fleet's job label (only those) and the node each is bound to; occupancy maps them to
    units: a TPU slice's hosts are one unit, a GPU node group's nodes are numbered by name."""
    from kube_objects import node

    from reconciler.observe.occupancy import pod_units

    def pod(name: str, job: str, pool: str, node_name: str | None, phase: str = "Running") -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "serving",
                             "labels": {"fleet.dev/team": "serving", "fleet.dev/job": job, "fleet.dev/pool": pool}},
                "spec": {"nodeName": node_name} if node_name else {},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": str(phase == "Running")}]}}

    with clusters("a") as cs:
        cs["a"].add(node("v5e-s0-h0", node_pool="v5e-s0"), node("v5e-s1-h0", node_pool="v5e-s1"),
                    node("v5e-s1-h1", node_pool="v5e-s1"), node("h100-b", pool="h100", accel="gpu"),
                    node("h100-a", pool="h100", accel="gpu"),
                    pod("big-0", "big", "v5e", "v5e-s1-h0"), pod("big-1", "big", "v5e", "v5e-s1-h1"),
                    pod("chat-0", "chat", "h100", "h100-b"), pod("chat-1", "chat", "h100", "h100-b"),
                    pod("chat-2", "chat", "h100", None, "Pending"), pod("old", "chat", "h100", "h100-a", "Succeeded"))
        other = pod("theirs", "x", "h100", "h100-a")
        del other["metadata"]["labels"]["fleet.dev/job"]
        cs["a"].add(other)
        kc = write_kubeconfig(tmp_path / "kubeconfig", {"ctx-a": cs["a"].url})
        snap = _observe(kc, [Target("a", "ctx-a", "a.yaml:1")])
        asked = {r.path: r.query.get("labelSelector") for r in cs["a"].requests}
    (a,) = snap.clusters
    assert a.status == "ok" and asked["/api/v1/pods"] == "fleet.dev/job"
    assert [(p.name, p.job_id, p.node, p.ready) for p in a.pods] == [
        ("big-0", "serving/big", "v5e-s1-h0", True), ("big-1", "serving/big", "v5e-s1-h1", True),
        ("chat-0", "serving/chat", "h100-b", True), ("chat-1", "serving/chat", "h100-b", True),
        ("chat-2", "serving/chat", None, False), ("old", "serving/chat", "h100-a", False)]
    assert pod_units(a) == {("serving/big", "v5e"): (1,), ("serving/chat", "h100"): (1, 1)}


def test_a_jobsets_pod_requests_are_read_and_a_template_fleet_cannot_read_loses_nothing_else() -> None:
    """What a running job runs with (plan/sticky.py keeps a job whose option grew as it runs, holding that): the
    largest pod's requests over its replicated jobs, containers summed, rounded up; none where a pod states none
    or a quantity does not parse; a template of the wrong shape leaves them unknown, never the JobSet skipped."""
    from reconciler.observe.parse import parse_jobset, quantity

    assert [quantity(q) for q in ("8", "500m", "64Gi", "1e3", "1.5", "x", "-1")] == [
        8.0, 0.5, 64 * 2.0**30, 1000.0, 1.5, None, None]
    js = job_objects("vision", "a", "h100", accel="gpu")[0]
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert (parse_jobset(js).pod_cpus, parse_jobset(js).pod_memory_gib) == (None, None)   # no requests stated
    pod["containers"][0]["resources"]["requests"] = {"cpu": "7500m", "memory": "1000Mi"}
    pod["containers"].append({"name": "side", "resources": {"requests": {"cpu": "1", "memory": "24Gi"}}})
    assert (parse_jobset(js).pod_cpus, parse_jobset(js).pod_memory_gib) == (9, 25)
    pod["containers"][1]["resources"]["requests"]["cpu"] = "lots"
    assert (parse_jobset(js).pod_cpus, parse_jobset(js).pod_memory_gib) == (None, 25)
    js["spec"]["replicatedJobs"] = [{"template": "not an object"}]
    got = parse_jobset(js)
    assert (got.name, got.pod_cpus, got.pod_memory_gib) == ("a", None, None)


def test_a_pod_request_beyond_a_float_is_not_known_never_a_traceback() -> None:
    """A JobSet's CRD schema lets `1e400` through as a quantity (a pattern, not a parse), and a decoded JSON number
    may be infinite or an integer too large for a float: each raised OverflowError out of `fleet observe`, the
    snapshot lost for one template. Now such a request is not known, as one that does not parse."""
    from reconciler.observe.parse import parse_jobset, quantity

    assert [quantity(q) for q in ("1e400", "1e99999", float("inf"), float("nan"), 10**400, "1e-400")] == [
        None, None, None, None, None, 0.0]
    js = job_objects("vision", "a", "h100", accel="gpu")[0]
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"]["requests"] = {"cpu": "1e400", "memory": "8Gi"}
    got = parse_jobset(js)
    assert (got.name, got.pod_cpus, got.pod_memory_gib) == ("a", None, 8)
    pod["containers"][0]["resources"]["requests"] = {"cpu": "4", "memory": float("inf")}
    assert (parse_jobset(js).pod_cpus, parse_jobset(js).pod_memory_gib) == (4, None)
