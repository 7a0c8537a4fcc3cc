"""The pipeline as a library (reconciler/pipeline.py): the commands call its stages, each side once."""

from __future__ import annotations

import ast
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import reconciler.cost.model
import reconciler.plan
from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.cli import cli

from builders import base_files, with_files

ROOT = Path(__file__).resolve().parents[1]
JOB = "name: extra\nteam: vision\noptions:\n  - {accelerator: nvidia-h100-80gb, count: 8}\nimage: img:1\n"


def committed_repo(tmp_path: Path) -> Path:
    """A repository whose HEAD is the builders' fleet; the work tree adds one job."""
    for rel, content in base_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=tmp_path, check=True)
    (tmp_path / "jobs/vision/extra.yaml").write_text(JOB)
    return tmp_path


def test_with_a_base_each_side_is_planned_and_priced_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`plan --base` priced the base twice (once for the budgets, once for the diff)."""
    repo = committed_repo(tmp_path)
    calls: Counter[str] = Counter()
    real_plan, real_price = reconciler.plan.plan, reconciler.cost.model.price

    def counting_plan(*args: Any, **kw: Any) -> Any:
        calls["plan"] += 1
        return real_plan(*args, **kw)

    def counting_price(*args: Any, **kw: Any) -> Any:
        calls["price"] += 1
        return real_price(*args, **kw)

    monkeypatch.setattr(reconciler.plan, "plan", counting_plan)
    monkeypatch.setattr(reconciler.cost.model, "price", counting_price)
    r = CliRunner().invoke(cli, ["plan", "--repo", str(repo), "--base", "HEAD"])
    assert r.exit_code == 0, r.output
    assert "vision/extra" in r.output
    assert calls == {"plan": 2, "price": 2}


def test_change_compares_the_head_with_its_base() -> None:
    """The library call behind `plan --base` and `cost --base`: the new job starts, the budgets are checked."""
    catalog = load_catalog()
    base, head = pipeline.check(base_files(), catalog), pipeline.check(with_files({"jobs/vision/extra.yaml": JOB}),
                                                                       catalog)
    c = pipeline.change(head, base)
    assert c.base is not None and c.diff is not None
    assert [(j.job, j.change) for j in c.diff.jobs] == [("vision/extra", "start")]
    assert c.budget_violations == pipeline.budget_check(c.head, c.base)
    alone = pipeline.change(head)
    assert (alone.base, alone.diff) == (None, None)
    assert alone.head.plan.to_json() == pipeline.plan(head).to_json()


def test_the_cli_reaches_the_stages_only_through_the_pipeline() -> None:
    """cli.py parses, calls the pipeline, prints and picks the exit code: it imports no stage module itself."""
    stages = ("plan", "cost", "diff", "render", "load", "validate_jobs")
    tree = ast.parse((ROOT / "reconciler" / "cli.py").read_text(encoding="utf-8"))
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
    assert {m for m in imported if m.split(".")[0] in stages} == set()
