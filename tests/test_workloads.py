"""Issue 26: Ray jobs, job groups, elastic gangs and queued provisioning: validate, plan, render (CRD-validated)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.plan.types import Plan
from reconciler.render import render
from reconciler.validate import Validated

from builders import shared_file, with_files
from render_check import docs

VALIDATOR = "tools/validate_kueue.py"
H100 = "  - {accelerator: nvidia-h100-80gb, count: %d}\n"


def gpu_job(name: str, team: str, count: int, extra: str = "") -> str:
    return f"name: {name}\nteam: {team}\noptions:\n{H100 % count}image: img:1\n{extra}"


ELASTIC = gpu_job("elastic", "vision", 8, "workers: {min: 1, max: 4}\ncheckpoint_minutes: 30\n")


def validated(files: dict[str, bytes]) -> Validated:
    v = check(files, load_catalog())
    assert v.ok, [str(p) for p in v.errors]
    return v


def errors(files: dict[str, bytes]) -> list[tuple[str, str]]:
    return [(p.path, p.field) for p in check(files, load_catalog()).errors]


def objects(files: dict[str, str], kind: str) -> list[dict[str, Any]]:
    return [d for text in files.values() if not text.startswith("{") for d in docs(text) if d.get("kind") == kind]


def run_validator(tmp_path: Path, files: dict[str, str]) -> None:
    validator = shared_file(VALIDATOR)
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for cluster in sorted(p for p in tmp_path.iterdir() if p.is_dir() and p.name != "stacks"):
        r = subprocess.run([sys.executable, str(validator), "--strict-refs", str(cluster)],
                           capture_output=True, text=True)
        assert r.returncode == 0 and " 0 error(s)" in r.stdout, r.stdout + r.stderr


# --- elastic gangs ----------------------------------------------------------------------------------------


def elastic_fleet(**more: str | None) -> dict[str, bytes]:
    return with_files({"jobs/vision/train.yaml": None, "jobs/vision/elastic.yaml": ELASTIC, **more})


def test_an_elastic_gang_starts_at_min_and_grows_on_idle_paid_units() -> None:
    """The owned pool pays for 4 nodes; the elastic job (1..4 nodes) takes all four, and the JobSet has 4 pods."""
    v = validated(elastic_fleet())
    p = plan(v)
    [pl] = p.placements_of("vision/elastic")
    assert (pl.cluster, pl.pool, len(pl.units)) == ("onprem-sjc", "h100-owned", 4)
    assert pl.resize.startswith("4 unit(s) of 1..4: grown on 3 idle unit(s) of onprem-sjc/h100-owned")
    assert p.to_dict()["placements"][0]["resize"] == pl.resize
    [js] = objects(render(v, p, load_catalog()), "JobSet")
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 4
    assert not p.pending and not p.preemptions


BIG_HOME = "priority: production\ndata_region: sjc\ndata_residency: required\n"   # only the owned pool will do


def test_an_elastic_gang_is_shrunk_not_preempted_when_higher_work_needs_room() -> None:
    """Running at 4 nodes, the job gives 2 back to a new production job of 16 GPUs that can only run there, and
    the plan says why."""
    base = plan(validated(elastic_fleet()))
    v = validated(elastic_fleet(**{"jobs/vision/big.yaml": gpu_job("big", "vision", 16, BIG_HOME)}))
    p = plan(v, base)
    [pl] = p.placements_of("vision/elastic")
    [big] = p.placements_of("vision/big")
    assert big.pool == "h100-owned" and len(big.units) == 2 and not set(big.units) & set(pl.units)
    assert (pl.status, len(pl.units)) == ("kept", 2)
    assert "shrunk from 4 to 2 units (never below min 1): its units went to vision/big" in pl.resize
    assert "restart at the new size from the last checkpoint" in pl.resize
    assert not p.preemptions and not p.pending


def test_a_running_elastic_gang_keeps_its_size_when_no_waiting_work_needs_the_room() -> None:
    """The new job fits elsewhere: the elastic job is not restarted at another size."""
    base = plan(validated(elastic_fleet()))
    v = validated(elastic_fleet(**{"jobs/vision/big.yaml": gpu_job("big", "vision", 16, "priority: production\n")}))
    p = plan(v, base)
    [pl] = p.placements_of("vision/elastic")
    assert (pl.status, pl.units, pl.resize) == ("kept", (0, 1, 2, 3), "4 unit(s) of 1..4")
    assert p.placements_of("vision/big")[0].cluster == "gke-usc1"


def test_an_elastic_gang_never_shrinks_below_min() -> None:
    """At min 3 of the 4 owned nodes, a 16-GPU production job that can only run there needs 2: shrinking to
    min leaves 1, so only then is the elastic job preempted, and it runs again on GKE at no fewer than 3 units."""
    job = ELASTIC.replace("min: 1", "min: 3")
    base = plan(validated(elastic_fleet(**{"jobs/vision/elastic.yaml": job})))
    v = validated(elastic_fleet(**{"jobs/vision/elastic.yaml": job,
                                   "jobs/vision/big.yaml": gpu_job("big", "vision", 16, BIG_HOME)}))
    p = plan(v, base)
    [pl] = p.placements_of("vision/elastic")
    assert (pl.cluster, pl.status) == ("gke-usc1", "moved") and len(pl.units) >= 3
    assert p.placements_of("vision/big")[0].pool == "h100-owned"
    assert [(x.job, x.by) for x in p.preemptions] == [("vision/elastic", "vision/big")]


def test_elastic_jobs_are_validated() -> None:
    bad = gpu_job("elastic", "vision", 4, "workers: {min: 4, max: 2}\nkind: inference\nport: 80\n")
    assert sorted(errors(elastic_fleet(**{"jobs/vision/elastic.yaml": bad}))) == [
        ("jobs/vision/elastic.yaml", "options[0].count"), ("jobs/vision/elastic.yaml", "workers"),
        ("jobs/vision/elastic.yaml", "workers.min")]


# --- Ray -----------------------------------------------------------------------------------------------------


RAY_TRAIN = gpu_job("rl-learner", "vision", 16, "framework: ray\ncommand: [python, -m, learner, --iters, '100']\n")
RAY_SERVE = gpu_job("policy", "vision", 8, "framework: ray\nkind: inference\ncommand: [serve, run, 'policy.app:app']\n")


def ray_fleet() -> dict[str, bytes]:
    return with_files({"jobs/vision/train.yaml": None, "jobs/vision/rl-learner.yaml": RAY_TRAIN,
                       "jobs/vision/policy.yaml": RAY_SERVE})


def test_ray_jobs_render_as_rayjob_and_rayservice_that_the_crds_accept(tmp_path: Path) -> None:
    v = validated(ray_fleet())
    p = plan(v)
    files = render(v, p, load_catalog())
    [rj] = objects(files, "RayJob")
    [rs] = objects(files, "RayService")
    assert rj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "vision"
    assert rj["spec"]["entrypoint"] == "python -m learner --iters 100"
    assert rj["spec"]["suspend"] is True and rj["spec"]["shutdownAfterJobFinishes"] is True
    cluster = rj["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    [workers] = cluster["workerGroupSpecs"]
    assert head["resources"]["limits"]["nvidia.com/gpu"] == 8 and "command" not in head
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (1, 1, 1)   # head + 1 = 2 nodes
    assert "import_path: policy.app:app" in rs["spec"]["serveConfigV2"]
    assert "workerGroupSpecs" not in rs["spec"]["rayClusterConfig"]                             # one node: head only
    assert any(k.endswith("/ray/vision.rl-learner.yaml") for k in files)
    assert not objects(files, "JobSet") and not objects(files, "Deployment")
    run_validator(tmp_path, files)


def test_a_ray_job_is_one_gang_in_the_plan() -> None:
    [pl] = plan(validated(ray_fleet())).placements_of("vision/rl-learner")
    assert len(pl.units) == 2 and pl.accelerators_per_unit == 8


def test_ray_jobs_are_validated() -> None:
    tpu = "name: r\nteam: vision\nframework: ray\noptions:\n  - {accelerator: tpu-v5p, topology: 4x4x4}\n" \
          "image: img:1\ncommand: [python, x.py]\n"
    serve = gpu_job("s", "vision", 8, "framework: ray\nkind: inference\ncommand: [python, serve.py]\n")
    noentry = gpu_job("b", "vision", 8, "framework: ray\n")
    assert sorted(errors(with_files({"jobs/vision/r.yaml": tpu, "jobs/vision/s.yaml": serve,
                                     "jobs/vision/b.yaml": noentry}))) == [
        ("jobs/vision/b.yaml", "command"), ("jobs/vision/r.yaml", "options[0].accelerator"),
        ("jobs/vision/s.yaml", "command")]


def test_observe_reads_ray_gangs_and_their_clusters_into_the_snapshot_like_jobsets(tmp_path: Path) -> None:
    """A RayJob and a RayService as `fleet render` writes them, the RayClusters KubeRay made for them and the
    Workloads Kueue made (the RayJob's owned by the RayJob, the RayService's by its RayCluster): both gangs
    are rows of the snapshot, with their cluster's state, and planning from what runs keeps them running."""
    from datetime import UTC, datetime

    from kube_api import clusters, write_kubeconfig
    from kube_objects import workload

    from reconciler.observe.kube import Target, observe
    from reconciler.plan.live import live_inputs

    v = validated(ray_fleet())
    files = render(v, plan(v), load_catalog())
    [rj] = objects(files, "RayJob")
    [rs] = objects(files, "RayService")
    rj["metadata"]["uid"] = "uid-rj"
    rj["status"] = {"jobDeploymentStatus": "Running", "rayClusterName": "rl-learner-x1"}
    rcs = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": n, "namespace": "vision",
            "labels": {"ray.io/originated-from-cr-name": origin}}, "status": {"state": "ready"}}
           for n, origin in (("rl-learner-x1", "rl-learner"), ("policy-abc12", "policy"))]
    w_job = workload("vision", "rl-learner", "h100")
    w_job["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rl-learner",
                                             "uid": "uid-rj", "controller": True}]
    w_svc = workload("vision", "policy", "h100")
    w_svc["metadata"]["name"] = "raycluster-policy-abc12"
    w_svc["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "policy-abc12",
                                             "uid": "uid-rc", "controller": True}]
    with clusters("gke") as cs:
        cs["gke"].add(rj, rs, *rcs, w_job, w_svc)
        kc = write_kubeconfig(tmp_path / "kc", {"ctx": cs["gke"].url})
        snap = observe([Target("gke-usc1", "ctx", "x")], str(kc), datetime(2026, 11, 23, tzinfo=UTC),
                       timeout_s=(0.5, 1.0))
    (c,) = snap.clusters
    assert c.status == "ok", c.problems
    rows = {js.name: js for js in c.jobsets}
    assert (rows["rl-learner"].kind, rows["rl-learner"].ray_state) == ("RayJob", "cluster ready, Running")
    assert (rows["policy"].kind, rows["policy"].ray_state) == ("RayService", "ready")
    assert rows["rl-learner"].units == (0, 1) and rows["rl-learner"].team == "vision"
    assert {w.jobset for w in c.workloads} == {"rl-learner", "policy"}
    live = live_inputs(v, snap)
    assert set(live.running) == {"vision/rl-learner", "vision/policy"}


