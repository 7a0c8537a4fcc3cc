"""Slurm clusters (issue 24) without the daemons: the models' validation (located errors), the plan (a Slurm
partition planned like any pool; an inference service never placed there), the render (slurmrestd v0.0.38
job-submit documents, deterministic), the mapping of slurmrestd's answers into the snapshot, and the
simulation. The daemons themselves: tests/test_slurm_e2e.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.slurm.observe import expand_hostlist, parse
from reconciler.validate import Validated

from builders import PRIORITIES, TEAMS

SLURM = """\
name: hpc
provider: slurm
region: onprem-lab
slurm: {rest_url: "http://slurm-lab:6820", api_version: v0.0.38, token_env: SLURM_JWT, account_prefix: "ml-"}
pools:
  - {name: h100, accelerator: nvidia-h100-80gb, capacity: owned, min: 4, max: 4, partition: gpu-h100,
     node: {accelerators: 8, cpus: 96, memory_gib: 1024}, hourly_usd: 20.0}
"""
GKE = """\
name: gke
provider: gcp
region: us-central1
kubernetes: {cluster: ml, context: ctx-gke}
pools:
  - {name: h100, accelerator: nvidia-h100-80gb, machine_type: a3-highgpu-8g, max: 8}
"""


def job(name: str, extra: str = "", count: int = 16, kind: str = "training") -> str:
    return (f"name: {name}\nteam: vision\nkind: {kind}\noptions: [{{accelerator: nvidia-h100-80gb, count: {count}}}]\n"
            f"duration_hours: 2.5\nimage: registry.example/train:1\ncommand: [python, -m, train, --lr, '3e-4']\n"
            f"env: {{WANDB_PROJECT: atlas}}\n{extra}")


def files(**over: str) -> dict[str, bytes]:
    base = {"policies/teams.yaml": TEAMS, "policies/priorities.yaml": PRIORITIES,
            "fleet/clusters/hpc.yaml": SLURM, "fleet/clusters/gke.yaml": GKE,
            "jobs/vision/train.yaml": job("train", "slurm: {constraint: h100, time_limit_minutes: 600}\n")}
    base.update(over)
    return {k: v.encode() for k, v in base.items() if v}


def check(**over: str) -> Validated:
    return pipeline.check(files(**over), load_catalog())


def errors(v: Validated) -> list[str]:
    return [f"{p.path}:{p.line} {p.field}: {p.message}" for p in v.errors]


# --- validation -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "text", "expected"), [
    ("fleet/clusters/hpc.yaml", SLURM.replace("slurm: {", "kubernetes: {cluster: x}\nslurm: {"),
     "fleet/clusters/hpc.yaml:4 kubernetes: a Slurm cluster is reached through slurmrestd"),
    ("fleet/clusters/hpc.yaml", "\n".join(line for line in SLURM.splitlines() if not line.startswith("slurm:")) + "\n",
     "fleet/clusters/hpc.yaml:2 provider: a Slurm cluster needs a `slurm:` block"),
    ("fleet/clusters/hpc.yaml", SLURM.replace(", partition: gpu-h100", ""),
     "fleet/clusters/hpc.yaml:6 pools[0].name: Slurm pool `h100` names no partition"),
    ("fleet/clusters/hpc.yaml", SLURM.replace("capacity: owned, min: 4", "capacity: on-demand, min: 4"),
     "fleet/clusters/hpc.yaml:6 pools[0].capacity: a Slurm partition is owned hardware or an allocation"),
    ("fleet/clusters/hpc.yaml", SLURM.replace("token_env: SLURM_JWT", "token: eyJhbGciOi.x.y"),
     "fleet/clusters/hpc.yaml:4 slurm.token: "),
    ("fleet/clusters/gke.yaml", GKE.replace("max: 8}", "max: 8, partition: gpu}"),
     "fleet/clusters/gke.yaml:6 pools[0].partition: `partition` is for pools of Slurm clusters"),
    ("fleet/clusters/gke.yaml", GKE + 'slurm: {rest_url: "http://x:6820"}\n',
     "fleet/clusters/gke.yaml:7 slurm: `slurm:` is for clusters with `provider: slurm`"),
    ("policies/placement.yaml", "reconcile: {lease_cluster: hpc}\n",
     "policies/placement.yaml:1 reconcile.lease_cluster: lease_cluster `hpc` is a Slurm cluster"),
    ("jobs/vision/serve.yaml", job("serve", "port: 8000\nslurm: {script: x}\n", 8, "inference"),
     "jobs/vision/serve.yaml:10 slurm: an inference service does not run on Slurm"),
])
def test_slurm_mistakes_are_located_errors(path: str, text: str, expected: str) -> None:
    got = errors(check(**{path: text}))
    assert any(e.startswith(expected) for e in got), got


def test_the_example_cluster_file_of_the_design_validates() -> None:
    assert errors(check()) == []


# --- plan and render --------------------------------------------------------------------------------------------

def test_an_owned_partition_is_planned_first_and_an_inference_service_never_on_slurm() -> None:
    serve = job("serve", "port: 8000\n", 8, "inference")
    v = check(**{"jobs/vision/serve.yaml": serve})
    plan = pipeline.plan(v)
    where = {p.job: (p.cluster, p.pool, p.units, p.accelerators_per_unit) for p in plan.placements}
    assert where["vision/train"] == ("hpc", "h100", (0, 1), 8)         # owned: no new money
    assert where["vision/serve"][0] == "gke"
    # only Slurm can hold it: pending with the reason, never placed there
    only = check(**{"fleet/clusters/gke.yaml": "", "jobs/vision/serve.yaml": serve})
    assert [e for e in errors(only) if "serve" in e] == [
        "jobs/vision/serve.yaml:4 options: the job fits no pool in the fleet at all; option 0 (8x nvidia-h100-80gb): "
        "closest pool hpc/h100, but it is a Slurm partition, which runs batch jobs, not inference services"]


def test_a_service_never_lands_on_slurm_through_the_room_a_batch_job_of_the_same_gang_looked_up() -> None:
    """The planner's room cache (`PlanState.room_key`) did not key the job's kind, where `candidates` does: a
    batch job of the same gang (8 H100, one replica) placed first filled it with the Slurm pool, and the
    service behind it was placed there too (the 10,000-job simulation, seed 3: the loop started a service's
    replica on a Slurm partition, the next plan dropped it, and another job started into its quota)."""
    v = check(**{"jobs/vision/serve.yaml": job("serve", "port: 8000\n", 8, "inference"),
                 "jobs/vision/a.yaml": job("a", count=8)})
    where = {p.job: (p.cluster, p.pool) for p in pipeline.plan(v).placements}
    assert where["vision/a"] == ("hpc", "h100")          # the owned partition: the cheapest room
    assert where["vision/serve"] == ("gke", "h100")


def test_render_writes_each_placed_slurm_jobs_submission_and_script_deterministically() -> None:
    v = check(**{"jobs/vision/plain.yaml": job("plain", count=8)})
    plan = pipeline.plan(v)
    out = pipeline.render(v, plan, load_catalog())
    assert out == pipeline.render(check(**{"jobs/vision/plain.yaml": job("plain", count=8)}), plan, load_catalog())
    assert not [p for p in out if p.startswith(("hpc/kueue", "stacks/hpc-", "hpc/jobsets"))]
    doc = json.loads(out["hpc/slurm/vision.train.json"])
    digest = doc["job"]["comment"].split("fleet.dev/spec-digest=")[1]
    assert doc["job"] == {
        "account": "ml-vision",
        "comment": f"fleet.dev/job=vision/train fleet.dev/pool=h100 fleet.dev/spec-digest={digest}",
        "constraints": "h100", "current_working_directory": "/tmp",
        "environment": {"FLEET_IMAGE": "registry.example/train:1", "FLEET_JOB": "vision/train",
                        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "WANDB_PROJECT": "atlas"},
        "gpus_per_node": "8", "name": "vision.train", "nodes": [2, 2], "partition": "gpu-h100", "qos": "research",
        "requeue": True, "time_limit": 600}
    assert out["hpc/slurm/vision.train.sh"] == doc["script"] == (
        "#!/bin/bash\n# fleet.dev/job=vision/train: submitted by Fleet\nset -euo pipefail\n"
        "exec srun --ntasks-per-node=1 --container-image=registry.example/train:1 python -m train --lr 3e-4\n")
    plain = json.loads(out["hpc/slurm/vision.plain.json"])["job"]
    assert (plain["nodes"], plain["gpus_per_node"], plain["time_limit"]) == ([1, 1], "8", 150)   # 2.5 h
    assert "constraints" not in plain


def test_the_default_time_limit_is_the_run_on_the_option_placed_not_the_duration() -> None:
    """`duration_hours` is the run on the first option; placed on an option at 0.5 the job runs twice as long, and
    a time limit of the duration had Slurm kill it halfway (before 2026-12-07)."""
    slow = job("slow", count=8).replace("options: [{accelerator: nvidia-h100-80gb, count: 8}]",
                                        "options: [{accelerator: tpu-v5p, count: 64}, "
                                        "{accelerator: nvidia-h100-80gb, count: 8, relative_speed: 0.5}]")
    v = check(**{"jobs/vision/slow.yaml": slow})
    plan = pipeline.plan(v)
    assert {(p.job, p.cluster, p.option) for p in plan.placements} >= {("vision/slow", "hpc", 1)}
    doc = json.loads(pipeline.render(v, plan, load_catalog())["hpc/slurm/vision.slow.json"])["job"]
    assert doc["time_limit"] == 300     # 2.5 h of work at 0.5: 5 h


# --- observe: slurmrestd's answers in the snapshot ---------------------------------------------------------------

def node(name: str, state: str = "idle", flags: tuple[str, ...] = (), parts: tuple[str, ...] = ("gpu-h100",),
         ) -> dict[str, Any]:
    return {"name": name, "state": state, "state_flags": list(flags), "partitions": list(parts),
            "reason": "bad gpu" if flags or state == "down" else "", "reason_changed_at": 1795564000}


def sjob(jid: int, state: str, comment: str, account: str = "ml-vision", nodes: str = "", restarts: int = 0,
         ) -> dict[str, Any]:
    return {"job_id": jid, "job_state": state, "comment": comment, "account": account, "nodes": nodes,
            "restart_cnt": restarts, "submit_time": 1795560000, "start_time": 1795561000, "end_time": 0,
            "priority": 100, "state_reason": "None"}


def test_hostlists_expand_as_slurm_writes_them() -> None:
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("") == []


def test_slurm_jobs_and_nodes_read_into_the_snapshot_fleets_own_only() -> None:
    v = check()
    cluster = next(c for c in v.loaded.clusters if c.name == "hpc")
    tag = "fleet.dev/job=vision/{} fleet.dev/pool=h100 fleet.dev/spec-digest=abc"
    nodes = {"nodes": [node("n2", "allocated"), node("n1", "idle", ("DRAIN",)), node("n3", "down"),
                        node("login", parts=("cpu",))]}
    jobs = {"jobs": [sjob(7, "RUNNING", tag.format("train"), nodes="n[1-2]", restarts=2),
                     sjob(8, "PENDING", tag.format("wait")),
                     sjob(9, "COMPLETED", tag.format("done")),
                     sjob(10, "CANCELLED", tag.format("gone")),
                     sjob(11, "RUNNING", "a user's own job", nodes="n3"),
                     sjob(12, "RUNNING", tag.format("fake"), account="someone", nodes="n3")]}
    c = parse(cluster, nodes, jobs, {"vision": "vision"})
    assert [(n.name, n.pool, n.unit, n.ready, n.unschedulable, [p.type for p in n.problems]) for n in c.nodes] == [
        ("login", None, None, True, False, []), ("n1", "h100", 0, True, True, ["Drained"]),
        ("n2", "h100", 1, True, False, []), ("n3", "h100", 2, False, False, ["Down"])]
    assert {(js.namespace, js.name, js.uid, js.units, js.terminal_state) for js in c.jobsets} == {
        ("vision", "train", "7", (0, 1), None), ("vision", "wait", "8", None, None),
        ("vision", "done", "9", None, "Completed"), ("account-someone", "fake", "12", (2,), None)}
    phases = {w.jobset: (w.phase(), w.requeue_count) for w in c.workloads}
    assert phases == {"train": ("running", 2), "wait": ("queued", 0), "done": ("succeeded", 0), "fake": ("running", 0)}
    assert [(r.job, r.digest, r.result) for r in c.completions] == [("vision/done", "abc", "succeeded")]
    assert sorted(p.node or "" for p in c.pods if p.job == "train") == ["n1", "n2"]


# --- the same cycle, and the simulation ---------------------------------------------------------------------------

def test_a_slurm_cluster_gets_no_resize_and_no_kueue_update_from_the_cycle() -> None:
    from datetime import UTC, datetime

    from reconciler.reconcile.model import Action, Asked, Decision, LoopMemory
    from reconciler.reconcile.step import fixed_partitions

    at = datetime(2026, 1, 1, tzinfo=UTC)
    actions = tuple(Action(kind=k, cluster=c, pool="h100" if k == "resize" else None, target=2, current=1, reason="r")
                    for c in ("gke", "hpc") for k in ("resize", "kueue"))
    mem = LoopMemory(targets={"gke/h100": Asked(units=2, first=at), "hpc/h100": Asked(units=2, first=at)},
                     quotas={"gke": ["q"], "hpc": ["q"]})
    out = fixed_partitions(Decision(actions=actions, memory=mem), check())
    assert [(a.kind, a.cluster) for a in out.actions] == [("resize", "gke"), ("kueue", "gke")]
    assert (list(out.memory.targets), list(out.memory.quotas)) == (["gke/h100"], ["gke"])


def test_fleet_simulate_runs_work_on_a_slurm_partition_like_any_pool() -> None:
    from reconciler.simulate import simulate
    from reconciler.simulate.faults import FaultModel
    from reconciler.simulate.trace import load_trace

    lines = "".join(json.dumps({"name": f"s{i}", "team": "vision", "duration_hours": 1, "image": "i:1",
                                "options": [{"accelerator": "nvidia-h100-80gb", "count": 8}],
                                "submit_at_minutes": 10 * i}) + "\n" for i in range(6))
    repo = files(**{"fleet/clusters/gke.yaml": "", "jobs/vision/train.yaml": ""})
    tr = load_trace("t.jsonl", lines.encode(), repo, load_catalog())
    assert not isinstance(tr, list), tr
    doc = json.loads(simulate(tr, ["fleet"], days=0.5, seed=1, faults=FaultModel(), interval_s=300)[0].to_json())
    assert doc["jobs"]["completed"] == 6 and doc["cost_usd"] > 0


def test_the_loop_never_starts_a_service_on_a_slurm_partition_beside_a_batch_job_of_the_same_gang() -> None:
    """The same defect through the whole cycle (`fleet simulate`'s loop: observe, plan, decide, act): the first
    plan started the service on the Slurm partition, and a later one found that its option "no longer runs"
    there and moved it (in the 10,000-job benchmark, a spread service's group: the plan freed its quota while
    it still ran, and another job started into it)."""
    from reconciler.simulate.engine import Engine
    from reconciler.simulate.faults import FaultModel
    from reconciler.simulate.policies import make
    from reconciler.simulate.results import result
    from reconciler.simulate.trace import load_trace

    def doc(name: str, **extra: object) -> str:
        return json.dumps({"name": name, "team": "vision", "duration_hours": 2, "image": "i:1",
                           "options": [{"accelerator": "nvidia-h100-80gb", "count": 8}], "submit_at_minutes": 0,
                           **extra}) + "\n"

    lines = doc("a") + doc("serve", kind="inference", port=8000)
    tr = load_trace("t.jsonl", lines.encode(), files(**{"jobs/vision/train.yaml": ""}), load_catalog())
    assert not isinstance(tr, list), tr
    sim = Engine(tr, FaultModel.off(), 1, 0.05, 300)     # 72 minutes: both still run at the end
    sim.run(make("fleet", sim))
    assert {j.id: (j.state, j.pool.rp.cluster if j.pool else None, j.interruptions) for j in sim.jobs} == {
        "vision/a": ("running", "hpc", 0), "vision/serve": ("running", "gke", 0)}     # placed once, and right
    out = result(sim, "fleet", 0.05, 1).doc
    assert (out["lost_accelerator_hours"], out["violations"]["quota_accelerator_hours"]) == (0.0, 0.0)


def test_a_slurm_job_whose_image_changed_is_not_said_to_be_re_created_as_a_jobset() -> None:
    """A job on a Slurm partition whose file changes its image: a running JobSet cannot take that, so the plan
    re-creates such a gang (plan/sticky.py `restart_reason`), but a Slurm job is no JobSet and neither the loop nor
    apply re-creates it. Before, the PR's plan said it was ("which a running JobSet cannot take"); now it is kept."""
    from reconciler import pipeline

    was = check(**{"jobs/vision/a.yaml": job("a", count=8)})
    now = check(**{"jobs/vision/a.yaml": job("a", count=8).replace("train:1", "train:2")})
    p = pipeline.change(now, was).head.plan.placement_of("vision/a")
    assert p is not None and (p.cluster, p.status, p.reason) == ("hpc", "kept", "")
