"""`fleet status TEAM/JOB` and `fleet logs TEAM/JOB` (issue 25) against a local Kubernetes API server
(tests/kube_api.py): one job's story, and its pods' logs leader first, followed, tailed, all of them."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from kube_api import KubeCluster, write_kubeconfig
from kube_objects import job_objects

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.eta import expected_start
from reconciler.observe.logs import rank
from reconciler.pipeline import check, plan
from reconciler.plan.explain import explain
from reconciler.plan.planner import plan_with_state
from reconciler.problems import FleetError

from builders import GKE, TEAMS, base_files, job, with_files

NOW = "2026-11-23T04:00:00+00:00"          # kube_objects.T0 + 4 h


def pod(name: str, *, job: str = "train", index: int = 0, containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    labels = {"fleet.dev/team": "vision", "fleet.dev/job": job, "fleet.dev/pool": "h100",
              "jobset.sigs.k8s.io/replicatedjob-name": "workers", "jobset.sigs.k8s.io/job-index": str(index),
              "batch.kubernetes.io/job-completion-index": "0"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "vision", "labels": labels},
            "spec": {"nodeName": "n1", "containers": [{"name": c, "image": "i"} for c in containers]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


FILES = {**base_files(), "fleet/clusters/gke-usc1.yaml": GKE.replace("kubernetes: {cluster: ml-usc1}",
                                                                     "kubernetes: {cluster: ml-usc1, context: usc1}"),
         "jobs/vision/idle.yaml": job("idle", count=8, body="duration_hours: 5\n")}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, KubeCluster]]:
    root = tmp_path_factory.mktemp("story")
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
    api = KubeCluster("gke-usc1").start()
    for obj in job_objects("vision", "train", "h100", "running", restarts=2, replicas=2, accel="gpu", per_pod=8):
        api.add(obj)
    # rank 1 sorts after rank 0 whatever the names; another job's pod is never shown
    api.add(pod("train-workers-1-0-zz", index=1), pod("train-workers-0-0-aa", index=0), pod("other-0", job="other"))
    api.log("vision", "train-workers-0-0-aa", "step 1 loss 2.0", "step 2 loss 1.5")
    api.log("vision", "train-workers-1-0-zz", "worker 1 up")
    api.log("vision", "other-0", "not mine")
    write_kubeconfig(root / "kubeconfig", {"usc1": api.url})
    yield root, api
    api.stop()


def fleet(root: Path, *args: str, kubeconfig: str = "kubeconfig") -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, [*args[:1], "--repo", str(root), *args[1:]],
                                           env={"KUBECONFIG": str(root / kubeconfig), "FLEET_NOW": NOW})
    if isinstance(r.exception, FleetError):
        return r.exception.exit_code, r.stdout, f"{r.stderr}error: {r.exception.message}\nhint: {r.exception.hint}"
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.stdout, r.stderr


# -- fleet status TEAM/JOB ---------------------------------------------------------------------------------------

def test_one_jobs_story_decision_copies_events(repo: tuple[Path, KubeCluster]) -> None:
    root, _ = repo
    code, out, err = fleet(root, "status", "vision/train")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("vision/train  (priority production)  observed 2026-11-23 04:00 UTC")
    assert any(line.startswith("plan: kept on gke-usc1/h100 ") for line in lines), out
    copy = next(line for line in lines if line.startswith("  gke-usc1/h100: "))
    assert copy.startswith("  gke-usc1/h100: running since 2026-11-23 00:12, 2 restart(s), 0 eviction(s), $")
    assert "recent events (conditions, newest first):" in lines
    assert any("gke-usc1 Workload Admitted=True" in line for line in lines), out
    assert "expected start" not in out             # it runs


def test_a_waiting_jobs_story_says_why_and_when_as_an_estimate(repo: tuple[Path, KubeCluster]) -> None:
    root, _ = repo
    code, out, _ = fleet(root, "status", "vision/idle", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"job", "observed_at", "priority", "duration_hours", "decision", "copies", "events",
                        "expected_start", "unreadable"}
    assert doc["copies"] == [] and doc["events"] == []
    assert doc["expected_start"]["estimate"] is True
    placed = doc["decision"]["placed"]
    assert placed and doc["expected_start"]["placed"] is True and doc["expected_start"]["at"] == NOW


def test_a_job_waiting_for_queued_capacity_shows_its_admission_check(tmp_path: Path) -> None:
    """Queued provisioning (issue 26): quota is reserved, but the ProvisioningRequest check stays Pending until the
    cloud grants the capacity; the story shows the check, its state and the controller's message."""
    for rel, data in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(data if isinstance(data, str) else data.decode())
    js, wl = job_objects("vision", "idle", "h100", "queued", accel="gpu", per_pod=8)
    wl["status"]["conditions"] = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                   "message": "Quota reserved in ClusterQueue vision",
                                   "lastTransitionTime": "2026-11-23T03:00:00Z"}]
    wl["status"]["admissionChecks"] = [{"name": "dws-prov", "state": "Pending",
                                        "message": "Waiting for resources. Currently there are not enough resources "
                                                   "available to fulfill the request.",
                                        "lastTransitionTime": "2026-11-23T03:01:00Z"}]
    api = KubeCluster("gke-usc1").start()
    try:
        api.add(js, wl)
        write_kubeconfig(tmp_path / "kubeconfig", {"usc1": api.url})
        code, out, err = fleet(tmp_path, "status", "vision/idle")
        assert code == 0, out + err
        assert "2026-11-23 03:01  gke-usc1 Workload AdmissionCheck dws-prov=Pending  Waiting for resources." in out, out
        code, out, _ = fleet(tmp_path, "status", "vision/idle", "--format", "json")
        event = next(e for e in json.loads(out)["events"] if e["type"] == "AdmissionCheck dws-prov")
        assert event["status"] == "Pending" and event["at"].startswith("2026-11-23T03:01")
    finally:
        api.stop()


