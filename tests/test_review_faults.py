"""What a pull request gets and what researchers read: defects a hunt found in the review path (the plan diff,
the cost report and its impact, budgets, a job's story and its expected start, the commands without git).

Each test failed before its mend; the docstring says what it did then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from kube_api import KubeCluster, write_kubeconfig
from kube_objects import job_objects
from test_cost import commit, git
from test_job_story import FILES, NOW

from reconciler.catalog import load_catalog
from reconciler.cli import cli
from reconciler.eta import expected_start
from reconciler.impact import impact
from reconciler.models import DIGEST_ANNOTATION, spec_digest
from reconciler.pipeline import Change, change, check, cost_report, plan
from reconciler.report import cost_dict, cost_markdown
from reconciler.report.fmt import cell
from reconciler.sources import read_worktree

from builders import JOB, TEAMS, base_files, job, with_files

CAT = load_catalog()
ROOT = Path(__file__).resolve().parents[1]


def changed(base: dict[str, str | bytes | None], head: dict[str, str | bytes | None]) -> Change:
    b, h = check(with_files(base), CAT), check(with_files(head), CAT)
    assert b.ok and h.ok, (b.errors, h.errors)
    return change(h, b)


def fleet_no_git(*args: str, cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The real command on a machine without the `git` program (a PATH that has none)."""
    bare = tmp_path / "bin"
    bare.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("FLEET_DEBUG", "GIT_PYTHON_GIT_EXECUTABLE")}
    env["PATH"] = str(bare)
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, check=False, timeout=120)


