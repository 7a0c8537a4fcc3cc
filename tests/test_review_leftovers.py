"""Leftovers of the review path (the plan diff, `fleet explain --base`, the plan JSON's `review`, the Markdown
tables, the JSON Schema). Each test failed before its mend; the docstring says what it did then."""

from __future__ import annotations

import json
import re
import types
import typing
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from test_cost import commit, fleet, git
from test_live import observed, snapshot, stamped
from test_report import side

from reconciler.catalog import load_catalog
from reconciler.diff import diff_plans
from reconciler.impact import impact
from reconciler.pipeline import Change, change, check, cost_report, plan_markdown
from reconciler.plan.markdown import to_markdown
from reconciler.plan.types import Preemption
from reconciler.report import cost_dict, cost_markdown, diff_markdown
from reconciler.schema import DOCUMENTS, schemas

from builders import base_files, job, with_files

CAT = load_catalog()

# a lang job the base leaves waiting: 256 chips over lang's nominal 128, the cohort lends 64
WAITING = "name: big\nteam: lang\noptions:\n  - {accelerator: tpu-v5p, topology: 4x4x4, slices: 4}\nimage: img:1\n"


# planned from git alone, whether vision/a still runs is not known: the reason says so
GONE = ("its file jobs/vision/a.yaml was removed: the change stops it unless it already finished (planned from git "
        "alone: `--observed` tells)")


WITHDRAWN = ("its file jobs/lang/big.yaml was removed while the base plan left it waiting: the change withdraws it "
             "(planned from git alone: `--observed` tells whether it runs)")


def changed(base: dict[str, str | bytes | None], head: dict[str, str | bytes | None]) -> Change:
    b, h = check(with_files(base), CAT), check(with_files(head), CAT)
    assert b.ok and h.ok, (b.errors, h.errors)
    return change(h, b)


def test_removing_a_running_jobs_file_reads_as_a_stop_not_a_finish() -> None:
    """The base places vision/a (running work, impact.py); the change removes its file, so `fleet apply` deletes
    its JobSet. The diff said `finish` ("the job file was removed"), as if the job had finished, and the review's
    disruption (the headline, the table, the work lost) did not count it. A job the base left waiting whose
    file goes is withdrawn (test_removing_a_waiting_jobs_file_reads_as_a_withdrawal_not_a_finish)."""
    c = changed({"jobs/vision/a.yaml": job("a", count=8, body="checkpoint_minutes: 30\n"),
                 "jobs/lang/big.yaml": WAITING},
                {"jobs/vision/a.yaml": None, "jobs/lang/big.yaml": None})
    assert c.diff is not None and c.base is not None
    assert [(j.job, j.change, j.before, j.after, j.detail) for j in c.diff.jobs] == [
        ("vision/a", "stop", "onprem-sjc/h100-owned", "", GONE),
        ("lang/big", "withdraw", "pending", "", WITHDRAWN)]
    i = impact(c.head, c.base, c.diff)
    assert [(d.job, d.change, d.accelerators, d.lost_accelerator_hours, d.why) for d in i.disrupted] == [
        ("vision/a", "stops", 8, 4.0, GONE)]
    md = plan_markdown(c)
    assert f"| stops | onprem-sjc/h100-owned | – | 8 | 30 min | 4.0 | {GONE} |" in md, md
    assert ("**Removes the file of 1 placed job (1 research), stopped unless already finished: up to 4 "
            "accelerator-hours of work lost") in md, md
    assert "| stopped | vision/a | onprem-sjc/h100-owned | – |" in md and "| finish | vision/a" not in md, md
    assert "1 stopped · 0 wait · 1 withdrawn" in md
    doc = cost_dict(cost_report(c, "work tree", "main"))
    assert [(d["job"], d["change"]) for d in doc["impact"]["disrupted"]] == [("vision/a", "stops")]
    assert "Removes the file of 1 placed job" in cost_markdown(cost_report(c, "work tree", "main"))


