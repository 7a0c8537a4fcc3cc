"""Defects in what `fleet render` writes for the clusters, each checked against what the controller that reads the
object does with it (Kueue's flavor assignment, KubeRay's submitter, Kubernetes' Service selection, the EKS node
group the infra stack creates, the API server's int32 fields and list limits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.render import render
from reconciler.validate import Validated

from builders import GKE, job, with_files
from render_check import docs

Obj = dict[str, Any]


def validated(files: dict[str, bytes]) -> Validated:
    v = check(files, load_catalog())
    assert v.ok, [str(p) for p in v.errors]
    return v


def rendered(files: dict[str, bytes]) -> dict[str, str]:
    v = validated(files)
    return render(v, plan(v), load_catalog())


def objects(files: dict[str, str], kind: str, cluster: str | None = None) -> list[Obj]:
    return [d for path, text in sorted(files.items()) if path.endswith(".yaml")
            and (cluster is None or path.startswith(f"{cluster}/")) for d in docs(text) if d.get("kind") == kind]


def errors(files: dict[str, bytes]) -> list[tuple[str, str, str]]:
    return [(p.path, p.field, p.message) for p in check(files, load_catalog()).errors]


def gke_usc1(*pools: str) -> str:
    """The builders' GKE cluster with these pools (flow mappings) instead of its own."""
    return GKE.split("pools:")[0] + "pools:\n" + "".join(f"  - {{{pool}}}\n" for pool in pools)


# --- 1. a RayJob's submitter pod goes wherever Kueue's first flavor is ------------------------------------------

def kueue_flavor(files: dict[str, str], cluster: str, team: str, pod_spec: Obj) -> str:
    """The flavor Kueue's flavor assigner gives a pod set of `team`'s ClusterQueue (flavorassigner.go): the pod's
    nodeSelector, cut to the label keys the queue's flavors use, is matched against each flavor's nodeLabels as
    against a node's, and the first flavor in the queue's order that matches wins (every flavor here covers
    cpu and memory with room to spare)."""
    labels = {f["metadata"]["name"]: f["spec"]["nodeLabels"] for f in objects(files, "ResourceFlavor", cluster)}
    [cq] = [q for q in objects(files, "ClusterQueue", cluster) if q["metadata"]["name"] == team]
    order = [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]
    keys = {k for flavor in order for k in labels[flavor]}
    selector = {k: v for k, v in (pod_spec.get("nodeSelector") or {}).items() if k in keys}
    for flavor in order:
        if all(labels[flavor].get(k) == v for k, v in selector.items()):
            return flavor
    raise AssertionError(f"no flavor of {team} fits {selector}")


def rayjob_pod_sets(rj: Obj) -> dict[str, Obj]:
    """The pod sets of a RayJob's Kueue Workload (Kueue's rayjob controller): head, each worker group and, in
    KubeRay's default K8sJobMode, the submitter Job's pod, KubeRay's default template when the RayJob has none
    (no nodeSelector)."""
    cluster = rj["spec"]["rayClusterSpec"]
    sets = {"head": cluster["headGroupSpec"]["template"]["spec"]}
    sets.update({g["groupName"]: g["template"]["spec"] for g in cluster.get("workerGroupSpecs", ())})
    if rj["spec"].get("submissionMode", "K8sJobMode") == "K8sJobMode":
        default = {"containers": [{"name": "ray-job-submitter"}], "restartPolicy": "Never"}
        sets["submitter"] = (rj["spec"].get("submitterPodTemplate") or {"spec": default})["spec"]
    return sets


RAY_POOLS = gke_usc1("name: a-v5p, accelerator: tpu-v5p, topology: 4x4x4, max: 4",
                     "name: h100, accelerator: nvidia-h100-80gb, max: 8")