# --- queued provisioning ------------------------------------------------------------------------------------


QUEUED = ("name: gke-use5\nprovider: gcp\nregion: us-east5\nkubernetes: {cluster: ml-use5}\npools:\n"
          "  - {name: v6e-flex, accelerator: tpu-v6e, topology: 4x4, max: 4, provisioning: queued}\n")
V6E_TEAMS = "      nvidia-h100-80gb: {nominal: 64}\n      tpu-v6e: {nominal: 64}\n"


def queued_fleet() -> dict[str, bytes]:
    teams = with_files({})["policies/teams.yaml"].decode().replace("      nvidia-h100-80gb: {nominal: 64}\n",
                                                                    V6E_TEAMS, 1)
    return with_files({"fleet/clusters/gke-use5.yaml": QUEUED, "policies/teams.yaml": teams,
                       "jobs/vision/flex.yaml": "name: flex\nteam: vision\noptions:\n"
                                                "  - {accelerator: tpu-v6e, topology: 4x4}\nimage: img:1\n"})


def test_a_queued_pool_renders_the_provisioning_request_check_and_its_capacity_is_requested(tmp_path: Path) -> None:
    v = validated(queued_fleet())
    p = plan(v)
    [pool] = [x for x in p.to_dict()["pools"] if x["pool"] == "v6e-flex"]
    assert (pool["provisioning"], pool["requested"], pool["target"]) == ("queued", 1, 1)
    assert pool["unit_hourly_usd"] == 21.6             # FACTS.md: v6e flex-start 1.35 per chip-hour x 16 chips
    assert "provisioning" not in next(x for x in p.to_dict()["pools"] if x["pool"] == "h100")
    files = render(v, p, load_catalog())
    kueue = docs(files["gke-use5/kueue.yaml"])
    [check_] = [d for d in kueue if d["kind"] == "AdmissionCheck"]
    [config] = [d for d in kueue if d["kind"] == "ProvisioningRequestConfig"]
    assert check_["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert config["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    [cq] = [d for d in kueue if d["kind"] == "ClusterQueue" and d["metadata"]["name"] == "vision"]
    assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": check_["metadata"]["name"],
                                                                          "onFlavors": ["v6e-flex"]}]}
    assert "AdmissionCheck" not in files["gke-usc1/kueue.yaml"]
    run_validator(tmp_path, files)