def test_from_what_runs_the_running_job_stops_and_the_finished_one_is_no_change() -> None:
    """With `--observed`, vision/a runs and vision/b has succeeded; the change removes both files. vision/a's
    JobSet is deleted by the change: it read `finish`; vision/b's run had ended, so neither side plans it and
    the diff says nothing of it (before and after the mend)."""
    files: dict[str, str | bytes | None] = {"jobs/vision/a.yaml": job("a", count=8),
                                            "jobs/vision/b.yaml": job("b", count=8), "jobs/vision/train.yaml": None}
    b = check(with_files(files), CAT)
    h = check(with_files({**files, "jobs/vision/a.yaml": None, "jobs/vision/b.yaml": None}), CAT)
    assert b.ok and h.ok, (b.errors, h.errors)
    gpu = {"units": (0,), "accel": "gpu", "per_pod": 8}
    snap = snapshot(60, observed("onprem-sjc", [*stamped(b, "vision/a", "h100-owned", "running", **gpu),
                                                *stamped(b, "vision/b", "h100-owned", "succeeded", **gpu)]))
    c = change(h, b, observed=snap)
    assert c.diff is not None and c.base is not None and c.base.plan.live is not None
    assert c.base.plan.live.finished == ("vision/b",)
    assert [(j.job, j.change, j.detail) for j in c.diff.jobs] == [
        ("vision/a", "stop", "its file jobs/vision/a.yaml was removed while it runs: the change stops it")]
    assert "**Stops 1 running job (1 research)" in plan_markdown(c)   # observed running: no hedge


def test_removing_a_waiting_jobs_file_reads_as_a_withdrawal_not_a_finish() -> None:
    """lang/big waits in the base (over its quota); the change removes its file. The diff said `finish` ("its file
    ... was removed"), and the review's counts "1 finish", of a job that never ran: it is withdrawn. Nothing of it
    runs, so nothing is disrupted. From what runs, the reason says it does not run, without the git-alone hedge."""
    c = changed({"jobs/lang/big.yaml": WAITING}, {"jobs/lang/big.yaml": None})
    assert c.diff is not None and c.base is not None
    assert [(j.job, j.change, j.before, j.after, j.detail) for j in c.diff.jobs] == [
        ("lang/big", "withdraw", "pending", "", WITHDRAWN)]
    assert impact(c.head, c.base, c.diff).disrupted == ()
    md = plan_markdown(c)
    assert "| withdrawn | lang/big | pending | – |" in md and "finish" not in md, md
    assert "0 wait · 1 withdrawn" in md, md
    files: dict[str, str | bytes | None] = {"jobs/lang/big.yaml": WAITING, "jobs/vision/train.yaml": None}
    b = check(with_files(files), CAT)
    h = check(with_files({**files, "jobs/lang/big.yaml": None}), CAT)
    assert b.ok and h.ok, (b.errors, h.errors)
    live = change(h, b, observed=snapshot(60, observed("onprem-sjc", [])))
    assert live.diff is not None
    assert [(j.job, j.change, j.detail) for j in live.diff.jobs] == [
        ("lang/big", "withdraw", "its file jobs/lang/big.yaml was removed while it waited: the change withdraws it "
                     "(it does not run)")]


def table_rows(md: str) -> list[list[str]]:
    """Each Markdown table row's cells, split at the unescaped `|` only (as GitHub splits them)."""
    return [re.split(r"(?<!\\)\|", line)[1:-1] for line in md.splitlines() if line.startswith("|")]


def test_plan_markdown_escapes_a_pipe_in_every_table_cell() -> None:
    """`fleet plan --format md` joined its cells raw: a pending reason, a preemption's reason or a kept job's
    reason holding `|` split its cell, and the row had more columns than its header (the PR comment's tables,
    `report.fmt.cell`, already escaped it; the change section that `fleet plan --base` embeds is checked too)."""
    base = side(range(0, 4), range(0, 0), 1, 2)
    head = side(range(0, 3), range(0, 2), 1, 2, reason="quota a|b: 8 chips more | needed\nsecond line")
    pinned = replace(head.plan.placements[0], status="kept", reason="stays: no room | elsewhere")
    plan = replace(head.plan, placements=(pinned, *head.plan.placements[1:]),
                   preemptions=(Preemption("team-001/job-00001", "team-000/job-00000", "lower | priority"),))
    summary = diff_markdown(diff_plans(base, head), (), impact(replace(head, plan=plan), base, diff_plans(base, head)))
    md = to_markdown(plan, summary)
    rows = table_rows(md)
    tables, width = 0, 0
    for cells, below in zip(rows, [*rows[1:], []], strict=True):
        if below and all(set(c.strip()) <= set("-:") for c in below):
            tables, width = tables + 1, len(cells)     # a header: its separator row is below it
        assert len(cells) == width, (cells, md)
    assert tables >= 6
    assert "quota a\\|b: 8 chips more \\| needed<br>second line" in md
    assert "| kept: stays: no room \\| elsewhere |" in md and "| lower \\| priority |" in md