def test_every_pod_of_a_rayjob_including_its_submitter_runs_on_the_pool_the_plan_chose() -> None:
    """vision's ClusterQueue lists the TPU flavor `a-v5p` first. The RayJob's head and workers select the H100
    pool; its submitter pod (KubeRay's K8sJobMode) must too, or Kueue assigns it `a-v5p` and its TPU node labels:
    the `ray job submit` pod then waits for a TPU host (or makes the autoscaler buy one) while the Ray cluster holds
    16 GPUs and runs nothing."""
    ray = job("rl", "vision", "framework: ray\ncommand: [python, -m, learner]\n", count=16)
    files = rendered(with_files({"fleet/clusters/gke-usc1.yaml": RAY_POOLS, "fleet/clusters/onprem-sjc.yaml": None,
                                 "jobs/vision/train.yaml": None, "jobs/vision/rl.yaml": ray}))
    [rj] = objects(files, "RayJob")
    assert rj["metadata"]["labels"]["fleet.dev/pool"] == "h100"
    sets = rayjob_pod_sets(rj)
    assert set(sets) == {"head", "workers", "submitter"}
    assigned = {name: kueue_flavor(files, "gke-usc1", "vision", spec) for name, spec in sets.items()}
    assert assigned == dict.fromkeys(sets, "h100")
    submitter = sets["submitter"]["containers"][0]
    assert submitter["image"] == "img:1" and submitter["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    assert "command" not in submitter          # KubeRay writes `ray job submit ...` into an empty command
    assert "metadata" not in rj["spec"]["submitterPodTemplate"]   # no job labels: not a unit of the gang


# --- 2. an EKS flavor selects the node group by a name the infra stack shortened --------------------------------

LONG_POOL = "p5-on-demand-capacity-for-the-robotics-team"     # 43 characters: above the 40 of a node group name


def test_an_eks_flavor_and_its_pods_select_the_node_group_the_infra_stack_creates() -> None:
    """The infra stack names a node group at most 40 characters (a longer pool name keeps its start and ends in
    a hash: `stackspec.node_pool_name`), and EKS labels each node `eks.amazonaws.com/nodegroup` with that name.
    The flavor and the JobSet's nodeSelector must carry the same name, or nothing placed there ever schedules."""
    import json

    eks = ("name: eks-use1\nprovider: aws\nregion: us-east-1\nkubernetes: {cluster: ml-use1}\npools:\n"
           f"  - {{name: {LONG_POOL}, accelerator: nvidia-h100-80gb, machine_type: p5.48xlarge, max: 4}}\n")
    files = rendered(with_files({"fleet/clusters/eks-use1.yaml": eks, "fleet/clusters/gke-usc1.yaml": None,
                                 "fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None,
                                 "jobs/vision/big.yaml": job("big", "vision", count=16)}))
    [group] = json.loads(files["stacks/eks-use1-infra.json"])["node_pools"]
    assert len(group["name"]) <= 40 and group["pool"] == LONG_POOL
    [flavor] = objects(files, "ResourceFlavor", "eks-use1")
    assert flavor["metadata"]["name"] == LONG_POOL
    assert flavor["spec"]["nodeLabels"]["eks.amazonaws.com/nodegroup"] == group["name"]
    [js] = objects(files, "JobSet", "eks-use1")
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == flavor["spec"]["nodeLabels"]


# --- 3. a Service that selects only LWS leaders drops the job's Deployment replicas -----------------------------

MIXED_POOLS = gke_usc1("name: v5p-2x2x1, accelerator: tpu-v5p, topology: 2x2x1, max: 2",
                       "name: v5p-2x2x2, accelerator: tpu-v5p, topology: 2x2x2, max: 4")
MIXED_JOB = ("name: srv\nteam: vision\nkind: inference\nreplicas: 5\noptions:\n"
             "  - {accelerator: tpu-v5p, topology: 2x2x1}\n  - {accelerator: tpu-v5p, topology: 2x2x2}\n"
             "image: img:1\nport: 8000\n")


def pods_of(obj: Obj) -> list[tuple[Obj, int]]:
    """(pod template, how many pods) of a Deployment, or of a LeaderWorkerSet per role: the leader (its
    `leaderTemplate`, else the worker template) with LWS's `worker-index: "0"`, the workers with their own."""
    if obj["kind"] == "Deployment":
        return [(obj["spec"]["template"], obj["spec"]["replicas"])]
    lwt, groups = obj["spec"]["leaderWorkerTemplate"], obj["spec"]["replicas"]
    leader, worker = lwt.get("leaderTemplate", lwt["workerTemplate"]), lwt["workerTemplate"]

    def indexed(t: Obj, i: str) -> Obj:
        return {**t, "metadata": {**t["metadata"], "labels": {**t["metadata"]["labels"],
                                                               "leaderworkerset.sigs.k8s.io/worker-index": i}}}
    return [(indexed(leader, "0"), groups), (indexed(worker, "1"), groups * (lwt["size"] - 1))]


def test_a_service_sends_traffic_to_every_replica_when_a_job_mixes_deployments_and_leader_worker_sets() -> None:
    """Five replicas of one TPU inference job in one cluster: 2 single-host (a Deployment on v5p-2x2x1) and 3 of
    two hosts (a LeaderWorkerSet on v5p-2x2x2). The Service must select the Deployment's pods and each LWS
    group's leader, and no LWS worker; selecting only `worker-index: "0"` left the Deployment's 2 replicas without
    traffic."""
    files = rendered(with_files({"fleet/clusters/gke-usc1.yaml": MIXED_POOLS, "fleet/clusters/onprem-sjc.yaml": None,
                                 "jobs/vision/train.yaml": None, "jobs/vision/srv.yaml": MIXED_JOB}))
    [dep] = objects(files, "Deployment")
    [lws] = objects(files, "LeaderWorkerSet")
    [svc] = objects(files, "Service")
    assert (dep["spec"]["replicas"], lws["spec"]["replicas"]) == (2, 3)
    selector = svc["spec"]["selector"].items()
    served = [(obj["kind"], n) for obj in (dep, lws) for pod, n in pods_of(obj)
              if selector <= pod["metadata"]["labels"].items()]
    assert served == [("Deployment", 2), ("LeaderWorkerSet", 3)]
    # the Deployment's selector still selects its own pods, and both templates ask for the same pods as before
    assert dep["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["leaderTemplate"]["spec"] == lwt["workerTemplate"]["spec"]


def test_a_service_of_one_kind_of_workload_selects_as_before() -> None:
    """A job whose replicas in a cluster are all Deployments, or all LeaderWorkerSets, keeps its Service selector
    and pod templates (no new label, no leaderTemplate): nothing running is rolled for the mixed case's sake."""
    one = MIXED_JOB.replace("  - {accelerator: tpu-v5p, topology: 2x2x2}\n", "").replace("replicas: 5", "replicas: 2")
    two = MIXED_JOB.replace("  - {accelerator: tpu-v5p, topology: 2x2x1}\n", "").replace("replicas: 5", "replicas: 3")
    files = rendered(with_files({"fleet/clusters/gke-usc1.yaml": MIXED_POOLS, "fleet/clusters/onprem-sjc.yaml": None,
                                 "jobs/vision/train.yaml": None, "jobs/vision/srv.yaml": one,
                                 "jobs/vision/big.yaml": two.replace("name: srv", "name: big")}))
    by_job = {s["metadata"]["name"]: s["spec"]["selector"] for s in objects(files, "Service")}
    assert by_job == {"srv": {"fleet.dev/team": "vision", "fleet.dev/job": "srv"},
                      "big": {"fleet.dev/team": "vision", "fleet.dev/job": "big",
                              "leaderworkerset.sigs.k8s.io/worker-index": "0"}}
    [lws] = objects(files, "LeaderWorkerSet")
    assert "leaderTemplate" not in lws["spec"]["leaderWorkerTemplate"]
    assert all("fleet.dev/serving" not in d["spec"]["template"]["metadata"]["labels"]
               for d in objects(files, "Deployment"))


# --- 4. two inference jobs whose workloads would have one name -------------------------------------------------

TWO_POOLS = gke_usc1("name: a, accelerator: nvidia-h100-80gb, max: 2", "name: b, accelerator: nvidia-h100-80gb, max: 2")


def test_two_inference_jobs_whose_deployments_would_share_a_name_are_refused() -> None:
    """`srv`, spread over pools `a` and `b` of one cluster, has a Deployment per pool, `srv-a` and `srv-b`; the
    job `srv-a` has a Deployment `srv-a` in the same namespace. Rendered, both were `Deployment vision/srv-a`:
    one jobs stack holding two different objects of one name (apply fails for the whole cluster, or one service's
    Deployment replaces the other's). Validation names the clash, at the job's `name`."""
    base = {"fleet/clusters/gke-usc1.yaml": TWO_POOLS, "fleet/clusters/onprem-sjc.yaml": None,
            "jobs/vision/train.yaml": None,
            "jobs/vision/srv.yaml": job("srv", "vision", "kind: inference\nreplicas: 3\nport: 80\n", count=8)}
    clash = with_files({**base, "jobs/vision/srv-a.yaml": job("srv-a", "vision", "kind: inference\nport: 80\n")})
    [(path, field, message)] = errors(clash)
    assert (path, field) == ("jobs/vision/srv-a.yaml", "name")
    assert "`vision/srv`" in message and "pool `a`" in message and "`srv-a`" in message
    # (`a-b` and `a` with pools `b-c` and `c` would clash as `a-b-c` the same way)
    pools = TWO_POOLS.replace("name: a,", "name: b-c,").replace("name: b,", "name: c,")
    deep = with_files({**base, "fleet/clusters/gke-usc1.yaml": pools,
                       "jobs/vision/srv.yaml": job("srv", "vision", "kind: inference\nport: 80\n"),
                       "jobs/vision/srv-b.yaml": job("srv-b", "vision", "kind: inference\nport: 80\n")})
    [(path, field, message)] = errors(deep)
    assert (path, field) == ("jobs/vision/srv-b.yaml", "name") and "`srv-b-c`" in message
    # a training job of that name has a JobSet, a kind of its own: no clash; nor in another team's namespace
    fine = {**base, "jobs/vision/srv-a.yaml": job("srv-a", "vision"),
            "jobs/lang/srv-a.yaml": job("srv-a", "lang", "kind: inference\nport: 80\n")}
    assert errors(with_files(fine)) == []


# --- 5. priority values Kueue's int32 fields cannot hold ---------------------------------------------------------

def test_a_priority_value_beyond_int32_is_refused_where_it_is_written() -> None:
    """WorkloadPriorityClass `value` and ClusterQueue `borrowWithinCohort.maxPriorityThreshold` are int32: a
    class of value 3,000,000,000 rendered a WorkloadPriorityClass the API server rejects, and with it the whole
    Kueue stack of every cluster. Validation refuses it at the line, and the int32 bounds themselves pass."""
    from builders import PRIORITIES

    big = PRIORITIES.replace("value: 10000", "value: 3000000000")
    [(path, field, _)] = errors(with_files({"policies/priorities.yaml": big}))
    assert (path, field) == ("policies/priorities.yaml", "classes[0].value")
    low = PRIORITIES.replace("value: 10,", "value: -2147483649,")
    assert [(p, f) for p, f, _ in errors(with_files({"policies/priorities.yaml": low}))] == [
        ("policies/priorities.yaml", "classes[3].value")]
    threshold = PRIORITIES.replace("max_priority_threshold: 100", "max_priority_threshold: 2147483648")
    assert [(p, f) for p, f, _ in errors(with_files({"policies/priorities.yaml": threshold}))] == [
        ("policies/priorities.yaml", "preemption.borrow_within_cohort.max_priority_threshold")]
    edge = PRIORITIES.replace("value: 10000", "value: 2147483647").replace("value: 10,", "value: -2147483648,")
    files = rendered(with_files({"policies/priorities.yaml": edge}))
    values = sorted(c["value"] for c in objects(files, "WorkloadPriorityClass", "gke-usc1"))
    assert values == [-2147483648, 100, 1000, 2147483647]


# --- 6. a ClusterQueue holds at most 64 flavors in a resource group ------------------------------------------

def many_pools(n: int, accelerator: str = "nvidia-h100-80gb") -> str:
    return gke_usc1(*(f"name: h{i:03d}, accelerator: {accelerator}, max: 1" for i in range(n)))


def test_a_cluster_whose_pools_a_team_uses_exceed_kueues_64_flavors_is_refused() -> None:
    """A team's ClusterQueue lists every pool of each accelerator the team (or its cohort, whose quota it may
    borrow) holds, in one resource group, and Kueue's CRD allows 64 flavors there: 65 H100 pools in one cluster
    rendered a ClusterQueue the API server rejects, and with it the cluster's whole Kueue stack. Validation says
    so at the cluster's `pools`; 64 pools render a queue the CRD accepts."""
    base = {"fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None}
    [(path, field, message)] = errors(with_files({**base, "fleet/clusters/gke-usc1.yaml": many_pools(65)}))
    assert (path, field) == ("fleet/clusters/gke-usc1.yaml", "pools") and "65" in message and "64" in message
    files = rendered(with_files({**base, "fleet/clusters/gke-usc1.yaml": many_pools(64),
                                 "jobs/vision/a.yaml": job("a", "vision", count=8)}))
    queues = objects(files, "ClusterQueue", "gke-usc1")
    assert max(len(g["flavors"]) for q in queues for g in q["spec"]["resourceGroups"]) == 64
    # pools of an accelerator no team holds are no team's flavors: 65 of them are fine
    assert errors(with_files({**base, "fleet/clusters/gke-usc1.yaml": many_pools(65, "nvidia-a100-40gb")})) == []


# --- 7. a LeaderWorkerSet named `<job>-<pool>` too long for its StatefulSets -----------------------------------

def test_a_multi_host_service_whose_per_pool_leader_worker_set_name_is_too_long_is_refused() -> None:
    """A service on several pools of a cluster has a LeaderWorkerSet per pool, `<job>-<pool>`, and LWS names each
    group's worker StatefulSet `<lws>-<group>`. A StatefulSet's pods carry `controller-revision-hash: <name>-<hash>`
    (a label value, at most 63 characters, the hash up to 10), so Kubernetes creates no pod of a StatefulSet named
    over 52 characters. A 30-character job on a 30-character pool rendered such an LWS, which never ran a pod;
    validation refuses the name. The same names on one pool (the LWS is then named after the job) are fine."""
    long_pool = "v5p-2x2x2-reserved-for-serving"                  # 30 characters
    pools = MIXED_POOLS.replace("name: v5p-2x2x1, accelerator: tpu-v5p, topology: 2x2x1",
                                "name: v5p-2x2x2-b, accelerator: tpu-v5p, topology: 2x2x2")
    pools = pools.replace("name: v5p-2x2x2,", f"name: {long_pool},")
    name = "multi-host-policy-server-large"                       # 30 characters
    srv = (f"name: {name}\nteam: vision\nkind: inference\nreplicas: 5\noptions:\n"
           "  - {accelerator: tpu-v5p, topology: 2x2x2}\nimage: img:1\nport: 8000\n")
    base = {"fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None, f"jobs/vision/{name}.yaml": srv}
    [(path, field, message)] = errors(with_files({**base, "fleet/clusters/gke-usc1.yaml": pools}))
    assert (path, field) == (f"jobs/vision/{name}.yaml", "name")
    assert f"`{name}-{long_pool}-4`" in message and "52" in message
    one_pool = pools.replace("  - {name: v5p-2x2x2-b, accelerator: tpu-v5p, topology: 2x2x2, max: 2}\n", "")
    files = with_files({**base, "fleet/clusters/gke-usc1.yaml": one_pool,
                        f"jobs/vision/{name}.yaml": srv.replace("replicas: 5", "replicas: 4")})
    assert errors(files) == []
    [lws] = objects(rendered(files), "LeaderWorkerSet")
    assert lws["metadata"]["name"] == name


# --- 8. a Serve import path written into serveConfigV2 as raw text ----------------------------------------------

def test_a_ray_serve_import_path_must_be_one_and_lands_in_serve_config_as_written() -> None:
    """A RayService's `serveConfigV2` is YAML text KubeRay hands to Ray Serve, and the import path of
    `command: [serve, run, MODULE:APP]` was pasted into it as it stood: `app: v2` broke the YAML, `app:v2 # x` lost
    its tail to a comment, and a newline could add keys of its own. Validation now takes only a Python import
    path (`pkg.module:attr`), which the rendered config carries exactly."""
    def serve(path: str) -> str:
        return job("policy", "vision", f"framework: ray\nkind: inference\ncommand: [serve, run, {path!r}]\n",
                   count=8).replace("'", '"')

    for bad in ("app: v2", "policy.app:app # v2", "policy.app:app\n  route_prefix: /x", "policy app:app"):
        found = errors(with_files({"jobs/vision/policy.yaml": serve(bad)}))
        assert [(p, f) for p, f, _ in found] == [("jobs/vision/policy.yaml", "command")], bad
    for good in ("policy.app:app", "serving:build.app", "_m:_a"):
        [rs] = objects(rendered(with_files({"jobs/vision/policy.yaml": serve(good)})), "RayService")
        import yaml
        [app] = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"]
        assert app == {"name": "policy", "import_path": good, "route_prefix": "/"}


def test_a_multi_node_gpu_job_that_sets_a_rank_variable_renders_a_jobset_the_api_server_takes(
        tmp_path: Path) -> None:
    """A 16-GPU job (two H100 nodes) whose file sets `MASTER_PORT`: the container's env listed MASTER_PORT twice
    (the file's and Fleet's rank variables), and a CRD's `env` is a list-map keyed by name, so the API server
    refused the JobSet ("Duplicate value"): the job could never be created. The file's value wins (a default
    never overrides what a file states), once, and validate warns that it replaces Fleet's."""
    import subprocess
    import sys

    from reconciler.kube_rules import RANK_ENV_NAMES
    from reconciler.render.jobset import rank_env

    from builders import shared_file
    files = with_files({"jobs/vision/big.yaml": job("big", count=16, body="env: {MASTER_PORT: '29400'}\n")})
    warnings = [(p.path, p.field, p.message) for p in check(files, load_catalog()).problems
                if str(p.severity) == "warning"]
    assert any(p == "jobs/vision/big.yaml" and "MASTER_PORT" in f for p, f, _ in warnings), warnings
    [js] = [o for o in objects(rendered(files), "JobSet") if o["metadata"]["name"] == "big"]
    [rj] = js["spec"]["replicatedJobs"]
    [c] = rj["template"]["spec"]["template"]["spec"]["containers"]
    names = [e["name"] for e in c["env"]]
    assert len(names) == len(set(names)), names
    assert {"name": "MASTER_PORT", "value": "29400"} in c["env"] and "NODE_RANK" in names
    assert {e["name"] for e in rank_env(2, 8)} == set(RANK_ENV_NAMES)
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(js))
    r = subprocess.run([sys.executable, str(shared_file("tools/validate_kueue.py")), str(tmp_path / "big.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