def test_queued_provisioning_is_gke_on_demand_only() -> None:
    onprem = with_files({})["fleet/clusters/onprem-sjc.yaml"].decode() + "    provisioning: queued\n"
    files = with_files({"fleet/clusters/onprem-sjc.yaml": onprem})
    assert errors(files) == [("fleet/clusters/onprem-sjc.yaml", "pools[0].provisioning")]
    assert "GKE's flex-start" in check(files, load_catalog()).errors[0].message


# --- job groups ---------------------------------------------------------------------------------------------


def group_fleet(**more: str | None) -> dict[str, bytes]:
    return with_files({"jobs/vision/train.yaml": None,
                       "jobs/vision/actors.yaml": gpu_job("actors", "vision", 24, "group: rl\n"),
                       "jobs/vision/learner.yaml": gpu_job("learner", "vision", 16, "group: rl\n"), **more})


def test_a_group_runs_in_one_cluster() -> None:
    """Alone, the actors (3 nodes) fill the owned pool and the learner (2 nodes) goes to GKE; as a group both
    run in the one cluster that holds them."""
    alone = plan(validated(group_fleet(**{
        "jobs/vision/actors.yaml": gpu_job("actors", "vision", 24),
        "jobs/vision/learner.yaml": gpu_job("learner", "vision", 16)})))
    assert {p.cluster for p in alone.placements} == {"onprem-sjc", "gke-usc1"}
    p = plan(validated(group_fleet()))
    assert {(x.job, x.cluster, x.group) for x in p.placements} == {
        ("vision/actors", "gke-usc1", "vision/rl"), ("vision/learner", "gke-usc1", "vision/rl")}
    assert p.to_dict()["placements"][0]["group"] == "vision/rl"


