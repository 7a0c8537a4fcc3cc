"""Papercuts a new user meets (issue 25): the repository found from a subfolder, "did you mean" for job ids,
accelerators, pools and clusters, unit numbers written as people write them."""

from __future__ import annotations

import sys
from contextlib import chdir
from pathlib import Path

import pytest
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.pipeline import check
from reconciler.problems import FleetError, UsageError
from reconciler.reconcile.model import Action
from reconciler.simulate.faults import parse_outage
from reconciler.suggest import closest, did_you_mean, unit_list

from builders import GKE, base_files, with_files


def tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def fleet(*args: str) -> tuple[int, str]:
    """Exit code and output as `main` gives them (a FleetError: its message and hint, exit 1 or 2)."""
    r = CliRunner().invoke(cli, list(args), env={"FLEET_NOW": "2026-11-23T08:00:00+00:00"})
    if isinstance(r.exception, FleetError):
        return r.exception.exit_code, f"{r.output}error: {r.exception.message}\nhint: {r.exception.hint}\n"
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


@pytest.mark.parametrize("sub", ["jobs/vision", "jobs", "fleet/clusters", "policies"])
def test_the_repository_is_found_from_any_subfolder(tmp_path: Path, sub: str) -> None:
    repo = tree(tmp_path / "repo", base_files())
    with chdir(repo / sub):
        code, out = fleet("validate")
    assert (code, out) == (0, "ok: no problems found\n")
    with chdir(repo / sub):
        code, out = fleet("explain", "vision/train")
    assert code == 0 and out.splitlines()[2] == "# vision/train"


def test_outside_any_repository_the_message_stays(tmp_path: Path) -> None:
    with chdir(tmp_path):
        code, out = fleet("validate")
    assert code == 2 and "has none of fleet, policies, jobs, robots, deployments/" in out


def test_a_mistyped_job_id_names_the_job_meant(tmp_path: Path) -> None:
    repo = tree(tmp_path, base_files())
    code, out = fleet("explain", "--repo", str(repo), "vision/trian")
    assert code == 2
    assert "error: no job `vision/trian` in the repository" in out
    assert "hint: did you mean `vision/train`?" in out


@pytest.mark.parametrize(("typed", "meant"), [("nvidia-h200", "nvidia-h200-141gb"), ("tpu-v5", "tpu-v5p"),
                                              ("nvidia-h100", "nvidia-h100-80gb")])
def test_a_mistyped_accelerator_names_the_one_meant(typed: str, meant: str) -> None:
    files = with_files({"jobs/vision/x.yaml": f"name: x\nteam: vision\noptions:\n  - {{accelerator: {typed}, "
                                                "count: 8}\nimage: img:1\n"})
    found = [p for p in check(files, load_catalog()).errors if p.field == "options[0].accelerator"]
    assert len(found) == 1 and found[0].hint.startswith(f"did you mean `{meant}`? use one of: ")


def test_a_mistyped_cluster_names_the_one_meant() -> None:
    files = with_files({"policies/placement.yaml": "reconcile: {lease_cluster: gke-uc1}\n"})
    found = [p for p in check(files, load_catalog()).errors if p.field == "reconcile.lease_cluster"]
    assert [p.hint for p in found] == ["did you mean `gke-usc1`? name one of: gke-usc1, onprem-sjc"]
    with pytest.raises(UsageError) as e:
        parse_outage("gke-usc@4+2", ("gke-usc1", "onprem-sjc"))
    assert e.value.hint.startswith("did you mean `gke-usc1`?")


def test_a_mistyped_pool_in_a_cluster_file_is_named() -> None:
    """A pool of a different accelerator in the fleet: the prefix rule of `closest` finds the full name."""
    assert closest("h100-sp", ["h100", "h100-spot", "v5p-4x4x4"]) == "h100-spot"
    assert closest("zzz", ["h100", "h100-spot"]) is None
    assert did_you_mean("v5p-4x4", ["h100", "v5p-4x4x4"]) == "did you mean `v5p-4x4x4`? use one of: h100, v5p-4x4x4"
    assert "v5p-4x4x4" in GKE


def test_unit_lists_read_as_lists_not_python() -> None:
    assert unit_list([0, 1, 2, 3, 5]) == "0–3, 5"
    assert unit_list([4, 0]) == "0, 4"
    assert unit_list([]) == "none"
    a = Action(kind="start", cluster="c1", pool="h100", job="vision/train", units=(0, 1, 2), reason="new")
    assert "units 0–2" in a.describe() and "[" not in a.describe()


def test_explain_writes_units_as_a_list(tmp_path: Path) -> None:
    repo = tree(tmp_path, base_files())
    code, out = fleet("explain", "--repo", str(repo), "vision/train")
    placed = next(line for line in out.splitlines() if line.startswith("**placed**"))
    assert code == 0 and " units 0, 1 with option 1 " in placed, placed
