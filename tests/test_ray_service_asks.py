"""What the pods of running Ray objects (RayJob, RayService) and services (Deployment, LeaderWorkerSet) request,
read from their pod templates as a JobSet's are (observe/asks.py), and a job kept "as it runs" holding that on
its node (plan/live.py, plan/sticky.py). Before, none was read: such a job held everything its node had left,
and a small job that fits beside it waited. Each test fails before its fix."""

from __future__ import annotations

import copy
import json
from typing import Any

from kube_objects import node, serving

from reconciler.observe.model import ClusterObservation
from reconciler.observe.parse import parse_deployment, parse_leader_worker_set, parse_pod
from reconciler.observe.ray import parse_rayjob, parse_rayservice
from reconciler.observe.wire import decode_page


def _pod(cpu: str, memory: str, gpus: int = 1) -> dict[str, Any]:
    return {"containers": [{"name": "ray", "image": "img:1", "resources": {
        "requests": {"cpu": cpu, "memory": memory}, "limits": {"nvidia.com/gpu": gpus}}}]}


def _ray(kind: str, cluster: dict[str, Any]) -> dict[str, Any]:
    labels = {"fleet.dev/team": "lang", "fleet.dev/job": "x", "fleet.dev/pool": "h100"}
    return {"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": "x", "namespace": "lang", "uid": "uid-lang-x",
            "labels": labels, "annotations": {"fleet.dev/spec-digest": "started-before", "fleet.dev/units": "0"}},
            "spec": {"rayClusterSpec" if kind == "RayJob" else "rayClusterConfig": cluster},
            "status": {"jobDeploymentStatus": "Running"} if kind == "RayJob" else {}}


def _asks(row: Any) -> tuple[int | None, int | None, int | None]:
    return row.pod_cpus, row.pod_memory_gib, row.pod_accelerators


def test_a_ray_objects_pods_requests_are_read_from_its_ray_cluster_spec() -> None:
    """The head and each worker group that runs pods (replicas x numOfHosts above 0, not suspended: KubeRay
    deletes a suspended group's pods); a RayJob without a cluster spec of its own (`clusterSelector`) has none
    known, and a bad template loses nothing else of the row. Before, every Ray row read (None, None, None)."""
    cluster = {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": _pod("4", "16Gi", 0)}},
               "workerGroupSpecs": [
                   {"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                    "template": {"spec": _pod("12", "100Gi", 8)}},
                   {"groupName": "idle", "replicas": 0, "minReplicas": 0, "maxReplicas": 4,
                    "template": {"spec": _pod("96", "900Gi", 8)}},
                   {"groupName": "off", "replicas": 1, "suspend": True, "minReplicas": 0, "maxReplicas": 1,
                    "template": {"spec": _pod("64", "500Gi", 8)}}]}
    job = _ray("RayJob", cluster)
    row = parse_rayjob(job)
    assert row is not None and (row.kind, _asks(row)) == ("RayJob", (12, 100, 8))
    service = parse_rayservice(_ray("RayService", copy.deepcopy(cluster)))
    assert service is not None and (service.kind, _asks(service)) == ("RayService", (12, 100, 8))
    cluster["workerGroupSpecs"][1]["replicas"] = 1                  # the idle group scaled up: its pods count
    assert _asks(parse_rayjob(job)) == (96, 900, 8)
    cluster["workerGroupSpecs"][1]["numOfHosts"] = 0
    cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "40"}
    assert _asks(parse_rayjob(job)) == (40, None, 8)                # a pod that states no memory: not known
    cluster["workerGroupSpecs"][0]["template"] = {"spec": {"containers": "oops"}}
    bad = parse_rayjob(job)
    assert bad is not None and _asks(bad) == (None, None, None)
    assert (bad.units, bad.spec_digest) == ((0,), "started-before")
    on_existing = _ray("RayJob", {})
    on_existing["spec"] = {"clusterSelector": {"ray.io/cluster": "shared"}}
    assert _asks(parse_rayjob(on_existing)) == (None, None, None)