def broken_base(tmp_path: Path) -> Path:
    """A repository whose first commit does not validate (an unknown field at jobs/vision/bad.yaml:6:1) and
    whose second, HEAD, repairs it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, {**base_files(), "jobs/vision/bad.yaml": job("bad") + "colour: red\n"}, "broken")
    (repo / "jobs/vision/bad.yaml").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "repair")
    return repo


FIRST_ERROR = "jobs/vision/bad.yaml:6:1: unknown field `colour`"


def test_explain_with_a_base_that_does_not_validate_explains_the_head_and_says_why(tmp_path: Path) -> None:
    """`fleet plan --base` plans the work tree on its own when the base does not validate (the change that
    repairs it must not be blocked); `fleet explain JOB --base` stopped instead: "the base revision HEAD~1 has
    validation errors" (exit 1), and the job was not explained."""
    repo = broken_base(tmp_path)
    r = fleet("explain", "vision/train", "--base", "HEAD~1", cwd=repo)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert f"the base revision HEAD~1 does not validate (its first error: {FIRST_ERROR})" in first, first
    assert "planned on its own, as `fleet plan --base HEAD~1` plans it" in first
    assert "# vision/train" in r.stdout and "**placed** on onprem-sjc/h100-owned" in r.stdout
    # stderr as `fleet plan --base` writes it: every base error prefixed with the revision, then the warning
    plan = fleet("plan", "--base", "HEAD~1", cwd=repo)
    assert plan.returncode == 0 and r.stderr == plan.stderr, (r.stderr, plan.stderr)
    assert f"HEAD~1: {FIRST_ERROR.replace(': unknown', ': error: unknown')}" in r.stderr
    doc = json.loads(fleet("explain", "vision/train", "--base", "HEAD~1", "--format", "json", cwd=repo).stdout)
    assert FIRST_ERROR in doc["planned_from"] and doc["job"] == "vision/train"


def test_plan_json_names_no_base_when_the_base_did_not_validate(tmp_path: Path) -> None:
    """The plan JSON's `review.base` named the broken base's commit although no base plan was used (no
    stickiness, no diff): the saved plan claimed to be planned against it. It is null then; a valid base is
    still named."""
    repo = broken_base(tmp_path)
    head = git(repo, "rev-parse", "HEAD").strip()
    r = fleet("plan", "--base", "HEAD~1", "--format", "json", "--pr", "7", cwd=repo)
    assert r.returncode == 0 and "does not validate" in r.stderr, r.stderr
    assert json.loads(r.stdout)["review"] == {"base": None, "head": head, "pr": 7}
    commit(repo, {"jobs/vision/b.yaml": job("b")}, "one more job")
    r = fleet("plan", "--base", "HEAD~1", "--format", "json", cwd=repo)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json.loads(r.stdout)["review"] == {"base": head, "head": git(repo, "rev-parse", "HEAD").strip(),
                                              "pr": None}


