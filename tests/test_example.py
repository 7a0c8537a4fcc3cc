"""The example fleet in this repository validates clean and covers what the README promises."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.pipeline import check
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]


def test_example_validates_with_no_problem() -> None:
    r = CliRunner().invoke(cli, ["validate", "--repo", str(ROOT)])
    assert (r.exit_code, r.output) == (0, "ok: no problems found\n")


def test_example_covers_the_fleet_it_claims() -> None:
    v = check(read_worktree(ROOT), load_catalog())
    clusters = v.loaded.clusters
    gcp = [c for c in clusters if c.provider == "gcp"]
    assert len({c.region for c in gcp}) >= 3
    gcp_pools = [(p.accelerator, p.capacity) for c in gcp for p in c.pools]
    for acc in ("tpu-v5p", "tpu-v5e", "tpu-v6e"):
        shapes = {p.topology for c in gcp for p in c.pools if p.accelerator == acc}
        assert len(shapes) >= 2, acc
    for acc in ("nvidia-h100-80gb", "nvidia-h200-141gb"):
        assert {(acc, "spot"), (acc, "on-demand")} <= set(gcp_pools), acc
    aws = [c for c in clusters if c.provider == "aws"]
    assert aws and {"p5.48xlarge", "p5en.48xlarge"} <= {p.machine_type for c in aws for p in c.pools}
    onprem = [p for c in clusters if c.provider == "onprem" for p in c.pools]
    assert onprem and all(p.capacity == "owned" and p.accelerator == "nvidia-h100-80gb" for p in onprem)

    assert v.loaded.teams is not None and v.loaded.priorities is not None
    teams = v.loaded.teams.teams
    assert len(teams) >= 5 and all(t.quota for t in teams) and any(t.budget_monthly_usd for t in teams)
    assert any(c.parent for c in v.loaded.teams.cohorts)
    assert len(v.loaded.priorities.classes) == 4

    jobs = v.loaded.jobs
    assert len(jobs) >= 40
    assert any(o.slices > 1 for j in jobs for o in j.options)                               # TPU multislice
    assert any((o.count or 0) >= 16 and o.accelerator.startswith("nvidia") for j in jobs for o in j.options)
    assert any(o.count == 1 for j in jobs for o in j.options)                               # single GPU
    assert any(j.kind == "inference" and j.replicas > 1 for j in jobs)
    assert any(j.spot != "never" for j in jobs)
    assert any(len(j.options) > 1 for j in jobs)


def test_example_files_point_editors_at_the_schema() -> None:
    for path in sorted((ROOT / "jobs").rglob("*.yaml")) + sorted((ROOT / "fleet").rglob("*.yaml")):
        first = path.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema="), path
        target = (path.parent / first.split("=", 1)[1]).resolve()
        assert target.is_file(), f"{path}: {target} does not exist"
