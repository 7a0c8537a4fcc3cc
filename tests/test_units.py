"""Interchangeable units (issue 20 item 5): the nodes of a GPU pool are interchangeable, so a job kept in its GPU
pool (same cluster, pool, option and shape) on other, renumbered nodes is `kept` in the plan JSON, no move in the
pull request's comment, and no move for `fleet apply --reviewed` (test_apply_live.py); a TPU slice is physical
capacity, so a TPU job on another slice still moves. One rule decides all of them: `plan.units.stays`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_cost import commit, fleet, git

from reconciler.apply import safety
from reconciler.catalog import load_catalog
from reconciler.observe.model import JobSet
from reconciler.pipeline import Change, Solver, change, check
from reconciler.plan.types import Cost, Placement, Plan
from reconciler.plan.units import stays

from builders import resolved_pool, with_files

TPU_JOB = ("name: {name}\nteam: vision\noptions:\n  - {{accelerator: tpu-v5p, topology: 4x4x4}}\n"
           "checkpoint_minutes: 30\nimage: img:1\n")
GPU_JOB = ("name: {name}\nteam: vision\noptions:\n  - {{accelerator: nvidia-h100-80gb, count: 8}}\n"
           "checkpoint_minutes: 30\nimage: img:1\n")


def jobs(template: str, names: list[str]) -> dict[str, str | None]:
    return {"jobs/vision/train.yaml": None, **{f"jobs/vision/{n}.yaml": template.format(name=n) for n in names}}


def finished_j0(template: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(base, head): four one-unit jobs, then j0's file removed (it finished); nothing else changes."""
    return with_files(jobs(template, ["j0", "j1", "j2", "j3"])), with_files(jobs(template, ["j1", "j2", "j3"]))


def changed(base: dict[str, bytes], head: dict[str, bytes], solver: Solver = "greedy") -> Change:
    catalog = load_catalog()
    return change(check(head, catalog), check(base, catalog), solver=solver)


def placements(c: Change, side: str) -> dict[str, dict[str, object]]:
    plan = c.head.plan if side == "head" else c.base.plan if c.base else None
    assert plan is not None
    return {p["job"]: p for p in json.loads(plan.to_json())["placements"]}


def test_the_rule_gpu_nodes_are_interchangeable_tpu_slices_and_shapes_are_not() -> None:
    a = Placement("vision/a", "c", "h100", 0, (3,), 8, "new", 1.0)
    assert stays(a, Placement("vision/a", "c", "h100", 0, (0,), 8, "kept", 1.0), True)
    assert not stays(a, Placement("vision/a", "c", "h100", 0, (0,), 8, "kept", 1.0), False)   # a TPU slice
    assert stays(a, a, False)
    assert not stays(a, Placement("vision/a", "c", "h100", 1, (0,), 8, "kept", 1.0), True)     # another option
    assert not stays(a, Placement("vision/a", "c", "h100", 0, (0,), 4, "kept", 1.0), True)     # another shape
    assert not stays(a, Placement("vision/a", "c", "h100", 0, (0, 1), 8, "kept", 1.0), True)
    assert not stays(a, Placement("vision/a", "c", "h200", 0, (3,), 8, "kept", 1.0), True)     # another pool
    assert not stays(a, Placement("vision/a", "d", "h100", 0, (3,), 8, "kept", 1.0), True)


@pytest.mark.parametrize("solver", ["greedy", "exact"])
def test_removing_a_finished_job_moves_no_gpu_job_though_the_nodes_are_renumbered(solver: Solver) -> None:
    c = changed(*finished_j0(GPU_JOB), solver=solver)
    before, after = placements(c, "base"), placements(c, "head")
    assert {p["pool"] for p in after.values()} == {"h100-owned"}
    assert [before[j]["units"] for j in sorted(after)] == [[1], [2], [3]]
    assert [after[j]["units"] for j in sorted(after)] == [[0], [1], [2]]        # renumbered 0..k-1
    assert {j: p["status"] for j, p in after.items()} == {"vision/j1": "kept", "vision/j2": "kept",
                                                          "vision/j3": "kept"}
    assert c.diff is not None
    # planned from git alone, the base's placement of j0 is running work: its removed file stops it (with
    # `--observed`, a finished j0 is planned on neither side)
    assert [(x.job, x.change) for x in c.diff.jobs] == [("vision/j0", "stop")]


def test_a_tpu_job_on_another_slice_still_moves() -> None:
    """The exact solver re-plans from scratch and numbers the used slices 0..k-1: a slice is a place, so the
    jobs it gives other slices moved, in the plan JSON and in the diff."""
    c = changed(*finished_j0(TPU_JOB), solver="exact")
    before, after = placements(c, "base"), placements(c, "head")
    assert {p["pool"] for p in after.values()} == {"v5p-4x4x4"}
    other = sorted(j for j in after if after[j]["units"] != before[j]["units"])
    assert other
    assert all(after[j]["status"] == "moved" for j in other)
    assert all(after[j]["status"] == "kept" for j in after if j not in other)
    assert c.diff is not None
    assert sorted(x.job for x in c.diff.jobs if x.change == "move") == other