def test_status_of_a_mistyped_job_names_the_one_meant(repo: tuple[Path, KubeCluster]) -> None:
    code, _, err = fleet(repo[0], "status", "vision/trian")
    assert code == 2 and "did you mean `vision/train`?" in err


def test_expected_start_waits_for_the_holders_to_end() -> None:
    """Pure: a job asking for every H100 GPU its team's quota allows waits for its team's job holding them to end,
    and says so as an estimate, the plan's (plan/reserve.py); behind a holder without duration_hours it is unknown."""
    files = with_files({"jobs/vision/a.yaml": job("a", count=64, body="duration_hours: 3\n"),
                        "jobs/vision/b.yaml": job("b", count=64, body="duration_hours: 4\npriority: research\n")})
    v = check(files, load_catalog())
    p = plan(v)
    now = datetime(2026, 11, 23, tzinfo=UTC)
    waiting = next(x.job for x in p.pending)
    eta = expected_start(v, p, waiting, now)
    assert eta.at is not None and eta.at.hour in (3, 4) and not eta.placed
    assert "the plan reserves units" in eta.text() and "(estimate)" in eta.text()    # its quota's and units' hold
    assert eta.at == now + timedelta(hours=next(x.expected_start or 0 for x in p.pending))   # one answer
    files = with_files({"jobs/vision/a.yaml": job("a", count=64), "jobs/vision/b.yaml": job("b", count=64)})
    v = check(files, load_catalog())
    p = plan(v)
    eta = expected_start(v, p, next(x.job for x in p.pending), now)
    assert eta.at is None and eta.text().startswith("unknown (estimate)")
    assert "nothing is held for it" not in eta.text()


