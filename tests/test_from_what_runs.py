"""Issue 20 item 8, status and explain from what runs: one count of jobs for every summary line, `fleet
status` from what runs (waiting jobs with the plan's reason, pools' use within their units, one spend figure
with services, unknown budgets when nothing was read), `fleet explain` from the last applied plan or a
snapshot, and `fleet reconcile --once` giving its Lease back."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from kube_api import clusters
from test_reconcile import Rig, cluster_yaml, fleet_files, slice_nodes

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.observe.model import ClusterObservation, ObserveProblem, ServiceWorkload, Snapshot
from reconciler.pipeline import check
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_NOW = {"FLEET_NOW": "2026-11-23T08:00:00+00:00"}


# --- one definition of "jobs" ----------------------------------------------------------------------------------

def test_plan_and_cost_summaries_count_jobs_alike_and_spread_services_once() -> None:
    """The example has spread services (several placements, one job each): `fleet plan` said 51 jobs placed,
    `fleet cost` 55 (its placements), the reconcile cycle 55; now all say jobs, and the placements apart."""
    runner = CliRunner()
    plan_md = runner.invoke(cli, ["plan", "--repo", str(ROOT)], env=EXAMPLE_NOW)
    plan_js = runner.invoke(cli, ["plan", "--repo", str(ROOT), "--format", "json"], env=EXAMPLE_NOW)
    cost_md = runner.invoke(cli, ["cost", "--repo", str(ROOT)], env=EXAMPLE_NOW)
    assert plan_md.exit_code == cost_md.exit_code == plan_js.exit_code == 0, plan_md.output + cost_md.output
    doc = json.loads(plan_js.output)
    jobs, placements = len({p["job"] for p in doc["placements"]}), len(doc["placements"])
    assert jobs < placements                                   # the example spreads services: the case at issue
    line = f"{jobs} jobs placed ({placements} placements), {len(doc['pending'])} pending"
    assert line in plan_md.output and line in cost_md.output
    counts = re.findall(r"(\d+) jobs placed", plan_md.output + cost_md.output)
    assert set(counts) == {str(jobs)}


def test_the_reconcile_cycle_counts_a_spread_service_as_one_job(tmp_path: Path) -> None:
    service = ("name: serve\nteam: vision\npriority: production\nkind: inference\n"
               "options:\n  - {accelerator: tpu-v5p, topology: 4x4x4}\nreplicas: 2\nspread: cluster\n"
               "image: img:1\nport: 8000\n")
    files = fleet_files(jobs=())
    files["jobs/vision/serve.yaml"] = service
    files["fleet/clusters/b.yaml"] = cluster_yaml("b").replace("us-central1-a", "us-central1-b")
    with clusters("a", "b", "mgmt") as servers:
        slice_nodes(servers["a"], 0)
        slice_nodes(servers["b"], 0)
        rig = Rig(tmp_path, servers, files)
        report = rig.reconciler(dry_run=True).cycle()
    assert report.decision is not None
    header = rig.lines[0]
    assert "1 job placed (2 placements), 0 pending, 0 preempted" in header, header


# --- `fleet reconcile --once` gives its Lease back ----------------------------------------------------------------

LEASE = ("fleet-system", "fleet-reconciler")


def test_reconcile_once_releases_the_lease_it_held_so_the_next_one_takes_it_at_once(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from reconciler.reconcile.kubeio import Client
    from reconciler.reconcile.lease import acquire

    with clusters("a", "b", "mgmt") as servers:
        slice_nodes(servers["a"], 0)
        rig = Rig(tmp_path, servers, fleet_files())
        result = CliRunner().invoke(cli, ["reconcile", "--once", "--layers", "jobs", "--repo", str(rig.repo),
                                          "--identity", "one"],
                                    env={"KUBECONFIG": str(rig.kubeconfig)})
        assert result.exit_code == 0, result.output
        assert "created, held by one" in result.output and "released by one" in result.output
        spec = servers["mgmt"].objects["leases"][LEASE]["spec"]
        assert not spec["holderIdentity"] and spec["leaseDurationSeconds"] == 1
        # the next reconciler (another scheduled run, or the Deployment) holds it now, not 2.5 intervals later
        client = Client("mgmt", "ctx-mgmt", str(rig.kubeconfig))
        got = acquire(client, "two", datetime.now(UTC), 150)
        assert got.leader, got.message
        client.close()


def test_release_leaves_a_lease_someone_else_holds_or_took_meanwhile(tmp_path: Path) -> None:
    from test_reconcile import START

    from reconciler.reconcile.kubeio import Client, Reply
    from reconciler.reconcile.lease import PATH, acquire, release

    url = PATH.format(ns=LEASE[0]) + "/" + LEASE[1]
    with clusters("a", "b", "mgmt") as servers:
        rig = Rig(tmp_path, servers, fleet_files())
        client = Client("mgmt", "ctx-mgmt", str(rig.kubeconfig))
        assert acquire(client, "one", START, 150).leader
        assert "left as it is" in release(client, "two", START)       # not ours: untouched
        assert servers["mgmt"].objects["leases"][LEASE]["spec"]["holderIdentity"] == "one"

        class TakenMeanwhile:
            """The Lease is taken by `three` between release's read and its update."""

            cluster = "mgmt"

            def request(self, method: str, path: str, body: object = None) -> Reply:
                got = client.request(method, path, body)
                if method == "GET":
                    lease = servers["mgmt"].objects["leases"][LEASE]
                    taken = client.request("PUT", url, {**lease, "spec": {**lease["spec"], "holderIdentity": "three"}})
                    assert taken.ok
                return got

        message = release(TakenMeanwhile(), "one", START)  # type: ignore[arg-type]
        assert "not released" in message and "409" in message
        spec = servers["mgmt"].objects["leases"][LEASE]["spec"]
        assert spec["holderIdentity"] == "three" and spec["leaseDurationSeconds"] == 150
        client.close()