def _types(node: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """Every JSON type a schema node allows ($ref followed, anyOf/oneOf branches united)."""
    while "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
    t = node.get("type", [])
    out = set(t if isinstance(t, list) else [t])
    for branch in (*node.get("anyOf", ()), *node.get("oneOf", ())):
        out |= _types(branch, root)
    return out


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _int_fields(ann: Any, node: dict[str, Any], root: dict[str, Any], path: str) -> list[tuple[str, set[str]]]:
    """(path, the schema's types) of every `int` the annotation holds: fields, list items, dict values,
    optional and union branches, nested models, walked beside the schema node that describes them."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return _int_fields(args[0], node, root, path)
    if ann is int:
        return [(path, _types(node, root))]
    node = _resolve(node, root)
    branches = [_resolve(b, root) for b in node.get("anyOf", [node])]
    if origin in (typing.Union, types.UnionType):
        found = []
        for a in (a for a in args if a is not type(None)):
            core = typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a
            found += [(path, _types(node, root))] if core is int else \
                [f for b in branches for f in _int_fields(a, b, root, path)]   # the branch that can hold it
        return found
    if origin in (list, tuple, frozenset, set) and args:
        return [f for b in branches if "items" in b for f in _int_fields(args[0], b["items"], root, path + "[]")]
    if origin is dict and len(args) == 2:
        return [f for b in branches if isinstance(b.get("additionalProperties"), dict)
                for f in _int_fields(args[1], b["additionalProperties"], root, path + "{}")]
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        if not {f.alias or n for n, f in ann.model_fields.items()} <= set(node.get("properties", ())):
            return []                                  # another branch of a union
        return [f for name, field in ann.model_fields.items()
                for f in _int_fields(field.annotation, node["properties"][field.alias or name], root,
                                     f"{path}.{field.alias or name}")]
    return []


def test_every_integer_field_of_the_models_is_an_integer_in_the_schema() -> None:
    """Not a defect found: `replicas: 2.0` is refused by the loader ("must be a whole number") and the schema
    already says `"type": "integer"` for replicas and for every other integer field (this walk, 60 fields,
    passed before too). A JSON Schema validator accepts 2.0 all the same: JSON Schema's `integer` is any number
    with a zero fractional part (2020-12 validation, section 6.1.1), and YAML editors read 2.0 as the number 2,
    so no schema can tell 2.0 from 2; the loader is the check. This walk keeps the schema from drifting to
    `number` (or to no type) for a field the loader reads as a whole number."""
    found: list[tuple[str, set[str]]] = []
    for kind, model in DOCUMENTS.items():
        root = json.loads(schemas()[f"{kind}.schema.json"])
        found += _int_fields(model, root, root, kind)
    wrong = [(path, t) for path, t in found if "integer" not in t or "number" in t]
    assert wrong == [], wrong
    paths = {path for path, _ in found}
    assert len(paths) >= 60 and {"job.replicas", "cluster.pools[].max", "teams.teams[].quota{}.nominal"} <= paths, \
        sorted(paths)


def test_removing_the_file_of_a_running_job_the_base_preempts_does_not_say_it_does_not_run() -> None:
    """From what runs, the base plan preempts vision/b (running) for vision/h; the change removes b's file. The
    diff read `withdraw` "while it waited ... (it does not run)": b runs, observed. It still reads `withdraw`
    (the base plan stops it already, so the change disrupts nothing more), and its reason says it runs."""
    from reconciler.pipeline import change as live_change

    teams = with_files({})["policies/teams.yaml"].decode().replace(
        "nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 64, borrowing_limit: 0}")
    prio = with_files({})["policies/priorities.yaml"].decode().replace(
        "preemption:\n", "preemption:\n  checkpoint_window_minutes: 0\n")
    ckpt = "checkpoint_minutes: 30\n"
    files: dict[str, str | bytes | None] = {
        "policies/teams.yaml": teams, "policies/priorities.yaml": prio, "jobs/vision/train.yaml": None,
        "jobs/vision/a.yaml": job("a", count=32, body=ckpt), "jobs/vision/b.yaml": job("b", count=32, body=ckpt),
        "jobs/vision/h.yaml": job("h", count=8, body="priority: production\n")}
    b, h = check(with_files(files), CAT), check(with_files({**files, "jobs/vision/b.yaml": None}), CAT)
    assert b.ok and h.ok, (b.errors, h.errors)
    gpu = {"accel": "gpu", "per_pod": 8}
    objs = [*stamped(b, "vision/a", "h100", "running", units=(0, 1, 2, 3), admitted=29, **gpu),
            *stamped(b, "vision/b", "h100", "running", units=(4, 5, 6, 7), admitted=27, **gpu)]
    c = live_change(h, b, observed=snapshot(60, observed("gke-usc1", objs)))
    assert c.base is not None and c.diff is not None
    assert [p.job for p in c.base.plan.preemptions] == ["vision/b"]
    (got,) = [j for j in c.diff.jobs if j.job == "vision/b"]
    assert (got.change, got.before, got.after) == ("withdraw", "pending", ""), got
    assert "it does not run" not in got.detail, got.detail
    assert got.detail == ("its file jobs/vision/b.yaml was removed while it runs, which the base plan preempts: the "
                          "change withdraws it (it stops either way)"), got.detail