@pytest.fixture(scope="module")
def gpu_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository: four GPU jobs on onprem-sjc's four nodes, then "j0 finished" (its file removed)."""
    repo = tmp_path_factory.mktemp("units")
    git(repo, "init", "-q", "-b", "main")
    base, head = finished_j0(GPU_JOB)
    commit(repo, dict(base), "four jobs")
    (repo / "jobs/vision/j0.yaml").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "j0 finished")
    assert {p: (repo / p).read_bytes() for p in head} == head and len(base) == len(head) + 1
    return repo


def test_the_pull_request_comment_says_no_job_moves(gpu_repo: Path) -> None:
    r = fleet("cost", "--base", "HEAD~1", cwd=gpu_repo)
    assert r.returncode == 0, r.stderr
    # no "Moves 3 running jobs"; j0, which the base places, stops with its file (from git alone, it may have
    # finished: its reason says so)
    assert r.stdout.startswith("## Removes the file of 1 placed job (1 research), stopped unless already finished: "
                               "up to 4 accelerator-hours of work lost; run-rate unchanged\n"), r.stdout
    assert " moves " not in r.stdout.splitlines()[0] and "| research | vision/j0 | – |" in r.stdout
    r = fleet("plan", "--base", "HEAD~1", "--format", "json", cwd=gpu_repo)
    assert r.returncode == 0, r.stderr
    assert {p["status"] for p in json.loads(r.stdout)["placements"]} == {"kept"}
    r = fleet("plan", "--base", "HEAD~1", cwd=gpu_repo)
    assert r.returncode == 0, r.stderr
    assert "Moves" not in r.stdout and ("**Removes the file of 1 placed job (1 research), stopped unless already "
                                        "finished: up to 4 accelerator-hours of work lost; run-rate unchanged**") \
        in r.stdout


def test_apply_judges_a_place_in_its_pool_by_the_same_rule() -> None:
    """`fleet apply` compares each running JobSet's recorded units with the plan's: other node numbers of a
    GPU pool are no move, other slices of a TPU pool are; a JobSet without (or with an empty) annotation is
    not judged."""
    gpu = resolved_pool("h100", cluster="c1")
    tpu = replace(resolved_pool("v5p", cluster="c1", unit=64, accelerator="tpu-v5p"), kind="tpu", shape="4x4x4")
    plan = Plan((Placement("vision/g", "c1", "h100", 0, (0,), 8, "kept", 1.0),
                 Placement("vision/t", "c1", "v5p", 0, (0,), 64, "kept", 1.0),
                 Placement("vision/u", "c1", "v5p", 0, (1,), 64, "kept", 1.0),
                 Placement("vision/e", "c1", "v5p", 0, (2,), 64, "kept", 1.0)), (), (), (), (), Cost(0.0, 0.0, 0.0))

    def running(job: str, pool: str, units: tuple[int, ...] | None) -> JobSet:
        return JobSet(namespace="vision", name=job, team="vision", job=job, pool=pool, units=units)

    live = {"c1": [running("g", "h100", (3,)), running("t", "v5p", (3,)), running("u", "v5p", None),
                   running("e", "v5p", ())]}
    assert safety.moves_within(plan, live, {"c1/h100": gpu, "c1/v5p": tpu}) == {
        ("c1", "vision/t"): "moved to slice(s) 0 of c1/v5p by the plan (it runs on slice(s) 3)"}
    [d] = safety.disruptions(plan, {"vision/g", "vision/t", "vision/u", "vision/e"}, live,
                             pools={"c1/h100": gpu, "c1/v5p": tpu})
    assert (d.job, d.what, d.target) == ("vision/t", "move", "c1/v5p")


def test_apply_re_creates_a_gang_moved_onto_its_own_units_only_when_it_runs_an_earlier_spec() -> None:
    """A job the plan moves onto the units it runs on ("the job's shape changed") is re-created there only when
    its JobSet runs an earlier spec of its file (`fleet.dev/spec-digest`), as the loop restarts it; one running
    the file's spec, one the plan keeps, and one whose digest is not known are not judged (no write)."""
    gpu = resolved_pool("h100", cluster="c1")
    shape = "the job's shape changed"
    plan = Plan((Placement("vision/r", "c1", "h100", 0, (0,), 4, "moved", 1.0, shape),
                 Placement("vision/s", "c1", "h100", 0, (1,), 4, "moved", 1.0, shape),
                 Placement("vision/k", "c1", "h100", 0, (2,), 8, "kept", 1.0),
                 Placement("vision/n", "c1", "h100", 0, (3,), 4, "moved", 1.0, shape)),
                (), (), (), (), Cost(0.0, 0.0, 0.0))

    def running(job: str, units: tuple[int, ...], digest: str | None) -> JobSet:
        return JobSet(namespace="vision", name=job, team="vision", job=job, pool="h100", units=units,
                      spec_digest=digest)

    live = {"c1": [running("r", (0,), "old"), running("s", (1,), "now"), running("k", (2,), "old"),
                   running("n", (3,), None)]}
    digests = {f"vision/{j}": "now" for j in "rskn"}
    assert safety.moves_within(plan, live, {"c1/h100": gpu}, digests) == {
        ("c1", "vision/r"): "moved by the plan: the job's shape changed (re-created on unit(s) 0 of c1/h100, where "
                            "it runs an earlier spec of its file)"}
    [d] = safety.disruptions(plan, set(digests), live, pools={"c1/h100": gpu}, digests=digests)
    assert (d.job, d.what, d.target) == ("vision/r", "move", "c1/h100")
    assert safety.moves_within(plan, live, {"c1/h100": gpu}) == {}        # no file digests: nothing judged
