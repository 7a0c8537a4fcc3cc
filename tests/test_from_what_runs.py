"""Issue 20 item 8, status and explain from what runs: one count of jobs for every summary line, `fleet
status` from what runs (waiting jobs with the plan's reason, pools' use within their units, one spend figure
with services, unknown budgets when nothing was read), `fleet explain` from the last applied plan or a
snapshot, and `fleet reconcile --once` giving its Lease back."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from kube_api import clusters
from test_reconcile import Rig, cluster_yaml, fleet_files, slice_nodes

from reconciler.cli import cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_NOW = {"FLEET_NOW": "2026-11-23T08:00:00+00:00"}


# --- one definition of "jobs" ----------------------------------------------------------------------------------

def test_plan_and_cost_summaries_count_jobs_alike_and_spread_services_once() -> None:
    """The example has spread services (several placements, one job each): `fleet plan` said 47 jobs placed,
    `fleet cost` 55 (its placements), the reconcile cycle 55; now all say jobs, and the placements apart."""
    runner = CliRunner()
    plan_md = runner.invoke(cli, ["plan", "--repo", str(ROOT)], env=EXAMPLE_NOW)
    plan_js = runner.invoke(cli, ["plan", "--repo", str(ROOT), "--format", "json"], env=EXAMPLE_NOW)
    cost_md = runner.invoke(cli, ["cost", "--repo", str(ROOT)], env=EXAMPLE_NOW)
    assert plan_md.exit_code == cost_md.exit_code == plan_js.exit_code == 0, plan_md.output + cost_md.output
    import json

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