def test_a_start_its_budget_never_pays_for_is_unknown_and_says_so() -> None:
    """A job that costs more than its team's whole monthly budget never starts in the plan's reckoning, though no
    work holds what it needs: the answer names the budget among what it rests on (before 2026-12-06 it named only
    running work without duration_hours)."""
    teams = TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 100000")
    files = with_files({"policies/teams.yaml": teams, "jobs/vision/train.yaml": None,
                        "jobs/vision/ms.yaml": job("ms", count=64, body="duration_hours: 3\n")})
    v = check(files, load_catalog())
    p = plan(v)
    now = datetime(2026, 11, 23, tzinfo=UTC)
    assert [x.job for x in p.pending] == ["vision/ms"] and p.pending[0].expected_start is None
    assert "monthly budget of team vision" in p.pending[0].reasons[0]
    eta = expected_start(v, p, "vision/ms", now)
    assert eta.at is None and "its team's monthly budget is less than it costs" in eta.text()
    result, state = plan_with_state(v)
    assert "**expected start**: unknown: no end the plan reckons with frees what it lacks" in explain(
        result, state, "vision/ms")


# -- fleet logs -------------------------------------------------------------------------------------------------

def test_logs_show_the_leader_first(repo: tuple[Path, KubeCluster]) -> None:
    code, out, err = fleet(repo[0], "logs", "vision/train")
    assert (code, out) == (0, "step 1 loss 2.0\nstep 2 loss 1.5\n"), err
    assert err == "==> gke-usc1/train-workers-0-0-aa (leader; 1 more pod(s): --all shows them) <==\n"


def test_logs_of_every_pod_prefixed_in_rank_order_and_tailed(repo: tuple[Path, KubeCluster]) -> None:
    code, out, _ = fleet(repo[0], "logs", "vision/train", "--all", "--tail", "1")
    assert (code, out) == (0, "[gke-usc1/train-workers-0-0-aa] step 2 loss 1.5\n"
                              "[gke-usc1/train-workers-1-0-zz] worker 1 up\n")
    last = [r for r in repo[1].requests if r.path.endswith("/log")][-1]
    assert last.query["tailLines"] == "1"


def test_logs_follow_streams_until_the_container_exits(repo: tuple[Path, KubeCluster]) -> None:
    root, api = repo

    def later() -> None:
        time.sleep(0.2)
        api.log("vision", "train-workers-0-0-aa", "step 3 loss 1.2")
        time.sleep(0.1)
        api.end_log("vision", "train-workers-0-0-aa")

    threading.Thread(target=later, daemon=True).start()
    code, out, _ = fleet(root, "logs", "vision/train", "--follow")
    assert (code, out) == (0, "step 1 loss 2.0\nstep 2 loss 1.5\nstep 3 loss 1.2\n")


def test_logs_of_a_job_that_runs_nowhere_say_so(repo: tuple[Path, KubeCluster]) -> None:
    code, out, err = fleet(repo[0], "logs", "vision/idle")
    assert code == 1 and out == ""
    assert "error: vision/idle runs nowhere: no pod of it on any cluster that answered" in err
    assert "`fleet status vision/idle`" in err


def test_logs_when_no_cluster_can_be_read(repo: tuple[Path, KubeCluster]) -> None:
    root, _ = repo
    write_kubeconfig(root / "refused", {"usc1": "http://127.0.0.1:9"})
    code, _, err = fleet(root, "logs", "vision/train", kubeconfig="refused")
    assert code == 2
    assert "no cluster could be read, so the logs of vision/train are unknown" in err and "cannot connect" in err


def test_a_forbidden_log_is_reported(repo: tuple[Path, KubeCluster]) -> None:
    root, api = repo
    api.faults["log"] = 403
    try:
        code, _, err = fleet(root, "logs", "vision/train")
    finally:
        del api.faults["log"]
    assert code == 2 and "HTTP 403" in err and "no log of vision/train could be read" in err


def test_rank_puts_the_leader_first() -> None:
    pods = {"w3": {"leaderworkerset.sigs.k8s.io/worker-index": "3"},
            "lead": {"leaderworkerset.sigs.k8s.io/worker-index": "0"},
            "head": {"jobset.sigs.k8s.io/replicatedjob-name": "head", "jobset.sigs.k8s.io/job-index": "0"},
            "r2": {"jobset.sigs.k8s.io/replicatedjob-name": "workers", "jobset.sigs.k8s.io/job-index": "2"},
            "plain": {}}
    assert sorted(pods, key=lambda n: (rank(pods[n]), n)) == ["lead", "w3", "head", "r2", "plain"]
