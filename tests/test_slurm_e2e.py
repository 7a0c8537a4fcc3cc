"""Slurm end to end (issue 24): Fleet against a real slurmctld, slurmd and slurmrestd (tests/slurm_daemons.py),
with a Kubernetes stand-in (tests/kube_api.py) to fail over to, through whole cycles of the reconcile loop.

One cluster of each kind: `hpc` (Slurm: pool `gpu` = partition `low`, one node of 2 GPUs, cheap) and `k8s`
(an on-prem Kubernetes pool, dearer, so the plan prefers Slurm). The story, in order, on one Slurm cluster:
Fleet submits the placed jobs and they run; a fleet that runs the plan gets no write; a job whose file was
removed is cancelled (and nobody else's job is touched); a higher-tier job (someone else's, in partition
`high`) preempts Fleet's, which Slurm requeues and Fleet counts without acting; and once the node is drained,
the job on it fails over to the Kubernetes cluster with the work it loses stated. The clock is the real one
(Slurm's times are)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kube_api import KubeCluster, clusters, write_kubeconfig
from kube_objects import node
from slurm_daemons import NODE, Slurm, missing, slurm

from reconciler import pipeline
from reconciler.apply import flow
from reconciler.catalog import load_catalog
from reconciler.observe.fleetwide import observe_loaded
from reconciler.observe.model import Snapshot
from reconciler.reconcile.loop import Config, CycleReport, Reconciler
from reconciler.slurm.act import apply_slurm

from builders import PRIORITIES, TEAMS

pytestmark = pytest.mark.skipif(bool(missing()) and not os.environ.get("CI"),
                                reason=f"Slurm daemons not installed ({', '.join(missing())}): .ci/system-tools")

TOKEN_ENV = "FLEET_TEST_SLURM_JWT"


def slurm_cluster(url: str) -> str:
    return (f'name: hpc\nprovider: slurm\nregion: onprem-lab\nslurm: {{rest_url: "{url}", token_env: {TOKEN_ENV}}}\n'
            "pools:\n  - {name: gpu, accelerator: nvidia-h100-80gb, capacity: owned, min: 1, max: 1, partition: low,\n"
            "     node: {accelerators: 2, cpus: 2, memory_gib: 1}, hourly_usd: 2.0}\n")


K8S = """\
name: k8s
provider: onprem
region: onprem-lab
kubernetes: {cluster: k8s, context: ctx-k8s}
pools:
  - {name: h100, accelerator: nvidia-h100-80gb, capacity: owned, min: 1, max: 1,
     node: {accelerators: 8, cpus: 96, memory_gib: 512}, hourly_usd: 400.0}
"""


def job(name: str) -> str:
    return (f"name: {name}\nteam: vision\noptions: [{{accelerator: nvidia-h100-80gb, count: 1}}]\n"
            "duration_hours: 1\ncheckpoint_minutes: 30\nimage: registry.example/train:1\ncommand: [python, train.py]\n"
            "slurm: {script: \"sleep 600\", time_limit_minutes: 30}\n")


@pytest.fixture(scope="module")
def hpc() -> Iterator[Slurm]:
    with slurm() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def k8s() -> Iterator[KubeCluster]:
    with clusters("k8s") as cs:
        cs["k8s"].add(node("k8s-h100-0", pool="h100", accel="gpu"))
        yield cs["k8s"]


class Rig:
    def __init__(self, tmp: Path, hpc: Slurm, k8s: KubeCluster) -> None:
        self.repo, self.hpc, self.k8s = tmp / "repo", hpc, k8s
        files = {"policies/teams.yaml": TEAMS, "policies/priorities.yaml": PRIORITIES,
                 "policies/placement.yaml": "reconcile: {node_failed_after_minutes: 0}\n",
                 "fleet/clusters/hpc.yaml": slurm_cluster(hpc.rest_url), "fleet/clusters/k8s.yaml": K8S,
                 "jobs/vision/train.yaml": job("train"), "jobs/vision/extra.yaml": job("extra")}
        for path, text in files.items():
            (self.repo / path).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / path).write_text(text)
        self.kubeconfig = write_kubeconfig(tmp / "kubeconfig", {"ctx-k8s": k8s.url})
        self.lines: list[str] = []
        self.loop = Reconciler(Config(repo=self.repo, kubeconfig=str(self.kubeconfig), once=True, layers=("jobs",),
                                      log_file=tmp / "actions.jsonl"),
                               clock=lambda: datetime.now(UTC) + self.ahead, say=self.lines.append)
        self.ahead = timedelta(0)     # the loop's clock ahead of Slurm's: how long jobs seem to have run

    def cycle(self) -> CycleReport:
        return self.loop.cycle()

    def fleet_jobs(self, state: str | None = None) -> dict[str, dict[str, Any]]:
        """Fleet's jobs in Slurm now, by Fleet job id (the newest of each), optionally only in `state`."""
        out: dict[str, dict[str, Any]] = {}
        for j in sorted(self.hpc.jobs(), key=lambda j: j["job_id"]):
            if j["comment"].startswith("fleet.dev/job=") and (state is None or j["job_state"] == state):
                out[j["comment"].split()[0].split("=", 1)[1]] = j
        return out


