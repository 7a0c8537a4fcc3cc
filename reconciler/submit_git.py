"""`fleet submit`'s writes to git and GitHub: the job file committed alone on a new branch, pushed, and the
pull request opened.  EFFECT (git, network).

sources.py reads git; this is the one module that writes it, and only this: a new branch at HEAD holding one
commit that adds one file (`git commit --only PATH`, so nothing else the user staged is swept in). GitHub is
reached through its REST API (`POST /repos/{owner}/{repo}/pulls`, with the token of GITHUB_TOKEN or GH_TOKEN)
with the standard library, at GITHUB_API_URL (GitHub Actions sets it; GitHub Enterprise differs) or GitHub's.
Every failure is a fact reported (`Outcome.problem`) and the exact commands that finish the job by hand.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_API = "https://api.github.com"
_GITHUB_REMOTE = re.compile(r"github\.com[:/]([A-Za-z0-9][-A-Za-z0-9]*)/([A-Za-z0-9._-]+?)(?:\.git)?/?$")
TIMEOUT_S = 20


@dataclass
class Outcome:
    """What happened: the branch and commit made, the pull request opened, or what failed and the commands
    that do the rest by hand."""

    branch: str
    base: str
    commit: str | None = None
    pull_request: str | None = None
    problem: str | None = None
    commands: list[str] = field(default_factory=list)


def commit_on_branch(repo: Path, rel: str, branch: str, message: str) -> Outcome:
    """Switch to the new `branch` (from HEAD) and commit the file `rel` (relative to `repo`) alone on it."""
    import git  # gitpython: lazy, like sources.py

    manual = [f"git checkout -b {shlex.quote(branch)}", f"git add {shlex.quote(rel)}",
              f"git commit -m {shlex.quote(message)} -- {shlex.quote(rel)}"]
    try:
        r = git.Repo(repo, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return Outcome(branch, "main", problem=f"{repo} is not in a git repository", commands=manual)
    top = Path(r.working_tree_dir or repo).resolve()
    path = str((repo / rel).resolve().relative_to(top))
    base = "main" if r.head.is_detached else r.active_branch.name
    if branch in r.heads:
        return Outcome(branch, base, problem=f"the branch {branch} exists already",
                       commands=[c.replace(f"-b {shlex.quote(branch)}", f"-b {shlex.quote(branch)}-2") for c in manual])
    try:
        r.git.checkout("-b", branch)
    except git.GitCommandError as e:      # still on the current branch: the commands start by making the new one
        why = (e.stderr or str(e)).strip().splitlines()
        return Outcome(branch, base, problem=f"git could not make the branch: {why[-1] if why else e}",
                       commands=manual)
    try:
        r.git.add("--", path)
        r.git.commit("-m", message, "--only", "--", path)
    except git.GitCommandError as e:
        why = (e.stderr or str(e)).strip().splitlines()
        return Outcome(branch, base, problem=f"git could not commit: {why[-1] if why else e}", commands=manual[1:])
    return Outcome(branch, base, commit=r.head.commit.hexsha)


def github_repo(repo: Path, given: str | None) -> str | None:
    """OWNER/REPO of the pull request: `--github-repo`, else GITHUB_REPOSITORY, else the `origin` remote's URL."""
    if given or os.environ.get("GITHUB_REPOSITORY"):
        return given or os.environ["GITHUB_REPOSITORY"]
    import git

    try:
        url = git.Repo(repo, search_parent_directories=True).remote("origin").url
    except (git.InvalidGitRepositoryError, ValueError):
        return None
    m = _GITHUB_REMOTE.search(url)
    return f"{m.group(1)}/{m.group(2)}" if m else None


def push_and_open(repo: Path, out: Outcome, title: str, body: str, slug: str | None, token: str | None) -> Outcome:
    """Push the branch to `origin` and open the pull request; without a token or OWNER/REPO, the commands."""
    push = f"git push -u origin {shlex.quote(out.branch)}"
    by_hand = [push, f"gh pr create --base {shlex.quote(out.base)} --head {shlex.quote(out.branch)} "
                     f"--title {shlex.quote(title)} --fill"]
    if not token or not slug:
        out.commands = by_hand
        return out
    import git

    try:
        git.Repo(repo, search_parent_directories=True).git.push("-u", "origin", out.branch)
    except (git.GitCommandError, ValueError) as e:
        why = (getattr(e, "stderr", "") or str(e)).strip().splitlines()
        out.problem, out.commands = f"git could not push: {why[-1] if why else e}", by_hand
        return out
    url, problem = open_pull_request(slug, token, out.branch, out.base, title, body)
    out.pull_request, out.problem = url, problem
    if problem:
        out.commands = by_hand[1:]
    return out


def open_pull_request(slug: str, token: str, head: str, base: str, title: str,
                      body: str) -> tuple[str | None, str | None]:
    """(the pull request's URL, None), or (None, what GitHub said)."""
    api = os.environ.get("GITHUB_API_URL", DEFAULT_API).rstrip("/")
    data = json.dumps({"title": title, "head": head, "base": base, "body": body}).encode()
    req = urllib.request.Request(f"{api}/repos/{slug}/pulls", data=data, method="POST", headers={
        "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json", "User-Agent": "fleet-submit"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            reply = json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return None, f"GitHub refused the pull request (HTTP {e.code}): {_message(e.read())}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return None, f"GitHub could not be reached at {api}: {getattr(e, 'reason', e)}"
    url = reply.get("html_url") if isinstance(reply, dict) else None
    return (str(url), None) if url else (None, "GitHub answered without the pull request's html_url")


def _message(raw: bytes) -> str:
    """GitHub's error: its `message` and each `errors[].message` (e.g. 'A pull request already exists')."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
    if not isinstance(doc, dict):
        return str(doc)[:200]
    extra = [str(e.get("message", e)) for e in doc.get("errors", []) if isinstance(e, dict)]
    return "; ".join([str(doc.get("message", "")), *extra]).strip("; ")