# --- `fleet status` from what runs ------------------------------------------------------------------------------

OBSERVED = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def example_snapshot(*, reachable: bool = True,
                     services: tuple[ServiceWorkload, ...] = ()) -> Snapshot:
    """Every example cluster read (and empty, but for `services` on gke-use4), or none readable."""
    v = check(read_worktree(ROOT), load_catalog())
    if not reachable:
        problem = ObserveProblem(resource="kubeconfig", kind="refused", message="connection refused",
                                 hint="check the API server")
        return Snapshot(observed_at=OBSERVED, clusters=tuple(
            ClusterObservation(name=c.name, status="unreachable", problems=(problem,), unreachable_since=OBSERVED)
            for c in sorted(v.loaded.clusters, key=lambda c: c.name)))
    return Snapshot(observed_at=OBSERVED, clusters=tuple(
        ClusterObservation(name=c.name, status="ok", services=services if c.name == "gke-use4" else ())
        for c in sorted(v.loaded.clusters, key=lambda c: c.name)))


def status_of(tmp_path: Path, snap: Snapshot, *args: str) -> Result:
    path = tmp_path / "snapshot.json"
    path.write_text(snap.to_json())
    return CliRunner().invoke(cli, ["status", "--repo", str(ROOT), "--observed", str(path), *args])


def test_status_lists_jobs_on_no_cluster_as_waiting_with_the_plans_reason(tmp_path: Path) -> None:
    """Every cluster read and empty: a job the plan cannot place is waiting, and says why (the plan's reason);
    one the plan places says where it will start. Before: `unknown`, "not found on any cluster", no reason."""
    result = status_of(tmp_path, example_snapshot())
    assert result.exit_code == 0, result.output
    waiting = result.output.split("\nwaiting\n")[1].split("\n\n")[0]
    row = next(line for line in waiting.splitlines() if "foundation/atlas-ablation-data-mix" in line)
    assert "insufficient tpu-v5p quota for team foundation" in row
    doc = json.loads(status_of(tmp_path, example_snapshot(), "--format", "json").output)
    jobs = {j["job"]: j for j in doc["jobs"]}
    assert jobs["foundation/atlas-ablation-data-mix"]["note"].startswith("on no cluster: waiting")
    assert "on no cluster yet: the plan places it on " in jobs["serving/safety-classifier"]["note"]
    assert not any(j["note"] == "not found on any cluster" for j in doc["jobs"])