def test_a_services_pods_requests_are_read_and_kept_through_the_pruned_page() -> None:
    """A Deployment's template; a LeaderWorkerSet group's leader (its `leaderTemplate`, else the worker template)
    and, with `size` above 1, its workers. The pruned page (observe/wire.py) keeps what is read. Before, a
    ServiceWorkload had no such fields."""
    dep = serving("lang", "s", "h100")
    dep["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "6", "memory": "20Gi"}
    dep["spec"]["template"]["spec"]["initContainers"] = [{"name": "warm", "resources": {"limits": {"cpu": "9"}}}]
    lws = serving("lang", "s", "h100", kind="LeaderWorkerSet", size=1)
    group = lws["spec"]["leaderWorkerTemplate"]
    group["workerTemplate"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "30", "memory": "200Gi"},
                                                                     "limits": {"nvidia.com/gpu": "8"}}
    group["leaderTemplate"] = {"spec": _pod("2", "8Gi", 0)}
    pages = {"deployments": (dep, parse_deployment), "leaderworkersets": (lws, parse_leader_worker_set)}
    for kind, (obj, parse) in pages.items():
        got = decode_page(kind, json.dumps({"items": [obj]}).encode())   # type: ignore[arg-type]
        assert got is not None
        assert parse(got[0][0]) == parse(obj), kind
    assert _asks(parse_deployment(dep)) == (9, 20, 1)
    assert _asks(parse_leader_worker_set(lws)) == (2, 8, 0)       # size 1: the leader alone, which asks no GPU
    group["size"] = 2
    assert _asks(parse_leader_worker_set(lws)) == (30, 200, 8)
    del group["leaderTemplate"]
    group["workerTemplate"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    assert _asks(parse_leader_worker_set(lws)) == (None, 200, 8)   # a quantity not readable: that one not known
    group["workerTemplate"]["spec"]["containers"][0]["resources"] = ["oops"]
    row = parse_leader_worker_set(lws)
    assert row is not None and _asks(row) == (None, None, None) and row.replicas == 2


# --- planning: a job kept as it runs holds what its pods request -------------------------------------------------


def _fleet(*jobs: tuple[str, str]) -> Any:
    from test_plan_faults import BIG, CAT, ONE_NODE

    from reconciler.pipeline import check

    from builders import with_files

    files = {"jobs/lang/a-big.yaml": BIG["lang/a-big"], "jobs/vision/train.yaml": None,
             "fleet/clusters/onprem-sjc.yaml": None, "fleet/clusters/gke-usc1.yaml": ONE_NODE}
    files.update({f"jobs/lang/{name}.yaml": text for name, text in jobs})
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    return v


def _big_beside(v: Any, *objs: dict[str, Any]) -> list[dict[str, Any]]:
    """a-big's JobSet and Workload (150 cpus of the 208-cpu node), on unit 0, and `objs`."""
    from test_live import stamped

    js, wl = stamped(v, "lang/a-big", "h100", "running", units=(0,), digest="started-before", accel="gpu", per_pod=1)
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"][
        "requests"] = {"cpu": "150", "memory": "64Gi"}
    return [js, wl, *objs]


def _holds_its_pods_request(p: Any, job: str) -> None:
    """`job` (its file asks 200 cpus, its pods 8) is kept as it runs on node 0 holding 8, and y starts beside it."""
    from test_plan_faults import kept_at_its_pods_8_cpus

    kept_at_its_pods_8_cpus(p, job)


