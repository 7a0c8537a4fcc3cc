"""Lint, types and architecture rules run with the tests, so CI enforces them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from reconciler.models import Job, Pool

ROOT = Path(__file__).resolve().parents[1]
PURE_STAGES = ("plan/", "render/", "cost/", "report/", "load.py", "validate.py", "validate_jobs.py", "diff.py",
               "pipeline.py")
"""The pipeline's stages (DESIGN.md section 5): every module of them is pure, none may declare effects."""


def _declares_effects(path: Path) -> bool:
    return "EFFECT (" in (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")


PURE = sorted(p.relative_to(ROOT / "reconciler").as_posix() for p in (ROOT / "reconciler").rglob("*.py")
              if not _declares_effects(p))
EFFECTFUL_IMPORTS = {"git", "pulumi", "subprocess", "os", "click"}


def test_ruff() -> None:
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy() -> None:
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_module_of_the_pure_stages_is_checked() -> None:
    """The pure list is derived: a module is pure unless its docstring declares `EFFECT (what)`, as the edges
    (sources, cli, apply's engine, ...) do, and no module of a pure stage may declare any."""
    stages = [m for m in PURE if m.startswith(PURE_STAGES)]
    everything = [p.relative_to(ROOT / "reconciler").as_posix() for p in (ROOT / "reconciler").rglob("*.py")]
    assert sorted(m for m in everything if m.startswith(PURE_STAGES)) == sorted(stages)
    assert {"plan/exact.py", "plan/planner.py", "render/kueue.py", "cost/model.py", "pipeline.py"} <= set(stages)


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_have_no_effects(module: str) -> None:
    """Habit 7: git, Pulumi, the environment and the terminal are reached only from the edge modules."""
    tree = ast.parse((ROOT / "reconciler" / module).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & EFFECTFUL_IMPORTS, f"{module} imports {imported & EFFECTFUL_IMPORTS}"


def test_modules_stay_small() -> None:
    for path in (ROOT / "reconciler").rglob("*.py"):
        assert len(path.read_text().splitlines()) <= 500, f"{path} is over 500 lines: split it"


def test_models_are_frozen_and_strict() -> None:
    pool = Pool(name="a", accelerator="tpu-v5p", topology="4x4x4", max=1)
    with pytest.raises(ValidationError):
        pool.max = 2  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs"):
        Pool.model_validate({"name": "a", "accelerator": "x", "max": 1, "colour": "red"})
    with pytest.raises(ValidationError):
        Pool.model_validate({"name": "a", "accelerator": "x", "max": True})  # booleans are not counts
    with pytest.raises(ValidationError):
        Job.model_validate({"name": "-bad-", "team": "t", "options": [{"accelerator": "x", "count": 1}],
                            "image": "i"})
    assert Job.model_validate({"name": "a" * 63, "team": "t", "options": [{"accelerator": "x", "count": 1}],
                               "image": "i"}).id == "t/" + "a" * 63
