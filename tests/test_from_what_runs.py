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
