"""Defects found by a hunt in Ray jobs, job groups, elastic gangs and queued provisioning."""

from __future__ import annotations

from test_workloads import ELASTIC, elastic_fleet, objects, validated

from reconciler.catalog import load_catalog
from reconciler.plan import plan
from reconciler.render import render


def test_an_elastic_gang_running_above_a_lowered_max_is_cut_to_max() -> None:
    """Running at 4 nodes of 1..4, the team lowers workers.max to 2: the plan must not keep it at 4."""
    base = plan(validated(elastic_fleet()))
    [was] = base.placements_of("vision/elastic")
    assert len(was.units) == 4
    job = ELASTIC.replace("max: 4", "max: 2")
    v = validated(elastic_fleet(**{"jobs/vision/elastic.yaml": job}))
    p = plan(v, base)
    [pl] = p.placements_of("vision/elastic")
    assert len(pl.units) <= 2, pl.resize
    [js] = objects(render(v, p, load_catalog()), "JobSet")
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] <= 2


def _learner_running_then_actors_added(actors_extra: str, actors_count: int):
    from test_workloads import gpu_job, group_fleet

    from builders import with_files
    base = plan(validated(with_files({"jobs/vision/train.yaml": None,
                                      "jobs/vision/learner.yaml": gpu_job("learner", "vision", 16, "group: rl\n")})))
    assert [(x.job, x.cluster) for x in base.placements] == [("vision/learner", "onprem-sjc")]
    actors = gpu_job("actors", "vision", actors_count, "group: rl\n" + actors_extra)
    return plan(validated(group_fleet(**{"jobs/vision/actors.yaml": actors})), base)


def test_a_running_member_is_not_moved_when_its_new_group_mate_cannot_start_anywhere() -> None:
    """The learner runs on onprem-sjc; an actors job joins its group but can run nowhere (data residency
    keeps it in sjc, where the learner leaves no room). The group stays incomplete, so moving the learner
    gains nothing: it must not be restarted in another cluster (the second pin try of planner._settle leaks
    into the withheld plan)."""
    p = _learner_running_then_actors_added("data_region: sjc\ndata_residency: required\n", 24)
    assert not p.placements_of("vision/actors")
    [pl] = p.placements_of("vision/learner")
    assert (pl.cluster, pl.status) == ("onprem-sjc", "kept"), (pl.cluster, pl.status)


def test_a_running_member_is_not_stopped_with_a_false_reason_when_a_new_mate_cannot_start() -> None:
    """Same, with actors too big for the team's quota beside the learner: nothing preempted or moved the
    learner off, yet it is stopped 'because it was preempted or moved off' (an artefact of the pin try)."""
    p = _learner_running_then_actors_added("", 56)
    assert not p.placements_of("vision/actors")
    reasons = [x.reason for x in p.preemptions if x.job == "vision/learner"]
    assert not any("vision/learner was preempted or moved off" in r for r in reasons), reasons


def test_a_queued_pool_is_not_created_at_a_fixed_node_count_by_the_infra_stack() -> None:
    """models.Pool.provisioning: 'fixed: apply sets the unit count; queued: the units are requested through
    Kueue's ProvisioningRequest'. Yet the infra stack spec creates the queued pool's planned slices as
    on-demand node pools of a fixed node_count (scaling: plan), so Fleet buys the capacity itself before any
    ProvisioningRequest is granted (at on-demand price, while the plan prices it at flex-start), and the
    queued-provisioning.gke.io request has no queued-provisioning node pool to grow."""
    import json

    from test_workloads import queued_fleet
    v = validated(queued_fleet())
    files = render(v, plan(v), load_catalog())
    spec = json.loads(files["stacks/gke-use5-infra.json"])
    flex = [n for n in spec["node_pools"] if n["pool"] == "v6e-flex"]
    assert flex, spec["node_pools"]
    assert all(n["node_count"] is None for n in flex), [(n["name"], n["node_count"], n["scaling"]) for n in flex]
    # every slice up to the pool's max (4), each a queued node pool growing from 0 to its 4 hosts when granted
    assert [(n["name"], n["provisioning"], n["scaling"], n["autoscaling"]) for n in flex] == [
        (f"v6e-flex-s{i}", "queued", "autoscaler", {"min_nodes": 0, "max_nodes": 4}) for i in range(4)]
    others = [n for name, text in files.items() if name.endswith("-infra.json") and name != "stacks/gke-use5-infra.json"
              for n in json.loads(text)["node_pools"]]
    assert others and not any("provisioning" in n for n in others)    # the key is on queued pools only


def test_a_ray_job_stopped_or_failed_under_a_complete_deployment_is_not_a_success() -> None:
    """KubeRay marks every terminal Ray job `jobDeploymentStatus: Complete` (a STOPPED one, `ray job stop`,
    and before 1.2 a FAILED one too): "Complete" is not success, yet it was read as `Completed`, so the job
    was recorded and reported as succeeded."""
    from test_workloads import ray_fleet

    from reconciler.observe.ray import parse_rayjob
    v = validated(ray_fleet())
    [rj] = objects(render(v, plan(v), load_catalog()), "RayJob")
    ends = {}
    for deploy, ray_job in (("Complete", "SUCCEEDED"), ("Complete", "STOPPED"), ("Complete", "FAILED"),
                            ("Failed", "FAILED"), ("Running", "RUNNING")):
        row = parse_rayjob({**rj, "status": {"jobDeploymentStatus": deploy, "jobStatus": ray_job}})
        assert row is not None
        ends[(deploy, ray_job)] = row.terminal_state
    assert ends == {("Complete", "SUCCEEDED"): "Completed", ("Complete", "STOPPED"): "Failed",
                    ("Complete", "FAILED"): "Failed", ("Failed", "FAILED"): "Failed", ("Running", "RUNNING"): None}
