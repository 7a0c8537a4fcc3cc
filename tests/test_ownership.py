"""`fleet check` (who may change what) and `fleet codeowners`, on temporary git repositories.

Each case commits a base fleet, changes the work tree as a pull request would, and runs the real command:
every kind of unauthorized change is rejected with the rule and who could approve it, and the authorized
ones pass. Ownership always comes from the base revision's policies.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.codeowners import codeowners
from reconciler.load import load

from builders import JOB, PRIORITIES, TEAMS, base_files, job

ROOT = Path(__file__).resolve().parents[1]
ADMINS = ("@org/fleet-admins",)
VISION = ("@org/vision", "victor", *ADMINS)
LANG = ("@org/lang", *ADMINS)

# The builders' teams with a user owner too, so both kinds of owner entry are exercised.
BASE_TEAMS = TEAMS.replace('owners: ["@org/vision"]', 'owners: ["@org/vision", "victor"]')


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def write(repo: Path, files: Mapping[str, str | bytes | None]) -> None:
    for rel, content in files.items():
        path = repo / rel
        if content is None:
            path.unlink(missing_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


def base_repo(tmp_path: Path, extra: Mapping[str, str | None] | None = None) -> Path:
    """A git repository whose one commit (branch main) is the builders' fleet."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    write(repo, {**base_files(), "policies/teams.yaml": BASE_TEAMS, **(extra or {})})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def run_check(repo: Path, author: str, teams: str = "", fmt: str = "json") -> tuple[int, str]:
    r = CliRunner().invoke(cli, ["check", "--repo", str(repo), "--base", "main", "--author", author,
                                 "--author-teams", teams, "--format", fmt])
    return r.exit_code, r.output