def test_status_spend_this_month_includes_inference_services(tmp_path: Path) -> None:
    """A service serving for 30 hours on v6e: its team's spend this month is its price x 30 h (before: $0,
    so the status and cost reports' spend differed by the whole inference bill)."""
    svc = ServiceWorkload(kind="Deployment", namespace="serving-prod", name="safety-classifier", team="serving",
                          job="safety-classifier", pool="v6e-2x2", replicas=4, ready_replicas=4,
                          created_at=OBSERVED - timedelta(hours=30))
    doc = json.loads(status_of(tmp_path, example_snapshot(services=(svc,)), "--format", "json").output)
    row = next(j for j in doc["jobs"] if j["job"] == "serving/safety-classifier")
    assert row["hourly_usd"] > 0 and row["cost_usd"] == round(row["hourly_usd"] * 30, 2)
    team = next(t for t in doc["teams"] if t["team"] == "serving")
    assert team["spent_month_usd"] == pytest.approx(row["hourly_usd"] * 30, abs=0.01)


def test_status_with_no_cluster_readable_says_unknown_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.json"
    path.write_text(example_snapshot(reachable=False).to_json())
    result = subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", "status", "--repo",
                             str(ROOT), "--observed", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 2, result.stderr
    budgets = result.stdout.split("\nbudgets to the end of November 2026\n")[1].split("\n\n")[0]
    rows = budgets.splitlines()[1:]
    assert rows and all(r.rstrip().endswith("unknown") for r in rows) and " ok" not in budgets
    assert "no cluster could be read" in result.stderr and "Traceback" not in result.stderr


# --- `fleet explain` from the last applied plan or a snapshot ---------------------------------------------------

JOB = "foundation/atlas-ablation-data-mix"      # pending in the example for want of tpu-v5p quota


def example_copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for part in ("fleet", "jobs", "policies"):
        shutil.copytree(ROOT / part, repo / part)
    return repo


def test_explain_says_what_it_planned_from_and_keeps_what_apply_last_placed(tmp_path: Path) -> None:
    """Before: plain explain planned from git alone, without saying so, and called a job that the last apply
    started pending. Now its first line says what it planned from, and the last applied plan is its base."""
    repo = example_copy(tmp_path)
    alone = CliRunner().invoke(cli, ["explain", JOB, "--repo", str(repo)], env=EXAMPLE_NOW)
    assert alone.exit_code == 0, alone.output
    assert alone.output.splitlines()[0].startswith("planned from git alone: no snapshot or applied plan found")
    assert "**pending**" in alone.output
    # what the last apply placed: the same fleet when foundation had the quota for it
    teams = (repo / "policies/teams.yaml").read_text()
    (repo / "policies/teams.yaml").write_text(teams.replace("tpu-v5p: {nominal: 4096", "tpu-v5p: {nominal: 4608"))
    wider = CliRunner().invoke(cli, ["plan", "--repo", str(repo), "--format", "json", "--out", str(tmp_path / "o")],
                               env=EXAMPLE_NOW)
    assert wider.exit_code == 0 and JOB in {p["job"] for p in json.loads(wider.output)["placements"]}
    (repo / "policies/teams.yaml").write_text(teams)
    (repo / ".fleet").mkdir()
    shutil.copy(tmp_path / "o" / "plan.json", repo / ".fleet" / "last-applied-plan.json")
    applied = CliRunner().invoke(cli, ["explain", JOB, "--repo", str(repo)], env=EXAMPLE_NOW)
    assert applied.exit_code == 0, applied.output
    assert applied.output.splitlines()[0] == f"planned from the last applied plan {repo}/.fleet/last-applied-plan.json"
    assert "**placed**" in applied.output and "status kept" in applied.output
    # with a snapshot too: both named, with the snapshot's time
    snap = tmp_path / "snap.json"
    snap.write_text(example_snapshot().to_json())
    both = CliRunner().invoke(cli, ["explain", JOB, "--repo", str(repo), "--observed", str(snap), "--format", "json"],
                              env=EXAMPLE_NOW)
    assert json.loads(both.output)["planned_from"] == (
        f"planned from snapshot {snap} observed at 2026-11-23T08:00:00+00:00 and the last applied plan "
        f"{repo}/.fleet/last-applied-plan.json")