def test_a_group_starts_all_or_nothing() -> None:
    """The learner alone would run; its group-mate cannot get quota, so neither starts, and the plan says why."""
    big = "name: actors\nteam: lang\ngroup: rl\noptions:\n  - {accelerator: tpu-v5p, topology: 4x4x4, slices: 4}\n" \
          "image: img:1\n"
    p = plan(validated(with_files({"jobs/lang/actors.yaml": big,
                                   "jobs/lang/learner.yaml": gpu_job("learner", "lang", 16, "group: rl\n")})))
    assert not p.placements_of("lang/learner") and not p.placements_of("lang/actors")
    [why] = [x for x in p.pending if x.job == "lang/learner"]
    assert why.reasons[0].startswith("group lang/rl starts all-or-nothing and cannot start now: lang/actors")


def test_group_members_share_one_priority() -> None:
    files = group_fleet(**{"jobs/vision/learner.yaml": gpu_job("learner", "vision", 16,
                                                               "group: rl\npriority: production\n")})
    assert errors(files) == [("jobs/vision/learner.yaml", "priority")]


def test_plans_round_trip_the_new_keys() -> None:
    from reconciler.plan.types import plan_from_dict

    p = plan(validated(elastic_fleet()))
    again: Plan = plan_from_dict(p.to_dict())
    assert again.to_dict() == p.to_dict()


def test_plan_explain_and_status_show_a_group_as_one_row_with_its_members() -> None:
    from datetime import UTC, datetime

    from reconciler.observe.model import ClusterObservation, Snapshot
    from reconciler.plan.explain import explain
    from reconciler.plan.markdown import to_markdown
    from reconciler.plan.planner import plan_with_state
    from reconciler.status import status
    from reconciler.status.render import to_json, to_text

    v = validated(group_fleet(**{"jobs/vision/elastic.yaml": ELASTIC}))
    p, st = plan_with_state(v)
    md = to_markdown(p)
    [row] = [line for line in md.splitlines() if line.startswith("| vision/rl |")]
    assert "vision/actors on gke-usc1/h100" in row and "vision/learner on gke-usc1/h100" in row
    assert row.endswith("| running together in gke-usc1 |")
    assert "## Elastic gangs" in md and "| vision/elastic | onprem-sjc/h100-owned | 4 unit(s) of 1..4" in md
    text = explain(p, st, "vision/learner")
    assert "**group** vision/rl (running together in gke-usc1): vision/actors on gke-usc1/h100" in text
    assert "**elastic**: 4 unit(s) of 1..4" in explain(p, st, "vision/elastic")
    snap = Snapshot(observed_at=datetime(2026, 11, 23, tzinfo=UTC),
                    clusters=(ClusterObservation(name="gke-usc1", status="ok"),
                              ClusterObservation(name="onprem-sjc", status="ok")))
    report = status(v, snap, p)
    assert report.groups == (("vision/rl", "vision/actors unknown, vision/learner unknown",
                              "0 of 2 member(s) running"),)
    assert "\ngroups\n" in to_text(report) and '"group": "vision/rl"' in to_json(report)


