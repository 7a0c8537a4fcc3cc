"""Review of a change to robots (robots/plan.py): `fleet plan` and `fleet cost` lead with which robots get which
model in which wave, the bytes to each site and the time on its link."""

from __future__ import annotations

import json

from test_robots_validate import D1, ROBOTS, deployment

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.report import cost_json, cost_markdown
from reconciler.validate import Validated

from builders import with_files

D3 = "sha256:" + "3" * 64


def v(dep: str | None) -> Validated:
    got = pipeline.check(with_files({"robots/aloha-sf.yaml": ROBOTS, "deployments/pi05-towel.yaml": dep}),
                         load_catalog())
    assert got.ok, got.errors
    return got


def test_a_new_deployment_leads_the_plan_and_the_cost_comment() -> None:
    c = pipeline.change(v(deployment()), v(None))
    md = pipeline.plan_markdown(c)
    assert "## Change against the base\n\n### Robots: 3 robot(s) in 1 site(s) touched\n" in md
    row = next(line for line in md.splitlines() if line.startswith("| aloha-sf/pi05-towel"))
    assert row == (f"| aloha-sf/pi05-towel | adds | pi05@{D1[:19]} | vision/train | canary: aloha-01 (1, soak 30 min); "
                   "rest: aloha-02, aloha-03 (2) | 36.0 GB | 1.6 h at 50 Mbit/s |")
    report = pipeline.cost_report(c, "work tree", "main")
    assert cost_markdown(report).startswith("### Robots: 3 robot(s)")
    (doc,) = json.loads(cost_json(report))["robots"]
    assert doc["bytes"] == 36_000_000_000 and doc["waves"][1]["robots"] == ["aloha-02", "aloha-03"]


def test_a_new_model_names_the_old_one_and_an_unchanged_deployment_is_not_shown() -> None:
    new = deployment(model=f'model: {{artifact: "127.0.0.1:5000/models/pi05@{D3}", size_gb: 12, '
                           'from_job: vision/train}\n')
    md = pipeline.plan_markdown(pipeline.change(v(new), v(deployment())))
    assert f"changes the model of | pi05@{D3[:19]} (was pi05@{D1[:19]})" in md
    assert "Robots" not in pipeline.plan_markdown(pipeline.change(v(deployment()), v(deployment())))
    gone = pipeline.plan_markdown(pipeline.change(v(None), v(deployment())))
    assert "## Change against the base\n\n### Robots: 3 robot(s)" in gone
    assert "| aloha-sf/pi05-towel | removes |" in gone


def test_the_docs_show_the_real_review_of_the_example() -> None:
    """docs/robots.md's review table is the example deployment's, against the example without it."""
    from pathlib import Path

    from reconciler import sources
    from reconciler.load import load
    from reconciler.robots.plan import robot_changes, robots_markdown

    root = Path(__file__).resolve().parents[1]
    files = sources.read_worktree(root)
    base = {k: v for k, v in files.items() if not k.startswith("deployments/")}
    shown = (root / "docs/robots.md").read_text().split("```text\n", 1)[1].split("```", 1)[0]
    assert shown == robots_markdown(robot_changes(load(files), load(base))).rstrip("\n") + "\n"


def test_without_a_base_there_is_no_change_to_review() -> None:
    c = pipeline.change(v(deployment()))
    assert c.robots == () and "Robots" not in pipeline.plan_markdown(c)
