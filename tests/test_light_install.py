"""The light install (issue 25): the read-only commands run without Pulumi's SDKs and OR-Tools, the commands that
need them say which extra to install (exit 2), and the locks say the same as pyproject.toml."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pulumi", "pulumi_gcp", "pulumi_aws", "pulumi_kubernetes", "ortools")
BLOCK = "import sys\nfor m in {heavy!r}: sys.modules[m] = None   # as if not installed: importing it fails\n"


def fleet_without_extras(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`fleet ARGS` in a fresh interpreter where the extras' modules cannot be imported."""
    code = BLOCK.format(heavy=HEAVY) + f"from reconciler.cli import main\nmain({args!r})\n"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "FLEET_NOW": "2026-11-23T08:00:00+00:00",
                               "KUBECONFIG": str(cwd / "no-kubeconfig"), "PYTHONPATH": str(ROOT)})


def test_the_researchers_commands_run_without_the_extras(tmp_path: Path) -> None:
    """One interpreter, every light command: none imports Pulumi or OR-Tools."""
    code = BLOCK.format(heavy=HEAVY) + """
from click.testing import CliRunner
from reconciler.cli import cli
for args in (["validate"], ["plan"], ["explain", "rl/selfplay-v5p"], ["cost"], ["render", "--out", OUT],
             ["submit", "rl/probe", "--image", "img:1", "--accelerator", "nvidia-h100-80gb", "--count", "8",
              "--no-git", "--repo", REPO], ["status", "rl/selfplay-v5p"], ["logs", "rl/selfplay-v5p"]):
    r = CliRunner().invoke(cli, args)
    assert not isinstance(r.exception, ImportError), (args, r.exception)
    print(args[0], r.exit_code, type(r.exception).__name__)
assert not set(sys.modules) & set(HEAVY) - {m for m, v in sys.modules.items() if v is None}
"""
    repo = tmp_path / "repo"
    for d in ("fleet", "policies", "jobs"):
        shutil.copytree(ROOT / d, repo / d)
    code = f"OUT = {str(tmp_path / 'out')!r}\nREPO = {str(repo)!r}\nHEAVY = {HEAVY!r}\n" + code
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "FLEET_NOW": "2026-11-23T08:00:00+00:00",
                            "KUBECONFIG": str(tmp_path / "none"), "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr
    exits = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    ok = "0 NoneType"
    assert exits == {"validate": ok, "plan": ok, "explain": ok, "cost": ok, "render": ok, "submit": ok,
                     "status": "1 UsageError",      # no cluster could be read (main exits 2): said, not crashed
                     "logs": "1 UsageError"}        # likewise


@pytest.mark.parametrize(("args", "extra"), [(["apply", "--yes"], "apply"),
                                             (["plan", "--solver", "exact"], "exact")])
def test_a_command_that_needs_a_missing_extra_says_which_to_install(args: list[str], extra: str) -> None:
    r = fleet_without_extras(args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    first, hint = r.stderr.splitlines()[:2]
    assert first.startswith("error: ") and f"needs the `{extra}` extra" in first and "is not installed" in first
    assert f"pip install -e '.[{extra}]'" in hint


def _names(deps: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}


def _lock(name: str) -> set[str]:
    text = (ROOT / "requirements" / name).read_text()
    return {m.group(1).lower().replace("_", "-") for m in re.finditer(r"^([A-Za-z0-9._-]+)==", text, re.M)}


def test_the_light_install_and_its_lock_carry_no_cloud_sdk_or_solver() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    heavy = {"pulumi", "pulumi-gcp", "pulumi-aws", "pulumi-kubernetes", "ortools"}
    assert not _names(project["dependencies"]) & heavy
    assert _names(project["optional-dependencies"]["apply"]) | _names(project["optional-dependencies"]["exact"]) \
        == heavy
    assert heavy <= _names(project["optional-dependencies"]["dev"])
    assert not _lock("fleet.txt") & heavy
    assert heavy - {"ortools"} <= _lock("apply.txt") and "ortools" not in _lock("apply.txt")
    assert heavy <= _lock("dev.txt")