def test_an_elastic_gang_does_not_grow_into_capacity_the_fleet_would_have_to_buy() -> None:
    """Without the owned pool, the job starts on GKE H100 nodes (scale-to-zero): nothing is paid for and idle,
    so it stays at min (growing into new nodes cost goodput in the simulator: docs/workloads.md)."""
    v = validated(elastic_fleet(**{"fleet/clusters/onprem-sjc.yaml": None}))
    [pl] = plan(v).placements_of("vision/elastic")
    assert (pl.cluster, len(pl.units), pl.resize) == ("gke-usc1", 1, "1 unit(s) of 1..4")


def test_golden_robot_learning_render() -> None:
    """The rendered files of a Ray job and service, a job group, an elastic gang and a queued pool, byte for byte
    (tests/golden/render/robot-learning; FLEET_UPDATE_GOLDEN=1 rewrites them)."""
    from test_render import compare_golden

    files = queued_fleet()
    files.update(ray_fleet())
    files.update({"fleet/clusters/gke-use5.yaml": QUEUED.encode(), "jobs/vision/elastic.yaml": ELASTIC.encode(),
                  "jobs/lang/actors.yaml": gpu_job("actors", "lang", 8, "group: rl\n").encode(),
                  "jobs/lang/learner.yaml": gpu_job("learner", "lang", 8, "group: rl\n").encode()})
    files["policies/teams.yaml"] = queued_fleet()["policies/teams.yaml"]
    v = validated(files)
    compare_golden("robot-learning", render(v, plan(v), load_catalog()))


def test_a_queued_pool_without_a_flex_start_figure_is_priced_on_demand_and_says_so() -> None:
    """FACTS.md has a flex-start rate for v6e only: a queued H100 pool keeps the on-demand price, and its source
    says that no flex-start rate is known (never a guessed number); the cost report marks both pools queued."""
    from reconciler.cost.model import price
    from reconciler.report.tables import pools

    gke = with_files({})["fleet/clusters/gke-usc1.yaml"].decode().replace(
        "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8\n",
        "  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8\n    provisioning: queued\n")
    files = queued_fleet()
    fixed = validated(files)
    files["fleet/clusters/gke-usc1.yaml"] = gke.encode()
    v = validated(files)
    queued_h100, on_demand = v.unit_prices["gke-usc1/h100"], fixed.unit_prices["gke-usc1/h100"]
    assert queued_h100.hourly_usd == on_demand.hourly_usd
    assert "no flex-start rate known for this accelerator, on-demand price" in queued_h100.source
    flex = v.unit_prices["gke-use5/v6e-flex"]
    assert (flex.hourly_usd, flex.source, flex.uncertain) == (21.6, "catalog flex-start S13", True)
    rows = {r[0]: r for r in pools(price(plan(v), v).cost).rows}
    assert rows["gke-use5/v6e-flex"][2:4] == ("on-demand, queued", "1 requested")