def jobs_acted(report: CycleReport) -> list[str]:
    assert report.decision is not None
    return [a.describe() for a in report.decision.actions if a.kind != "kueue"]


def done(report: CycleReport) -> list[str]:
    return sorted(f"{r.action.kind} {r.action.job} {r.action.cluster} {r.status}" for r in report.results)


def test_fleet_submits_counts_requeues_cancels_and_fails_over_on_a_real_slurm(
        tmp_path: Path, hpc: Slurm, k8s: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, hpc.token())
    rig = Rig(tmp_path, hpc, k8s)

    # 1. both placed jobs are submitted through slurmrestd, as render writes them; they run
    first = rig.cycle()
    assert done(first) == ["start vision/extra hpc done", "start vision/train hpc done"], rig.lines
    mine = rig.hpc.wait("both Fleet jobs running", lambda: len(rig.fleet_jobs("RUNNING")) == 2 and rig.fleet_jobs())
    train = mine["vision/train"]
    # (the QOS Fleet sends, `research`, is kept only where accounting is on: slurmdbd, not run here)
    assert (train["name"], train["account"], train["partition"]) == ("vision.train", "vision", "low")
    assert train["tres_per_node"] == "gres:gpu:1" and train["nodes"] == NODE

    # 2. a fleet that already runs the plan gets no write: observed running, nothing decided
    again = rig.cycle()
    assert again.decision is not None and jobs_acted(again) == [], rig.lines     # (k8s's Kueue: not in --layers)
    seen = _hpc(rig.loop.last_snapshot)
    assert sorted((js.name, js.units) for js in seen.jobsets) == [("extra", (0,)), ("train", (0,))]
    assert {w.jobset: w.phase() for w in seen.workloads} == {"extra": "running", "train": "running"}

    # 3. a removed file: its job is cancelled, and only it (someone else's job is never touched)
    other = rig.hpc.rest("POST", "/job/submit", {"script": "#!/bin/bash\nsleep 600\n", "job": {
        "name": "someone-else", "partition": "low", "comment": "not fleet", "current_working_directory": "/tmp",
        "environment": {"PATH": "/usr/bin:/bin"}}})["job_id"]
    (rig.repo / "jobs/vision/extra.yaml").unlink()
    removed = rig.cycle()
    assert done(removed) == ["stop vision/extra hpc done"], rig.lines
    rig.hpc.wait("extra cancelled", lambda: rig.fleet_jobs()["vision/extra"]["job_state"] == "CANCELLED")
    assert next(j for j in rig.hpc.jobs() if j["job_id"] == other)["job_state"] in ("RUNNING", "PENDING")
    rig.hpc.rest("DELETE", f"/job/{other}")

    # 4. a higher-tier job preempts Fleet's: Slurm requeues it, Fleet counts the requeue and does not act
    high = rig.hpc.rest("POST", "/job/submit", {"script": "#!/bin/bash\nsleep 600\n", "job": {
        "name": "urgent", "partition": "high", "gpus_per_node": "2", "nodes": [1, 1], "comment": "someone else",
        "current_working_directory": "/tmp", "environment": {"PATH": "/usr/bin:/bin"}}})["job_id"]
    rig.hpc.wait("train requeued", lambda: rig.fleet_jobs()["vision/train"]["restart_cnt"] >= 1)
    counted = rig.cycle()
    assert done(counted) == [], rig.lines
    seen = _hpc(rig.loop.last_snapshot)
    wl = next(w for w in seen.workloads if w.jobset == "train")
    assert (wl.phase(), wl.requeue_count, [(e.reason, e.count) for e in wl.evictions]) == \
        ("queued", 1, [("Preempted", 1)])

    # 5. the urgent job ends; train runs again (after Slurm's requeue delay, cred_expire), then its node is
    #    drained: the job fails over to Kubernetes, cancelled on Slurm first, with the work it loses stated
    rig.hpc.rest("DELETE", f"/job/{high}")
    rig.hpc.wait("train running again", lambda: rig.fleet_jobs()["vision/train"]["job_state"] == "RUNNING")
    rig.hpc.scontrol("update", f"nodename={NODE}", "state=drain", "reason=fleet-test")
    rig.ahead = timedelta(minutes=20)        # it has run 20 minutes since its start, its last checkpoint 30 ago
    moved = rig.cycle()
    assert done(moved) == ["move vision/train k8s done"], rig.lines
    action = moved.results[0].action
    assert (action.from_cluster, action.from_pool, action.pool) == ("hpc", "gpu", "h100")
    assert f"unit 0 of hpc/gpu failed: node {NODE} Drained=True" in action.reason
    assert 20 <= action.lost_minutes < 21
    assert action.lost_accelerator_hours == pytest.approx(action.lost_minutes / 60, abs=0.002)   # 1 GPU
    rig.hpc.wait("train cancelled on Slurm", lambda: rig.fleet_jobs()["vision/train"]["job_state"] == "CANCELLED")
    assert ("vision", "train") in rig.k8s.objects["jobsets"]
    rig.hpc.scontrol("update", f"nodename={NODE}", "state=resume")


