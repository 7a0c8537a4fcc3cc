"""`fleet submit` (issue 25): a job from flags, validated, planned, committed alone on a new branch, and the pull
request opened through GitHub's REST API (a local HTTP server stands in for it) or the commands printed."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from reconciler.cli import cli
from reconciler.problems import FleetError

from builders import base_files

GIT_ENV = {"GIT_AUTHOR_NAME": "r", "GIT_AUTHOR_EMAIL": "r@example.invalid", "GIT_COMMITTER_NAME": "r",
           "GIT_COMMITTER_EMAIL": "r@example.invalid", "GITHUB_TOKEN": None, "GH_TOKEN": None,
           "GITHUB_REPOSITORY": None, "GITHUB_API_URL": None, "FLEET_NOW": "2026-11-23T08:00:00+00:00"}
IMAGE = "us-docker.pkg.dev/ml/train:2"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=repo, check=True, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(repo), **{
                              k: v for k, v in GIT_ENV.items() if v and k.startswith("GIT_")}}).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "fleet-repo"
    for rel, data in base_files().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "fleet")
    return root


def submit(repo: Path, *args: str, **env: str | None) -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["submit", "--repo", str(repo), *args], env={**GIT_ENV, **env})
    if isinstance(r.exception, FleetError):
        return r.exception.exit_code, f"{r.output}error: {r.exception.message}\nhint: {r.exception.hint}\n"
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    return r.exit_code, r.output


NEW = ["vision/probe", "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "8", "--hours", "6",
       "--env", "WANDB_PROJECT=probe", "--", "python", "-m", "probe", "--lr", "3e-4"]


def test_submit_writes_the_job_validates_plans_and_commits_it_alone_on_a_new_branch(repo: Path) -> None:
    (repo / "notes.txt").write_text("mine, staged, not the job's\n")
    git(repo, "add", "notes.txt")
    code, out = submit(repo, *NEW)
    assert code == 0, out
    doc = yaml.safe_load((repo / "jobs/vision/probe.yaml").read_text())
    assert doc == {"name": "probe", "team": "vision", "kind": "training",
                   "options": [{"accelerator": "nvidia-h100-80gb", "count": 8}], "duration_hours": 6,
                   "image": IMAGE, "command": ["python", "-m", "probe", "--lr", "3e-4"],
                   "env": {"WANDB_PROJECT": "probe"}}
    lines = out.splitlines()
    assert lines[0] == f"wrote {repo}/jobs/vision/probe.yaml"
    assert lines[1].startswith("plan: runs on onprem-sjc/h100-owned with option 0 (8x nvidia-h100-80gb), $40.00/h, "
                               "$240 for its run")
    assert lines[2].startswith("expected start: 2026-11-23 08:00 UTC (estimate): the plan places it now")
    assert git(repo, "branch", "--show-current").strip() == "submit/vision-probe"
    assert git(repo, "show", "--name-only", "--format=%s", "HEAD").split() == \
        ["jobs:", "submit", "vision/probe", "jobs/vision/probe.yaml"]
    assert "A  notes.txt" in git(repo, "status", "--short")          # the user's staged file stays staged
    assert lines[-3:] == ["to open the pull request (no GITHUB_TOKEN or GH_TOKEN here), run:",
                          "  git push -u origin submit/vision-probe",
                          "  gh pr create --base main --head submit/vision-probe --title 'jobs: submit vision/probe' "
                          "--fill"]


def test_a_job_that_cannot_run_now_says_why_and_when_it_is_expected_to_start(repo: Path) -> None:
    """The first 64 GPUs take the H100 pool for 10 hours; the second job waits, expected when the first ends."""
    code, out = submit(repo, "vision/big", "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "64",
                       "--hours", "10", "--no-git")
    assert code == 0 and "plan: runs on gke-usc1/h100 " in out, out
    code, out = submit(repo, "vision/big2", "--from", "vision/big", "--no-git")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[1] == "plan: waits (no place for it now):"
    assert lines[-1].startswith("expected start: 2026-11-23 18:00 UTC (estimate): the plan reserves units 0, 1, 2, "
                                "3, 4, 5, 6, 7 of gke-usc1/h100 for it from then"), lines[-1]   # quota blocks it too


@pytest.mark.parametrize(("args", "message"), [
    (["vision/probe", "--image", IMAGE, "--accelerator", "nvidia-h100", "--count", "8"],
     "did you mean `nvidia-h100-80gb`?"),
    (["vision/probe", "--image", IMAGE, "--accelerator", "tpu-v5p", "--topology", "3x3x3"], "topology"),
    (["nobody/probe", "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "8"], "team"),
    (["vision/probe", "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "8", "--env",
      "API_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789"], "secret"),
])
def test_an_invalid_job_is_reported_and_nothing_is_written(repo: Path, args: list[str], message: str) -> None:
    code, out = submit(repo, *args)
    assert code == 1, out
    assert "nothing was written" in out and message in out
    assert not list(repo.glob("jobs/*/probe.yaml"))
    assert git(repo, "branch", "--list").split() == ["*", "main"]


@pytest.mark.parametrize("job_id", ["vision/../../etc", "../x/y", "vision", "Vision/x", "vision/x/y"])
def test_submit_never_writes_outside_jobs_team(repo: Path, job_id: str) -> None:
    before = sorted(p for p in repo.rglob("*") if ".git" not in p.parts)
    code, out = submit(repo, job_id, "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "8")
    assert code == 2 and "is not a job id" in out
    assert sorted(p for p in repo.rglob("*") if ".git" not in p.parts) == before


def test_an_existing_job_is_not_overwritten(repo: Path) -> None:
    code, out = submit(repo, "vision/train", "--image", IMAGE, "--accelerator", "nvidia-h100-80gb", "--count", "8")
    assert code == 2 and "exists already" in out


def test_from_an_existing_job_keeps_its_fields_and_the_flags_override(repo: Path) -> None:
    code, out = submit(repo, "vision/train-v2", "--from", "vision/train", "--count", "32", "--accelerator",
                       "nvidia-h100-80gb", "--priority", "research", "--no-git")
    assert code == 0, out
    doc = yaml.safe_load((repo / "jobs/vision/train-v2.yaml").read_text())
    assert doc["options"] == [{"accelerator": "nvidia-h100-80gb", "count": 32}]
    assert (doc["priority"], doc["duration_hours"], doc["env"]) == ("research", 24, {"WANDB_PROJECT": "vision"})
    code, out = submit(repo, "vision/x", "--from", "vision/trian", "--no-git")
    assert code == 2 and "did you mean `vision/train`?" in out


# -- the pull request through GitHub's REST API ---------------------------------------------------------------

class GitHub:
    """`POST /repos/{owner}/{repo}/pulls` as GitHub answers it: 201 with the pull request, or `status` with
    GitHub's error body."""

    def __init__(self, status: int = 201) -> None:
        self.status, self.requests = status, []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append((self.path, dict(self.headers), body))
                if api.status == 201:
                    reply = {"number": 7, "html_url": "https://github.com/ml-org/fleet/pull/7", "head": {
                        "ref": body["head"]}}
                else:
                    reply = {"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom",
                             "message": "A pull request already exists for ml-org:submit/vision-probe."}]}
                data = json.dumps(reply).encode()
                self.send_response(api.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def origin(repo: Path, tmp_path: Path) -> Iterator[Path]:
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    yield bare


def test_with_a_token_the_branch_is_pushed_and_the_pull_request_opened(repo: Path, origin: Path) -> None:
    gh = GitHub()
    try:
        code, out = submit(repo, *NEW, GITHUB_TOKEN="ghs_test", GITHUB_REPOSITORY="ml-org/fleet",
                           GITHUB_API_URL=gh.url)
    finally:
        gh.server.shutdown()
    assert code == 0, out
    assert out.splitlines()[-1] == "opened the pull request https://github.com/ml-org/fleet/pull/7"
    [(path, headers, body)] = gh.requests
    assert path == "/repos/ml-org/fleet/pulls"
    assert headers["Authorization"] == "Bearer ghs_test" and headers["Accept"] == "application/vnd.github+json"
    assert (body["head"], body["base"], body["title"]) == ("submit/vision-probe", "main", "jobs: submit vision/probe")
    assert "plan: runs on onprem-sjc/h100-owned" in body["body"]
    assert git(origin, "branch", "--list").split() == ["submit/vision-probe"]


def test_github_refusing_the_pull_request_is_reported_with_what_to_run(repo: Path, origin: Path) -> None:
    gh = GitHub(status=422)
    try:
        code, out = submit(repo, *NEW, GH_TOKEN="ghs_test", GITHUB_REPOSITORY="ml-org/fleet", GITHUB_API_URL=gh.url)
    finally:
        gh.server.shutdown()
    assert code == 0, out
    assert ("warning: GitHub refused the pull request (HTTP 422): Validation Failed; A pull request already exists "
            "for ml-org:submit/vision-probe.") in out
    assert out.splitlines()[-1].startswith("  gh pr create --base main --head submit/vision-probe")


def test_github_not_answering_is_a_fact_not_a_crash(repo: Path, origin: Path) -> None:
    code, out = submit(repo, *NEW, GITHUB_TOKEN="t", GITHUB_REPOSITORY="ml-org/fleet",
                       GITHUB_API_URL="http://127.0.0.1:9")
    assert code == 0, out
    assert "warning: GitHub could not be reached at http://127.0.0.1:9" in out


def test_outside_git_the_file_is_written_and_the_commands_printed(tmp_path: Path) -> None:
    for rel, data in base_files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    code, out = submit(tmp_path, *NEW)
    assert code == 0, out
    assert (tmp_path / "jobs/vision/probe.yaml").is_file()
    assert "is not in a git repository" in out and "  git checkout -b submit/vision-probe" in out


@pytest.mark.parametrize("where", ["--env", "command"])
def test_a_flag_that_is_not_utf8_is_named_and_nothing_is_written(repo: Path, where: str) -> None:
    """Found by a hunt for misleading errors: the YAML Fleet wrote was blamed (`invalid Unicode character`)."""
    bad = "a\udcff"          # how Python passes on the byte 0xff of a non-UTF-8 argument (surrogate escape)
    head = NEW[:NEW.index("--")]
    args = [*head, "--env", f"K={bad}", "--", "python", "go"] if where == "--env" else [*head, "--", bad]
    code, out = submit(repo, *args)
    assert code == 2 and ("--env" if where == "--env" else "the command after --") in out and "not UTF-8" in out
    assert not (repo / "jobs/vision/probe.yaml").exists()