def test_a_rayjob_kueue_admitted_is_never_suspended_again_by_apply() -> None:
    """Kueue owns a RayJob's spec.suspend once it admits it (as a JobSet's): apply leaves it out then."""
    from reconciler.apply.jobs import applied_configuration

    v = validated(ray_fleet())
    [rj] = objects(render(v, plan(v), load_catalog()), "RayJob")
    live = {**rj, "spec": {**rj["spec"], "suspend": False},
            "metadata": {**rj["metadata"], "managedFields": [
                {"manager": "fleet", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:suspend": {}}}},
                {"manager": "kueue", "operation": "Update", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:suspend": {}}}}]}}
    assert "suspend" not in applied_configuration(rj, live)["spec"]
    assert applied_configuration(rj, None)["spec"]["suspend"] is True


def test_the_loop_starts_a_ray_job_with_the_object_render_writes_and_stops_the_kind_it_observed() -> None:
    from datetime import UTC, datetime

    from reconciler.observe.model import ClusterObservation, Snapshot
    from reconciler.observe.ray import parse_rayjob
    from reconciler.reconcile.decide import copies
    from reconciler.reconcile.manifests import job_manifests

    v = validated(ray_fleet())
    p = plan(v)
    files = render(v, p, load_catalog())
    for pl in p.placements:
        [obj] = [d for d in docs(files[f"{pl.cluster}/ray/{pl.job.replace('/', '.')}.yaml"])]
        assert job_manifests(v, pl, load_catalog()) == [obj]
    [rj] = objects(files, "RayJob")
    row = parse_rayjob({**rj, "metadata": {**rj["metadata"], "uid": "u1"}})
    assert row is not None
    snap = Snapshot(observed_at=datetime(2026, 11, 23, tzinfo=UTC),
                    clusters=(ClusterObservation(name="gke-usc1", status="ok", jobsets=(row,)),))
    [copy] = copies(snap)["vision/rl-learner"]
    assert copy.origin()["from_kind"] == "RayJob" and copy.origin()["from_uid"] == "u1"


SMALL_GROUP = {"jobs/vision/actors.yaml": gpu_job("actors", "vision", 8, "group: rl\n"),
               "jobs/vision/learner.yaml": gpu_job("learner", "vision", 16, "group: rl\n")}


def test_a_group_fails_over_whole() -> None:
    """The group runs on the owned nodes; when that cluster goes down, both members move to one other cluster."""
    base = plan(validated(group_fleet(**SMALL_GROUP)))
    assert {p.cluster for p in base.placements} == {"onprem-sjc"}
    down = with_files({})["fleet/clusters/onprem-sjc.yaml"].decode().replace("pools:", "status: down\npools:")
    p = plan(validated(group_fleet(**SMALL_GROUP, **{"fleet/clusters/onprem-sjc.yaml": down})), base)
    assert {(x.job, x.cluster, x.status) for x in p.placements} == {
        ("vision/actors", "gke-usc1", "moved"), ("vision/learner", "gke-usc1", "moved")}


def test_preempting_one_member_moves_the_whole_group() -> None:
    """A production job that can only run on the owned nodes needs room; the group that ran there does not
    split: it runs again, whole, in the other cluster."""
    base = plan(validated(group_fleet(**SMALL_GROUP)))
    big = gpu_job("big", "vision", 16, BIG_HOME)
    files = group_fleet(**SMALL_GROUP, **{"jobs/vision/big.yaml": big,
                                          "jobs/vision/other.yaml": gpu_job("other", "vision", 8, BIG_HOME)})
    p = plan(validated(files), base)
    assert {p.cluster for p in p.placements_of("vision/big")} == {"onprem-sjc"}
    where = {x.cluster for m in ("vision/actors", "vision/learner") for x in p.placements_of(m)}
    assert where == {"gke-usc1"}, p.pending


def test_apply_accepts_the_rendered_ray_and_provisioning_objects_and_nothing_more() -> None:
    """`fleet apply` takes only what render writes: the RayJob, RayService, AdmissionCheck and
    ProvisioningRequestConfig pass; a RayJob carrying a field render never writes (a host-network submitter pod) does
    not."""
    import json

    import pytest

    from reconciler.apply.specs import specs_from_render
    from stacks.spec import SpecError

    files = queued_fleet()
    files.update({k: v for k, v in ray_fleet().items() if k.startswith("jobs/vision/")})
    v = validated(files)
    rendered = render(v, plan(v), load_catalog())
    kinds = {o["kind"] for s in specs_from_render(rendered) for o in s.spec.get("objects", ())}
    assert {"RayJob", "RayService", "AdmissionCheck", "ProvisioningRequestConfig"} <= kinds
    [path] = [k for k in rendered if k.endswith("-jobs.json") and '"RayJob"' in rendered[k]]
    spec = json.loads(rendered[path])
    [rj] = [o for o in spec["objects"] if o["kind"] == "RayJob"]
    rj["spec"]["submitterPodTemplate"] = {"spec": {"hostNetwork": True}}
    refused = r"submitterPodTemplate\.spec\.hostNetwork: Fleet never renders this field in a RayJob"
    with pytest.raises(SpecError, match=refused):
        specs_from_render({**rendered, path: json.dumps(spec)})


def test_the_loop_restarts_an_elastic_gang_the_plan_shrinks_where_it_runs() -> None:
    """The gang runs on 4 nodes of onprem-sjc/h100-owned; a production job of 16 GPUs that can only run there
    arrives, and the plan shrinks the gang to 2 nodes (`kept`, its `resize` says "a restart at the new size").
    Before, the loop restarted a job only when the plan `moved` it, so it started `big` onto two nodes the gang
    still filled and left the gang running at 4. Now it restarts the gang on its 2 nodes, with the resize as the
    reason, and starts `big`."""
    from test_live import observed, snapshot, stamped

    from reconciler.pipeline import plan as plan_from
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    v = validated(elastic_fleet(**{"jobs/vision/big.yaml": gpu_job("big", "vision", 16, BIG_HOME)}))
    seen = snapshot(60, observed("onprem-sjc", stamped(v, "vision/elastic", "h100-owned", "running",
                                                       units=(0, 1, 2, 3), admitted=20, accel="gpu", per_pod=8)))
    p = plan_from(v, observed=seen)
    [pl] = p.placements_of("vision/elastic")
    assert (pl.status, len(pl.units)) == ("kept", 2) and "shrunk from 4 to 2 units" in pl.resize
    acts = sorted((a.kind, a.job, a.units, a.reason) for a in decide(p, seen, LoopMemory(), Knobs(), seen.observed_at,
                                                                     jobs=job_facts(v)).actions if a.job)
    [big] = p.placements_of("vision/big")
    assert acts == [("move", "vision/elastic", pl.units, pl.resize), ("start", "vision/big", big.units,
                                                                       "the plan starts it")]


def test_a_gang_in_a_pool_nobody_waits_for_keeps_its_size_when_another_gang_is_shrunk() -> None:
    """Gang `b` runs on 3 units of gke-usc1/h100 (min 3: paid for); `big` arrives for onprem-sjc, where the
    gang `elastic` gives it 2 of its 4 nodes. Every elastic gang is cut to its min for the planning; before,
    `b` grew back only on idle paid units and only to double its size, so the plan shrank it to 2 ("its pool has
    no idle unit left for it": unit 2 was idle and paid for), and the loop, which now carries resizes out,
    restarted it for nothing. Now a running gang takes back the units it runs on that nobody took: `b` keeps
    its 3 units, its `resize` says no change, and only `elastic` is restarted."""
    from test_live import observed, snapshot, stamped

    from reconciler.pipeline import plan as plan_from
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    from builders import GKE

    gke = GKE.replace("  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: 8\n",
                      "  - name: h100\n    accelerator: nvidia-h100-80gb\n    min: 3\n    max: 8\n")
    b = gpu_job("b", "vision", 8, "workers: {min: 2, max: 4}\ncheckpoint_minutes: 30\ndata_region: us-central1\n"
                                  "data_residency: required\n")
    before = validated(elastic_fleet(**{"fleet/clusters/gke-usc1.yaml": gke, "jobs/vision/b.yaml": b}))
    v = validated(elastic_fleet(**{"fleet/clusters/gke-usc1.yaml": gke, "jobs/vision/b.yaml": b,
                                   "jobs/vision/big.yaml": gpu_job("big", "vision", 16, BIG_HOME)}))
    base = plan(before)
    [was_b] = base.placements_of("vision/b")
    [was_e] = base.placements_of("vision/elastic")
    assert len(was_b.units) == 3 and len(was_e.units) == 4
    seen = snapshot(60, observed("onprem-sjc", stamped(before, "vision/elastic", "h100-owned", "running",
                                                       units=was_e.units, admitted=20, accel="gpu", per_pod=8)),
                    observed("gke-usc1", stamped(before, "vision/b", "h100", "running", units=was_b.units,
                                                 admitted=20, accel="gpu", per_pod=8)))
    p = plan_from(v, base=base, observed=seen)
    [now_b] = p.placements_of("vision/b")
    assert (now_b.units, now_b.resize) == (was_b.units, "3 unit(s) of 2..4")
    acts = decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(v)).actions
    assert sorted((a.kind, a.job) for a in acts if a.job) == [("move", "vision/elastic"), ("start", "vision/big")]


def test_the_loop_resizes_a_gang_whose_units_it_cannot_see_as_the_plan_says() -> None:
    """The gang ran at 1 unit (the last plan); its JobSet carries no units annotation. The plan grows it to 4 on
    idle paid units ("grown from 1 to 4 units: ...; a restart at the new size ..."). Before, the loop compared the
    units it runs on with the plan's only where it knew them, so it did nothing, and the next plan booked 4 nodes
    to a gang that ran on 1. Now it restarts it at the new size; the plan after that says no change, and the loop
    does nothing more."""
    from dataclasses import replace

    from test_live import observed, snapshot, stamped

    from reconciler.pipeline import plan as plan_from
    from reconciler.reconcile.decide import LoopMemory, decide, job_facts
    from reconciler.reconcile.model import Knobs

    v = validated(elastic_fleet())
    first = plan_from(v)
    [pl] = first.placements_of("vision/elastic")
    base = replace(first, placements=(replace(pl, units=(0,), resize="1 unit(s) of 1..4"),))
    seen = snapshot(61, observed("onprem-sjc", stamped(v, "vision/elastic", "h100-owned", "running", units=None,
                                                       admitted=20, accel="gpu", per_pod=8)))
    p = plan_from(v, base=base, observed=seen)
    [grown] = p.placements_of("vision/elastic")
    assert len(grown.units) == 4 and "grown from 1 to 4 units" in grown.resize
    d = decide(p, seen, LoopMemory(), Knobs(), seen.observed_at, jobs=job_facts(v))
    assert [(a.kind, a.units, a.reason) for a in d.actions if a.job == "vision/elastic"] == [
        ("move", grown.units, grown.resize)]
    again = plan_from(v, base=p, observed=seen)
    [same] = again.placements_of("vision/elastic")
    assert same.resize == "4 unit(s) of 1..4"
    assert [a for a in decide(again, seen, d.memory, Knobs(), seen.observed_at, jobs=job_facts(v)).actions
            if a.job == "vision/elastic"] == []


def test_a_running_gang_restarts_to_grow_only_at_its_checkpoint_and_when_the_time_saved_beats_the_restart() -> None:
    """The gang (1..4 nodes, 10 hours at 4, checkpoint every 30 minutes) runs on 1 node of onprem-sjc/h100-owned;
    the pool's 3 other nodes are paid for and idle. Before, it restarted to grow to 4 whenever that doubled it,
    at any point of its checkpoint interval (in the workloads benchmark, gangs grew for minutes of work and were
    shrunk again: 18 restarts of one job in 3 days). Now, as a re-pack moves, it grows at its checkpoint
    (`repack.window_minutes` after one) and only when the time it saves on its remaining work is more than twice
    the restart (minutes since the checkpoint + `repack.restart_minutes`)."""
    from dataclasses import replace

    from test_live import observed, snapshot, stamped

    from reconciler.pipeline import plan as plan_from

    def size_at(minutes: float, hours: float) -> tuple[int, str]:
        v = validated(elastic_fleet(**{"jobs/vision/elastic.yaml": ELASTIC + f"duration_hours: {hours}\n"}))
        first = plan_from(v)
        [pl] = first.placements_of("vision/elastic")
        base = replace(first, placements=(replace(pl, units=(0,), resize="1 unit(s) of 1..4"),))
        seen = snapshot(20 + minutes, observed("onprem-sjc", stamped(v, "vision/elastic", "h100-owned", "running",
                                                                     units=(0,), admitted=20, accel="gpu",
                                                                     per_pod=8)))
        [now] = plan_from(v, base=base, observed=seen).placements_of("vision/elastic")
        return len(now.units), now.resize

    grown = size_at(32, 10)          # 2 minutes after its checkpoint at 30; hours of work left
    assert grown[0] == 4 and "grown from 1 to 4 units" in grown[1]
    assert size_at(41, 10) == (1, "1 unit(s) of 1..4")      # 11 minutes after it: the restart would lose them
    assert size_at(32, 0.6) == (1, "1 unit(s) of 1..4")     # 4 minutes of work left: growth saves 12, costs 12
    # planned from git (the PR's plan), the running minutes are not known: the growth is said, and when it is made
    v = validated(elastic_fleet(**{"jobs/vision/elastic.yaml": ELASTIC + "duration_hours: 10\n"}))
    first = plan_from(v)
    [pl] = first.placements_of("vision/elastic")
    [git] = plan_from(v, base=replace(first, placements=(replace(pl, units=(0,)),))).placements_of("vision/elastic")
    assert len(git.units) == 4 and "the reconcile loop makes it at the job's checkpoint, when the time it saves " \
        "beats twice the restart" in git.resize


def test_a_gang_re_created_for_its_changed_image_grows_in_that_restart() -> None:
    """The gang (1..4 nodes) runs on 1 node, 11 minutes past its checkpoint, 3 paid nodes idle; its file changes
    its image, so it is re-created where it runs. Before, growth was weighed as a restart of its own and refused
    (off its checkpoint): the gang restarted at 1 node now and would restart again to grow. Now it grows in the
    restart it makes anyway, and the work it loses is that of the node it ran on."""
    from dataclasses import replace

    from test_live import observed, snapshot, stamped

    from reconciler.pipeline import plan as plan_from

    job = ELASTIC + "duration_hours: 10\n"
    v = validated(elastic_fleet(**{"jobs/vision/elastic.yaml": job}))
    first = plan_from(v)
    [pl] = first.placements_of("vision/elastic")
    base = replace(first, placements=(replace(pl, units=(0,), resize="1 unit(s) of 1..4"),))
    seen = snapshot(61, observed("onprem-sjc", stamped(v, "vision/elastic", "h100-owned", "running", units=(0,),
                                                       admitted=20, accel="gpu", per_pod=8)))
    new = validated(elastic_fleet(**{"jobs/vision/elastic.yaml": job.replace("img:1", "img:2")}))
    p = plan_from(new, base=base, observed=seen)
    [now] = p.placements_of("vision/elastic")
    assert (len(now.units), now.status) == (4, "moved") and "grown from 1 to 4 units" in now.resize
    assert now.reason.startswith("its file changed what its pods run")
    [lost] = p.live.lost_work if p.live is not None else ()
    assert lost.job == "vision/elastic" and lost.minutes is not None and lost.accelerator_hours is not None
    assert lost.accelerator_hours == pytest.approx(8 * lost.minutes / 60)        # 8 GPUs ran, not 32