def test_a_running_rayjob_kept_as_it_runs_holds_what_its_pods_request() -> None:
    """x runs as a RayJob whose head pod requests 8 cpus (a worker group of 0 replicas asks 300); its file now
    asks 200. Before, its requests were not read: it held the 58 cpus the node had left, "not known", and y
    (1 GPU, 1 cpu) waited beside 50 cpus no pod requests."""
    from kube_objects import workload
    from test_live import observed, snapshot
    from test_plan_faults import H100, options_job

    from reconciler.pipeline import plan as pipeline_plan

    v = _fleet(("x", options_job("x", f"{H100}, count: 1, cpus: 200")),
               ("y", options_job("y", f"{H100}, count: 1, cpus: 1")))
    ray = _ray("RayJob", {"headGroupSpec": {"template": {"spec": _pod("8", "64Gi")}},
                          "workerGroupSpecs": [{"groupName": "w", "replicas": 0, "minReplicas": 0, "maxReplicas": 2,
                                                "template": {"spec": _pod("300", "64Gi")}}]})
    wl = workload("lang", "x", "h100")
    wl["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "x",
                                          "uid": "uid-lang-x", "controller": True}]
    seen = observed("gke-usc1", _big_beside(v, wl))
    row = parse_rayjob(ray)
    assert row is not None
    snap = snapshot(60, ClusterObservation.model_construct(**{**seen.__dict__, "jobsets": (*seen.jobsets, row)}))
    _holds_its_pods_request(pipeline_plan(v, observed=snap), "lang/x")


def _service(v: Any, requests: dict[str, str] | None) -> Any:
    """s's Deployment on gke-usc1/h100 (its file asks 200 cpus), its pod on the pool's node, beside a-big."""
    from test_live import observed, snapshot

    dep = serving("lang", "s", "h100", replicas=1, ready=1)
    if requests is not None:
        dep["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = requests
    pod = parse_pod({"metadata": {"name": "s-1", "namespace": "lang", "labels": {
        "fleet.dev/team": "lang", "fleet.dev/job": "s", "fleet.dev/pool": "h100"}},
        "spec": {"nodeName": "h100-0"}, "status": {"phase": "Running"}})
    seen = observed("gke-usc1", _big_beside(v, node("h100-0", pool="h100", accel="gpu")))
    return snapshot(60, seen.model_copy(update={"services": (parse_deployment(dep),), "pods": (pod,),
                                                "services_read": True}))


def test_a_running_service_kept_as_it_runs_holds_what_its_pods_request() -> None:
    """An inference service's Deployment whose pods request 8 cpus, its file now 200: it holds the 8, and y
    starts beside it. Before, it held the 58 the node had left (a service's requests were never read)."""
    from test_plan_faults import H100, options_job

    from reconciler.pipeline import plan as pipeline_plan

    s = options_job("s", f"{H100}, count: 1, cpus: 200") + "kind: inference\nport: 8080\n"
    v = _fleet(("s", s), ("y", options_job("y", f"{H100}, count: 1, cpus: 1")))
    _holds_its_pods_request(pipeline_plan(v, observed=_service(v, {"cpu": "8", "memory": "64Gi"})), "lang/s")
    quiet = pipeline_plan(v, observed=_service(v, None)).placement_of("lang/s")   # its pods state no cpus
    assert quiet is not None and quiet.reason.endswith(
        "holding the 58 cpus they have left (what it runs with is not known: the pod templates of what runs it state "
        "no such request, or none Fleet can read), and runs what its option asks when it starts again"), quiet


def test_a_spread_services_group_kept_as_it_runs_holds_what_its_pods_request() -> None:
    """A service spread over two clusters (not one `Running` job: each group is kept where it runs, live.serving):
    its group on gke-usc1's node, beside a-big, is kept as it runs when its file asks more cpus than the node has
    left, and holds the 8 its Deployment's pods request (`LiveInputs.group_asks`). Before, it held the 58 left."""
    from datetime import UTC, datetime

    from test_plan_faults import CAT, H100, ONE_NODE, options_job

    from reconciler.pipeline import check
    from reconciler.plan import plan
    from reconciler.plan.live import LiveInputs, Running

    from builders import ONPREM, with_files

    s = options_job("s", f"{H100}, count: 1, cpus: 180") + "kind: inference\nport: 8080\nreplicas: 2\nspread: cluster\n"
    v = check(with_files({"jobs/lang/a-big.yaml": options_job("a-big", f"{H100}, count: 1, cpus: 150"),
                          "jobs/lang/s.yaml": s, "jobs/vision/train.yaml": None,
                          "fleet/clusters/onprem-sjc.yaml": ONPREM, "fleet/clusters/gke-usc1.yaml": ONE_NODE}), CAT)
    assert v.ok, v.errors
    live = LiveInputs(datetime(2026, 11, 23, 1, tzinfo=UTC),
                      running={"lang/a-big": Running("lang/a-big", "gke-usc1", "h100", (0,), 150, 64)},
                      serving={"lang/s": (("gke-usc1", "h100", 1, (0,)), ("onprem-sjc", "h100-owned", 1, (0,)))},
                      group_asks={("lang/s", "gke-usc1", "h100"): (8, 64, 1),
                                  ("lang/s", "onprem-sjc", "h100-owned"): (8, 64, 1)})
    p = plan(v, None, live)
    [here] = [x for x in p.placements if x.job == "lang/s" and x.cluster == "gke-usc1"]
    assert (here.units, here.status) == ((0,), "kept"), here
    assert "it is kept as it runs, holding the 8 cpus its pods request" in here.reason, here.reason


def test_a_first_cycle_keeps_a_service_as_the_option_its_pods_run() -> None:
    """With no base plan, a service's gang is read from its pods as a JobSet's is (`pod_accelerators`): its
    Deployment's pods hold 8 GPUs, its file's options are 4 GPUs (slow) then 8: kept as option 1. Before, the first
    option that runs was taken: a 4-GPU service in the plan's bookkeeping on the node its 8 GPUs fill."""
    from test_live import fleet, observed, snapshot
    from test_pod_asks import EIGHT, GONE

    from reconciler.pipeline import plan

    slow_four = "{accelerator: nvidia-h100-80gb, count: 4, relative_speed: 0.3}"
    v = fleet({**GONE, "jobs/vision/s.yaml": "name: s\nteam: vision\nkind: inference\nport: 8080\noptions:\n"
               f"  - {slow_four}\n  - {EIGHT}\nimage: img:1\n"})
    dep = serving("vision", "s", "h100", replicas=1, ready=1)
    dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "8"}
    pod = parse_pod({"metadata": {"name": "s-1", "namespace": "vision", "labels": {
        "fleet.dev/team": "vision", "fleet.dev/job": "s", "fleet.dev/pool": "h100"}},
        "spec": {"nodeName": "h100-0"}, "status": {"phase": "Running"}})
    seen = observed("gke-usc1", [node("h100-0", pool="h100", accel="gpu")])
    snap = snapshot(60, seen.model_copy(update={"services": (parse_deployment(dep),), "pods": (pod,),
                                                "services_read": True}))
    s = plan(v, observed=snap).placement_of("vision/s")
    assert s is not None
    assert (s.option, s.accelerators_per_unit, s.units, s.status) == (1, 8, (0,), "kept"), s