def test_a_slurm_controller_that_does_not_answer_is_an_unreachable_cluster(
        tmp_path: Path, k8s: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """No slurmrestd at the URL: a fact in the snapshot and the cycle goes on, nothing is sent there."""
    monkeypatch.setenv(TOKEN_ENV, "x.eyJzdW4iOiAic2x1cm0ifQ.y")
    dead = Slurm(tmp_path, "http://127.0.0.1:9", b"", [])
    rig = Rig(tmp_path, dead, k8s)
    report = rig.cycle()
    seen = _hpc(rig.loop.last_snapshot)
    assert seen.status == "unreachable" and seen.problems[0].kind == "refused"
    assert "http://127.0.0.1:9/slurm/v0.0.38/nodes/" in seen.problems[0].message
    assert report.errors == () and all(r.action.cluster != "hpc" for r in report.results)


def _hpc(snap: Snapshot | None) -> Any:
    assert snap is not None
    found = snap.cluster("hpc")
    assert found is not None
    return found


def test_fleet_apply_submits_a_placed_job_once_and_cancels_it_when_its_file_is_removed(
        hpc: Slurm, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet apply`'s Slurm part (slurm/act.py `apply_slurm`, called by apply/flow.py after the Kubernetes jobs):
    the same plan applied twice submits once; a plan without the job cancels it."""
    monkeypatch.setenv(TOKEN_ENV, hpc.token())
    hpc.wait("the node idle", lambda: all(n["state"] == "idle" and not n["state_flags"]
                                          for n in hpc.rest("GET", "/nodes/")["nodes"]))
    base = {"policies/teams.yaml": TEAMS, "policies/priorities.yaml": PRIORITIES,
            "fleet/clusters/hpc.yaml": slurm_cluster(hpc.rest_url)}
    catalog = load_catalog()

    def apply(with_job: bool, lines: list[str]) -> list[tuple[str, str]]:
        head = pipeline.check({k: v.encode() for k, v in {
            **base, **({"jobs/vision/applied.yaml": job("applied")} if with_job else {})}.items()}, catalog)
        snap = observe_loaded(head.loaded, None, datetime.now(UTC))
        plan = pipeline.plan(head, observed=snap)
        got = apply_slurm(head, plan, snap, flow.deletions_by_cluster(head, plan, snap, None), preview=False,
                          echo=lines.append)
        return [(r.name, r.action) for r in got]

    lines: list[str] = []
    assert apply(True, lines) == [("applied", "create")], lines
    mine = lambda: [j for j in hpc.jobs() if j["comment"].startswith("fleet.dev/job=vision/applied ")]  # noqa: E731
    hpc.wait("applied running", lambda: [j for j in mine() if j["job_state"] == "RUNNING"])
    assert apply(True, lines) == [("applied", "unchanged")], lines
    assert apply(False, lines) == [("applied", "delete")], lines
    hpc.wait("applied cancelled", lambda: all(j["job_state"] == "CANCELLED" for j in mine()))
    assert len(mine()) == 1