def test_plan_works_without_git_and_base_says_git_is_missing(tmp_path: Path) -> None:
    """`fleet plan` asks git for the HEAD commit its JSON is made for (`review.head`, None outside git). Without
    the `git` program, gitpython refuses to import: every `fleet plan` ended in "internal error: ImportError:
    Failed to initialize: Bad git executable" (exit 2), and `--base`/`fleet check` too."""
    repo = tmp_path / "repo"
    for rel, data in base_files().items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    r = fleet_no_git("plan", "--format", "json", cwd=repo, tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["review"] == {"base": None, "head": None, "pr": None} and doc["placements"], r.stdout[:400]
    for args in (["plan", "--base", "HEAD"], ["check", "--base", "HEAD", "--author", "victor"]):
        r = fleet_no_git(*args, cwd=repo, tmp_path=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith("error: cannot read git history: the `git` program is not installed"), r.stderr


def test_markdown_report_quotes_a_commit_subject_and_a_price_source_as_text(tmp_path: Path) -> None:
    """The cost comment's tables quote what the pull request wrote: commit subjects (`--history`) and a price's
    `source` in fleet/prices.yaml. GitHub renders inline HTML in a comment, and the cells passed it through:
    `<!--` hid everything after it (the disruption and budgets included), `</details>` closed a fold early."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, dict(base_files()), "base <!-- the rest is hidden </details> & more")
    prices = "prices:\n  - {accelerator: nvidia-h100-80gb, on_demand_hourly_usd: 9.0, source: \"</details><!-- x\"}\n"
    (repo / "fleet/prices.yaml").write_text(prices)
    r = subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", "cost", "--base", "main",
                        "--history", "1"], capture_output=True, text=True, cwd=repo, check=False,
                       env={**os.environ, "FLEET_NOW": "2026-01-15T12:00:00Z"})
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert "<!--" not in md and "</details><" not in md, md
    assert "base &lt;!-- the rest is hidden &lt;/details&gt; &amp; more" in md, md
    assert "&lt;/details&gt;&lt;!-- x" in md, md                        # the price change's source
    assert md.count("<details>") == md.count("</details>"), md          # every fold closes where it should
    assert cell("a | b\n<c>") == "a \\| b<br>&lt;c&gt;"


def test_a_started_spread_service_commits_the_cost_of_all_its_pools() -> None:
    """A spread service runs in several pools, one cost line each. The impact kept the last line only: a new
    3-replica service at $42.12/h (gke-usc1/h100 $22.12 + onprem-sjc $20) read "starts 1 job committing $200"
    at $20/h on onprem-sjc alone, not $421 on both."""
    serve = ("name: serve\nteam: vision\npriority: production\nkind: inference\noptions:\n"
             "  - {accelerator: nvidia-h100-80gb, count: 2}\nreplicas: 3\nimage: img:1\nport: 8000\n"
             "duration_hours: 10\n")
    c = changed({"jobs/vision/train.yaml": None}, {"jobs/vision/train.yaml": None, "jobs/vision/serve.yaml": serve})
    places = c.head.plan.placements_of("vision/serve")
    assert len(places) == 2, places                                       # spread over two clusters
    hourly = sum(p.hourly_usd for p in places)
    i = impact(c.head, c.base, c.diff)
    (s,) = i.started
    assert s.hourly_usd == hourly and s.where == ", ".join(p.pool_key for p in places), s
    assert i.committed_usd == hourly * 10
    doc = cost_dict(cost_report(c, "work tree", "main"))
    assert doc["impact"]["committed_usd"] == round(hourly * 10, 2), doc["impact"]["started"]


def test_a_budget_breach_does_not_blame_a_job_the_change_kept() -> None:
    """A budget cut makes a team's kept job over budget; another job's file is removed, so the kept GPU job is
    counted on node 0 instead of node 1 (a GPU pool's nodes are interchangeable: the diff lists no change for
    it). The violation compared unit numbers and marked it "this change", pointing the reviewer at a job the
    change did not start or move."""
    jobs = {"jobs/vision/train.yaml": None, "jobs/vision/b.yaml": job("b", count=8)}
    cut = TEAMS.replace("budget_monthly_usd: 5000000", "budget_monthly_usd: 1000")
    c = changed({**jobs, "jobs/vision/a.yaml": job("a", count=8)}, {**jobs, "policies/teams.yaml": cut})
    assert c.diff is not None and [(j.job, j.change) for j in c.diff.jobs] == [("vision/a", "stop")]
    (v,) = c.budget_violations
    assert [j.job for j in v.jobs] == ["vision/b"] and v.changed == frozenset(), v
    md = cost_markdown(cost_report(c, "work tree", "main"))
    assert "vision/b ($29,200)" in md and "this change" not in md, md


def test_prepending_an_option_to_a_running_job_is_no_move() -> None:
    """Options are listed most preferred first, so a researcher adds a new one at the top. The base placement
    names its option by index: the index now pointed at another accelerator, so the planner placed the job again
    ("its option 1 no longer runs on onprem-sjc/h100-owned", untrue) on the very same units, and the review read
    "Moves 1 running job (1 production): up to 8 accelerator-hours of work lost"."""
    head_job = JOB.replace("options:\n", "options:\n  - accelerator: tpu-v5p\n    topology: 8x8x8\n")
    c = changed({}, {"jobs/vision/train.yaml": head_job})
    (before,) = c.base.plan.placements if c.base else ()
    (after,) = c.head.plan.placements
    assert (after.pool_key, after.units, after.option, after.status) == (before.pool_key, before.units,
                                                                          before.option + 1, "kept"), after
    assert after.reason == ""
    assert c.diff is not None and c.diff.jobs == ()
    i = impact(c.head, c.base, c.diff)
    assert i.disrupted == ()
    # an option that no longer runs anywhere there still moves it, with that reason
    gone = JOB.replace("  - accelerator: nvidia-h100-80gb\n    count: 16\n    relative_speed: 0.5\n", "")
    c = changed({}, {"jobs/vision/train.yaml": gone})
    assert c.diff is not None and [(j.job, j.change) for j in c.diff.jobs] == [("vision/train", "move")], c.diff.jobs
    assert "its option 1 no longer runs on onprem-sjc/h100-owned" in c.diff.jobs[0].detail


def test_the_story_of_a_finished_job_expects_no_start(tmp_path: Path) -> None:
    """`fleet status TEAM/JOB` of a job that succeeded with the spec its file has now: the plan does not place it
    again, yet the story ended "expected start: unknown (estimate: the work holding the capacity it needs never
    ends in the plan's reckoning ...)", contradicting the plan."""
    for rel, data in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
    v = check(read_worktree(tmp_path), CAT)
    objs = job_objects("vision", "idle", "h100", "succeeded", accel="gpu", per_pod=8)
    objs[0]["metadata"].setdefault("annotations", {})[DIGEST_ANNOTATION] = \
        spec_digest(next(j for j in v.loaded.jobs if j.id == "vision/idle"))
    api = KubeCluster("gke-usc1").start()
    try:
        api.add(*objs)
        write_kubeconfig(tmp_path / "kubeconfig", {"usc1": api.url})
        env = {"KUBECONFIG": str(tmp_path / "kubeconfig"), "FLEET_NOW": NOW}
        out = {fmt: CliRunner().invoke(cli, ["status", "--repo", str(tmp_path), "vision/idle", "--format", fmt],
                                       env=env) for fmt in ("text", "json")}
        snap_out = CliRunner().invoke(cli, ["observe", "--repo", str(tmp_path), "--format", "json"], env=env)
    finally:
        api.stop()
    assert out["text"].exit_code == 0, out["text"].output
    assert "succeeded since" in out["text"].output and "expected start" not in out["text"].output, \
        out["text"].output
    assert json.loads(out["json"].output)["expected_start"] is None
    # the estimate itself says so to any other caller
    from reconciler.observe.model import Snapshot

    snap = Snapshot.model_validate_json(snap_out.output)
    planned = plan(v, observed=snap)
    eta = expected_start(v, planned, "vision/idle", snap.observed_at)
    assert (eta.at, eta.placed) == (None, False) and eta.basis.startswith("it succeeded with the spec"), eta


def test_check_counts_what_fleet_does_not_read_in_another_teams_folder(tmp_path: Path) -> None:
    """`fleet check` judged the data folders by the files Fleet reads, so a hidden file or a submodule
    (gitlink) in another team's folder needed nobody's approval: the path rules never saw them, and the
    admin-only rule skips the data folders. A gitlink is worse: git's diff against the work tree does not
    list one that is not checked out (CI does not check submodules out), and once merged the base no longer
    validates (`fleet plan --base` then plans every later pull request without its diff)."""
    from test_ownership import LANG, base_repo, run_check
    from test_ownership import git as git_in

    repo = base_repo(tmp_path, {"jobs/lang/tok.yaml": job("tok", "lang")})
    git_in(repo, "checkout", "-q", "-b", "pr")
    (repo / "jobs/lang/.notes").write_text("mine now\n")
    git_in(repo, "add", "jobs/lang/.notes")
    git_in(repo, "update-index", "--add", "--cacheinfo", f"160000,{git_in(repo, 'rev-parse', 'HEAD').strip()},"
           "jobs/lang/sub")
    git_in(repo, "commit", "-qm", "pr")                    # the pull request's commit, checked out as CI does
    code, out = run_check(repo, "victor")
    found = {(v["path"], v["rule"]): tuple(v["approvers"]) for v in json.loads(out)["violations"]}
    assert found == {("jobs/lang/.notes", "team-folder"): LANG, ("jobs/lang/sub", "team-folder"): LANG}, out
    assert code == 1
    assert run_check(repo, "lang-dev", "org/lang")[0] == 0   # the folder's owners may


def test_check_does_not_count_an_ignored_hidden_file_or_a_checked_out_submodule_that_did_not_change(
        tmp_path: Path) -> None:
    """Since the forty-first session the readers give a hidden YAML file a warning entry and a folder holding
    `.git` an entry of its own. `fleet check` compared those entries: a hidden file `.gitignore` excludes read as
    added by the author (review of that session's first form), and a checked-out submodule, whose work-tree
    entry is not its commit's, as edited. What git ignores, and a submodule that did not change, are no change."""
    from test_ownership import base_repo, run_check
    from test_ownership import git as git_in

    repo = base_repo(tmp_path, {".gitignore": ".*.yaml\n"})
    git_in(repo, "checkout", "-q", "-b", "pr")
    (repo / "jobs/vision/.mine.yaml").write_text(job("mine"))
    assert run_check(repo, "bob", "org/lang") == (0, run_check(repo, "bob", "org/lang")[1])
    sub = repo / "jobs/vision/sub"      # a checked-out submodule: a clone of its own, its commit in the index
    sub.mkdir()
    git_in(sub, "init", "-q")
    (sub / "x.yaml").write_text(job("x"))
    git_in(sub, "add", "x.yaml")
    git_in(sub, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "sub")
    head = git_in(sub, "rev-parse", "HEAD").strip()
    git_in(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},jobs/vision/sub")
    git_in(repo, "commit", "-qm", "sub")
    git_in(repo, "branch", "-f", "main", "HEAD")        # the submodule is in the base: the pull request changes nothing
    code, out = run_check(repo, "bob", "org/lang")
    assert code == 0 and json.loads(out)["violations"] == [], out