def test_a_running_service_whose_pods_are_not_seen_is_kept_as_it_runs_when_its_file_asks_more() -> None:
    """s's Deployment runs on gke-usc1/h100 (one node, a-big holds 150 of its 208 cpus), its pods not seen (units
    not known: it takes free units of its pool); its file now asks 200 cpus. It is kept as it runs, holding the 8
    cpus its pods request, as one whose pods are seen is, and y starts beside it. Before, no unit had 200 cpus
    free: "it runs on gke-usc1/h100, which has no room for it now", the running service was placed again (here
    nowhere: pending), and y took its accelerator in the plan's bookkeeping."""
    from test_plan_faults import H100, options_job

    from reconciler.pipeline import plan as pipeline_plan

    s = options_job("s", f"{H100}, count: 1, cpus: 200") + "kind: inference\nport: 8080\n"
    v = _fleet(("s", s), ("y", options_job("y", f"{H100}, count: 1, cpus: 1")))
    snap = _service(v, {"cpu": "8", "memory": "64Gi"})
    unseen = snap.model_copy(update={"clusters": tuple(c.model_copy(update={"pods": ()}) for c in snap.clusters)})
    p = pipeline_plan(v, observed=unseen)
    assert not p.pending, p.pending
    _holds_its_pods_request(p, "lang/s")