def raised(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


LANG_JOB = job("tok", "lang")

# (case, author, author teams, changes to the work tree, expected {(path, rule): approvers})
CASES: list[tuple[str, str, str, dict[str, str | None], dict[tuple[str, str], tuple[str, ...]]]] = [
    # --- authorized ---------------------------------------------------------------------------------------
    ("owner by login adds a job", "victor", "", {"jobs/vision/new.yaml": job("new")}, {}),
    ("login matches case-insensitively", "Victor", "", {"jobs/vision/train.yaml": JOB.replace("24", "48")}, {}),
    ("owner by team handle edits a job", "vic2", "org/vision", {"jobs/vision/train.yaml": JOB.replace("24", "48")}, {}),
    ("owner deletes own job", "victor", "", {"jobs/vision/train.yaml": None}, {}),
    ("owner of both teams moves a job", "both", "org/vision,@ORG/lang",
     {"jobs/vision/train.yaml": None, "jobs/lang/train.yaml": JOB.replace("team: vision", "team: lang")
      .replace("production", "research")}, {}),
    ("admin raises a quota and adds a class", "root", "org/fleet-admins",
     {"policies/teams.yaml": raised(BASE_TEAMS, "nominal: 128}", "nominal: 999}"),
      "policies/priorities.yaml": raised(PRIORITIES, "classes:\n", "classes:\n  - {name: urgent, value: 99999}\n")},
     {}),
    ("admin uses a class above a ceiling the same change raises", "root", "org/fleet-admins",
     {"policies/teams.yaml": raised(BASE_TEAMS, "max_priority: research", "max_priority: production"),
      "jobs/lang/tok.yaml": job("tok", "lang", "priority: production\n")}, {}),
    ("owner edits a job within the ceiling", "lang-dev", "org/lang",
     {"jobs/lang/tok.yaml": job("tok", "lang", "priority: research\n")}, {}),
    # --- unauthorized ---------------------------------------------------------------------------------------
    ("team handle without membership", "vic2", "", {"jobs/vision/new.yaml": job("new")},
     {("jobs/vision/new.yaml", "team-folder"): VISION}),
    ("owner edits another team's folder", "victor", "", {"jobs/lang/tok.yaml": LANG_JOB + "duration_hours: 5\n"},
     {("jobs/lang/tok.yaml", "team-folder"): LANG}),
    ("owner deletes another team's job", "lang-dev", "org/lang", {"jobs/vision/train.yaml": None},
     {("jobs/vision/train.yaml", "team-folder"): VISION}),
    ("owner moves a job into another team's folder", "victor", "",
     {"jobs/vision/train.yaml": None, "jobs/lang/train.yaml": JOB.replace("team: vision", "team: lang")
      .replace("production", "research")},
     {("jobs/lang/train.yaml", "team-folder"): LANG}),
    ("a folder of a team the base does not know", "victor", "", {"jobs/newteam/x.yaml": job("x", "newteam")},
     {("jobs/newteam/x.yaml", "team-folder"): ADMINS}),
    ("a file directly under jobs/", "victor", "", {"jobs/notes.yaml": "a: 1\n"},
     {("jobs/notes.yaml", "admin-only"): ADMINS}),
    ("owner edits a cluster", "victor", "", {"fleet/clusters/gke-usc1.yaml": base_files()[
        "fleet/clusters/gke-usc1.yaml"].decode().replace("max: 4", "max: 40")},
     {("fleet/clusters/gke-usc1.yaml", "admin-only"): ADMINS}),
    ("owner adds prices", "victor", "", {"fleet/prices.yaml": "prices: []\n"},
     {("fleet/prices.yaml", "admin-only"): ADMINS}),
    ("owner lowers a quota: still admin-only, not a raise", "victor", "",
     {"policies/teams.yaml": raised(BASE_TEAMS, "nominal: 256,", "nominal: 128,")},
     {("policies/teams.yaml", "admin-only"): ADMINS}),
    ("owner raises own quota", "victor", "",
     {"policies/teams.yaml": raised(BASE_TEAMS, "nominal: 256,", "nominal: 512,")},
     {("policies/teams.yaml", "admin-only"): ADMINS, ("policies/teams.yaml", "quota-raise"): ADMINS}),
    ("owner removes a borrowing limit (unlimited is a raise)", "victor", "",
     {"policies/teams.yaml": raised(BASE_TEAMS, " borrowing_limit: 64,", "")},
     {("policies/teams.yaml", "admin-only"): ADMINS, ("policies/teams.yaml", "quota-raise"): ADMINS}),
    ("owner adds a quota for a new accelerator", "lang-dev", "org/lang",
     {"policies/teams.yaml": raised(BASE_TEAMS, "nvidia-h100-80gb: {nominal: 32}",
                                    "nvidia-h100-80gb: {nominal: 32}\n      tpu-v5e: {nominal: 8}")},
     {("policies/teams.yaml", "admin-only"): ADMINS, ("policies/teams.yaml", "quota-raise"): ADMINS}),
    ("owner states a spot quota (room beside nominal)", "victor", "",
     {"policies/teams.yaml": raised(BASE_TEAMS, "nominal: 256,", "nominal: 256, spot: 64,")},
     {("policies/teams.yaml", "admin-only"): ADMINS, ("policies/teams.yaml", "quota-raise"): ADMINS}),
    ("owner raises own budget", "victor", "",
     {"policies/teams.yaml": raised(BASE_TEAMS, "budget_monthly_usd: 5000000", "budget_monthly_usd: 9000000")},
     {("policies/teams.yaml", "admin-only"): ADMINS, ("policies/teams.yaml", "budget-raise"): ADMINS}),
    ("owner raises own priority ceiling and uses it", "lang-dev", "org/lang",
     {"policies/teams.yaml": raised(BASE_TEAMS, "max_priority: research", "max_priority: critical"),
      "jobs/lang/tok.yaml": job("tok", "lang", "priority: critical\n")},
     {("policies/teams.yaml", "admin-only"): ADMINS, ("policies/teams.yaml", "priority-ceiling-raise"): ADMINS,
      ("jobs/lang/tok.yaml", "priority-ceiling"): ADMINS}),
    ("owner adds a team", "victor", "",
     {"policies/teams.yaml": BASE_TEAMS + "  - name: mine\n    owners: [victor]\n"},
     {("policies/teams.yaml", "admin-only"): ADMINS, ("policies/teams.yaml", "new-team"): ADMINS}),
    ("owner raises a priority class", "victor", "",
     {"policies/priorities.yaml": raised(PRIORITIES, "value: 100}", "value: 5000}")},
     {("policies/priorities.yaml", "admin-only"): ADMINS,
      ("policies/priorities.yaml", "priority-class-raise"): ADMINS}),
    ("owner adds a new priority class", "victor", "",
     {"policies/priorities.yaml": raised(PRIORITIES, "classes:\n", "classes:\n  - {name: vip, value: 50000}\n")},
     {("policies/priorities.yaml", "admin-only"): ADMINS,
      ("policies/priorities.yaml", "new-priority-class"): ADMINS}),
    ("job above its team's ceiling", "lang-dev", "org/lang",
     {"jobs/lang/tok.yaml": job("tok", "lang", "priority: production\n")},
     {("jobs/lang/tok.yaml", "priority-ceiling"): ADMINS}),
    # --- outside the data folders: the workflows, CODEOWNERS and the tool itself are admin-only --------------
    ("owner adds a workflow next to a job of their own", "victor", "",
     {".github/workflows/evil.yml": "on: pull_request\n", "jobs/vision/new.yaml": job("new")},
     {(".github/workflows/evil.yml", "admin-only"): ADMINS}),
    ("owner edits CODEOWNERS", "victor", "", {".github/CODEOWNERS": "* @victor\n"},
     {(".github/CODEOWNERS", "admin-only"): ADMINS}),
    ("owner edits the tool's config and code", "lang-dev", "org/lang",
     {"pyproject.toml": "[project]\nname = 'mine'\n", "reconciler/__init__.py": None,
      "reconciler/evil.py": "import os\n", ".gitignore": ""},
     {("pyproject.toml", "admin-only"): ADMINS, ("reconciler/__init__.py", "admin-only"): ADMINS,
      ("reconciler/evil.py", "admin-only"): ADMINS, (".gitignore", "admin-only"): ADMINS}),
    ("files .gitignore excludes are no change", "victor", "", {"report/check.txt": "x\n", "a.pyc": "x"}, {}),
    ("admin changes workflows and code", "root", "org/fleet-admins",
     {".github/workflows/evil.yml": "on: push\n", "pyproject.toml": "", "reconciler/__init__.py": None}, {}),
]

# Files outside the data folders in every case's base: the tool's own, as in Fleet's repository.
TOOL_FILES = {".github/CODEOWNERS": "* @org/fleet-admins\n", "pyproject.toml": "[project]\nname = 'fleet'\n",
              "reconciler/__init__.py": "", ".gitignore": "report/\n*.pyc\n"}


@pytest.mark.parametrize(("author", "teams", "changes", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_check(tmp_path: Path, author: str, teams: str, changes: dict[str, str | None],
               expected: dict[tuple[str, str], tuple[str, ...]]) -> None:
    repo = base_repo(tmp_path, {"jobs/lang/tok.yaml": LANG_JOB, **TOOL_FILES})
    write(repo, changes)
    code, out = run_check(repo, author, teams)
    doc = json.loads(out)
    found = {(v["path"], v["rule"]): tuple(v["approvers"]) for v in doc["violations"]}
    assert found == expected, json.dumps(doc["violations"], indent=1)
    assert code == (1 if expected else 0)
    assert doc["ok"] is (not expected)


def test_violation_names_file_line_rule_and_approvers(tmp_path: Path) -> None:
    repo = base_repo(tmp_path)
    write(repo, {"policies/teams.yaml": raised(BASE_TEAMS, "nominal: 256,", "nominal: 512,"),
                 "jobs/lang/x.yaml": job("x", "lang")})
    code, out = run_check(repo, "victor", fmt="text")
    assert code == 1
    assert out.splitlines() == [
        "jobs/lang/x.yaml:1: team-folder: `victor` adds jobs/lang/x.yaml, but is not an owner of team `lang`: its "
        "owners (or an admin) change jobs/lang/",
        "    approvers: @org/lang, @org/fleet-admins",
        "policies/teams.yaml:1: admin-only: `victor` edits policies/teams.yaml, but only fleet admins change policies/",
        "    approvers: @org/fleet-admins",
        "policies/teams.yaml:12: quota-raise: raises the tpu-v5p nominal of team `vision` from 256 to 512",
        "    approvers: @org/fleet-admins",
        "3 ownership violation(s) by `victor`",
    ]
    code, out = run_check(repo, "victor", fmt="github")
    assert out.splitlines()[2] == ("::error file=policies/teams.yaml,line=12,title=fleet check%3A quota-raise::"
                                   "raises the tpu-v5p nominal of team `vision` from 256 to 512. "
                                   "Approvers: @org/fleet-admins")


def test_a_spot_quota_raise_is_named_and_a_cut_is_not(tmp_path: Path) -> None:
    """`spot:` is room beside nominal: stating one, or a larger one, is a quota raise; a smaller one is not."""
    with_spot = raised(BASE_TEAMS, "nominal: 256,", "nominal: 256, spot: 64,")
    repo = base_repo(tmp_path, {"policies/teams.yaml": with_spot})
    write(repo, {"policies/teams.yaml": raised(with_spot, "spot: 64,", "spot: 96,")})
    code, out = run_check(repo, "victor", fmt="text")
    assert code == 1
    assert "policies/teams.yaml:12: quota-raise: raises the tpu-v5p spot quota of team `vision` from 64 to 96" \
        in out.splitlines()
    write(repo, {"policies/teams.yaml": raised(with_spot, "spot: 64,", "spot: 32,")})
    code, out = run_check(repo, "victor")
    assert {v["rule"] for v in json.loads(out)["violations"]} == {"admin-only"}


def test_stating_a_spot_quota_of_zero_is_a_cut_not_a_raise(tmp_path: Path) -> None:
    """`spot: 0` keeps the team's spot-only work out (it no longer counts against nominal): nothing is raised."""
    repo = base_repo(tmp_path)
    write(repo, {"policies/teams.yaml": raised(BASE_TEAMS, "nominal: 256,", "nominal: 256, spot: 0,")})
    _, out = run_check(repo, "victor")
    assert {v["rule"] for v in json.loads(out)["violations"]} == {"admin-only"}


def test_the_base_decides_even_when_the_head_grants_rights(tmp_path: Path) -> None:
    """Adding yourself as an owner (or admin) in the change itself grants nothing."""
    repo = base_repo(tmp_path)
    write(repo, {"policies/teams.yaml": raised(BASE_TEAMS, 'admins: ["@org/fleet-admins"]',
                                               'admins: ["@org/fleet-admins", "mallory"]'),
                 "jobs/lang/x.yaml": job("x", "lang")})
    code, out = run_check(repo, "mallory")
    assert code == 1
    assert {v["rule"] for v in json.loads(out)["violations"]} == {"admin-only", "team-folder"}


def test_base_without_teams_is_rejected_with_a_hint(tmp_path: Path) -> None:
    repo = base_repo(tmp_path, {"policies/teams.yaml": None})
    result = CliRunner().invoke(cli, ["check", "--repo", str(repo), "--base", "main", "--author", "a"])
    assert result.exit_code == 1
    assert "policies/teams.yaml of the base revision main does not exist" in str(result.exception)


def test_unknown_base_is_a_usage_error(tmp_path: Path) -> None:
    from test_cli import fleet

    repo = base_repo(tmp_path)
    r = fleet("check", "--repo", str(repo), "--base", "nope", "--author", "a")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.startswith("error: unknown git revision `nope`")
    assert "Traceback" not in r.stderr


def test_changed_paths_cover_the_whole_tree(tmp_path: Path) -> None:
    """Between a revision and the work tree: commits since, staged, unstaged, deleted and untracked files;
    ignored ones are not a change. A rename is a deletion and an addition."""
    from reconciler.sources import changed_paths

    repo = base_repo(tmp_path, TOOL_FILES)
    write(repo, {"reconciler/committed.py": "x = 1\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a commit after the base")
    write(repo, {"reconciler/staged.py": "s = 1\n"})
    git(repo, "add", "reconciler/staged.py")
    git(repo, "mv", "pyproject.toml", "setup.cfg")
    write(repo, {".github/CODEOWNERS": "* @x\n", "reconciler/__init__.py": None, "new dir/a b.txt": "u\n",
                 "report/plan.json": "{}", "x.pyc": "c"})
    assert changed_paths(repo, "main~1") == (
        ".github/CODEOWNERS", "new dir/a b.txt", "pyproject.toml", "reconciler/__init__.py",
        "reconciler/committed.py", "reconciler/staged.py", "setup.cfg")
    git(repo, "stash", "-u", "-q")
    assert changed_paths(repo, "main") == ()


def test_outside_paths_are_listed_with_the_rule_and_approvers(tmp_path: Path) -> None:
    repo = base_repo(tmp_path, TOOL_FILES)
    write(repo, {".github/workflows/evil.yml": "on: push\n", "reconciler/__init__.py": "import os\n"})
    code, out = run_check(repo, "victor", fmt="text")
    assert code == 1
    assert out.splitlines() == [
        ".github/workflows/evil.yml:1: admin-only: `victor` changes .github/workflows/evil.yml, but only fleet "
        "admins change anything outside fleet/, policies/, jobs/, robots/ and deployments/ (workflows, CODEOWNERS, "
        "the tool's code and config)",
        "    approvers: @org/fleet-admins",
        "reconciler/__init__.py:1: admin-only: `victor` changes reconciler/__init__.py, but only fleet admins "
        "change anything outside fleet/, policies/, jobs/, robots/ and deployments/ (workflows, CODEOWNERS, the "
        "tool's code and config)",
        "    approvers: @org/fleet-admins",
        "2 ownership violation(s) by `victor`",
    ]


# --- CODEOWNERS ---------------------------------------------------------------------------------------------


def test_codeowners_from_teams() -> None:
    teams = load({"policies/teams.yaml": BASE_TEAMS.replace('"victor"', '"Victor", "@victor"').encode()}).teams
    assert teams is not None
    assert codeowners(teams).splitlines()[3:] == [
        "* @org/fleet-admins",  # first: GitHub applies the last matching line, so every other path is the admins'
        "/jobs/vision/ @org/vision @Victor @org/fleet-admins",
        "/jobs/lang/ @org/lang @org/fleet-admins",
    ]


def test_codeowners_command_writes_atomically_and_deterministically(tmp_path: Path) -> None:
    repo = base_repo(tmp_path)
    for _ in range(2):
        r = CliRunner().invoke(cli, ["codeowners", "--repo", str(repo)])
        assert r.exit_code == 0, r.output
    first = (repo / ".github" / "CODEOWNERS").read_bytes()
    teams = load({"policies/teams.yaml": BASE_TEAMS.encode()}).teams
    assert teams is not None
    assert first.decode() == codeowners(teams)
    assert sorted(p.name for p in (repo / ".github").iterdir()) == ["CODEOWNERS"]


def test_codeowners_refuses_an_owner_that_would_inject_lines(tmp_path: Path) -> None:
    """An owner string is written onto a CODEOWNERS line: a newline would add a line (`* @attacker` owning
    everything), a space another owner. `fleet codeowners` only loads teams.yaml, so it checks by itself."""
    repo = base_repo(tmp_path)
    teams = (repo / "policies" / "teams.yaml").read_text()
    (repo / "policies" / "teams.yaml").write_text(teams.replace('"@org/vision"', '"@org/vision\\n* @attacker"'))
    r = CliRunner().invoke(cli, ["codeowners", "--repo", str(repo)])
    assert r.exit_code == 1, r.output
    assert "is not a GitHub user or team handle" in str(r.exception)
    assert not (repo / ".github" / "CODEOWNERS").exists()


def test_repository_codeowners_is_up_to_date() -> None:
    """The committed .github/CODEOWNERS is what `fleet codeowners` writes for this repository's teams."""
    teams = load({"policies/teams.yaml": (ROOT / "policies" / "teams.yaml").read_bytes()}).teams
    assert teams is not None
    assert (ROOT / ".github" / "CODEOWNERS").read_text() == codeowners(teams), "run `fleet codeowners`"


def test_check_reports_escape_what_the_change_wrote() -> None:
    """A file name or message carrying terminal escapes or a newline (the pull request's bytes) is printed
    escaped in every format: it can neither drive the terminal nor forge a line such as `ok: ...`."""
    from reconciler import ownership

    v = ownership.Violation("jobs/x/\x1b[2Jevil\nok: `me` may make every change.yaml", 1, "new-file",
                            "creates \x1b]0;title\x07 a job", ("@admin",))
    who = ownership.Author.of("me")
    for out in (ownership.text((v,), who), ownership.github((v,), who)):
        assert "\x1b" not in out and "\x07" not in out
        assert not any(line.startswith("ok:") for line in out.splitlines())
        assert "\\x1b[2J" in out
