"""The `fleet` command: output formats, exit codes, no tracebacks, schema export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.output import github
from reconciler.problems import Problem
from reconciler.schema import schemas

from builders import JOB, base_files, with_files

ROOT = Path(__file__).resolve().parents[1]


def tree(tmp_path: Path, files: dict[str, bytes]) -> Path:
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    return tmp_path


def fleet(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real console script (in-process runs can't catch what main() does)."""
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, check=False)


def test_text_format_ok(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["validate", "--repo", str(tree(tmp_path, base_files()))])
    assert (r.exit_code, r.output) == (0, "ok: no problems found\n")


def test_text_format_error_has_location_and_hint(tmp_path: Path) -> None:
    files = with_files({"jobs/vision/train.yaml": JOB.replace("priority:", "prioirty:")})
    r = CliRunner().invoke(cli, ["validate", "--repo", str(tree(tmp_path, files))])
    assert r.exit_code == 1
    assert r.output.splitlines()[:2] == [
        "jobs/vision/train.yaml:3:1: error: unknown field `prioirty` [prioirty]",
        "    hint: did you mean `priority`? allowed fields: name, team, priority, kind, options, replicas, spot, "
        "duration_hours, checkpoint_minutes, data_region, data_residency, spread, image, command, env, "
        "env_from_secrets, service_account, image_pull_secrets, volumes, max_restarts, port, readiness_path, "
        "slurm, framework, group, group_scope, workers",
    ]


def test_github_format_escapes_properties_and_data() -> None:
    p = Problem("jobs/a,b.yaml", 3, 5, "50% bad: x\ny", field="options[0].count", hint="fix, it")
    assert github([p]) == ("::error file=jobs/a%2Cb.yaml,line=3,col=5,title=fleet%3A options[0].count::"
                           "50%25 bad: x%0Ay Hint: fix, it\n")


def test_json_format(tmp_path: Path) -> None:
    files = with_files({"jobs/vision/train.yaml": JOB.replace("count: 16", "count: 12")})
    r = CliRunner().invoke(cli, ["validate", "--repo", str(tree(tmp_path, files)), "--format", "json"])
    doc = json.loads(r.output)
    assert r.exit_code == 1 and doc["ok"] is False and doc["errors"] == 1
    assert doc["problems"][0]["field"] == "options[1].count"


@pytest.mark.parametrize("args", [["validate", "--format", "xml"], ["nonsense"], ["validate", "--bogus"],
                                  ["schema"]])
def test_usage_errors_exit_2(args: list[str], tmp_path: Path) -> None:
    r = fleet(*args, cwd=tree(tmp_path, base_files()))
    assert r.returncode == 2, r
    assert "Traceback" not in r.stderr + r.stdout


def test_missing_repo_and_bad_revision_exit_2_without_traceback(tmp_path: Path) -> None:
    r = fleet("validate", "--repo", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr
    r = fleet("validate", "--rev", "no-such-ref", cwd=tree(tmp_path, base_files()))
    assert r.returncode == 2 and "is not a git repository" in r.stderr and "hint:" in r.stderr


def test_schema_command_writes_every_kind(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["schema", "--out", str(tmp_path / "s")])
    assert r.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(schemas())


def test_committed_schema_is_up_to_date() -> None:
    """The example's YAML files point editors at schema/; regenerate with `fleet schema --out schema`."""
    for name, text in schemas().items():
        assert (ROOT / "schema" / name).read_text() == text, f"schema/{name} is stale: run fleet schema --out schema"


def test_every_field_has_a_description() -> None:
    for name, text in schemas().items():
        doc = json.loads(text)
        bodies = [("", doc), *doc.get("$defs", {}).items()]
        for title, body in bodies:
            for prop_name, prop in body.get("properties", {}).items():
                assert prop.get("description"), f"{name}: {title}.{prop_name} has no description"


def test_an_invalid_base_does_not_block_the_change_that_repairs_it(tmp_path: Path) -> None:
    """The base's problems are printed prefixed with the revision; the head is planned on its own, exit 0."""
    repo = tree(tmp_path, with_files({"jobs/vision/broken.yaml": "name: broken\n"}))
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "broken base"], cwd=repo, check=True)
    (repo / "jobs/vision/broken.yaml").unlink()
    for verb in ("plan", "cost"):
        r = fleet(verb, "--base", "HEAD", "--format", "json", cwd=repo)
        assert r.returncode == 0, r.stderr
        assert "HEAD: jobs/vision/broken.yaml:1:1: error: missing required field `image`" in r.stderr
        assert "warning: the base revision HEAD does not validate" in r.stderr and "Traceback" not in r.stderr
        doc = json.loads(r.stdout)
        if verb == "plan":
            assert {p["status"] for p in doc["placements"]} == {"new"}
        else:
            assert "diff" not in doc or not doc["diff"]
