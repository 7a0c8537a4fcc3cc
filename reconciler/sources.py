"""Stage 1, sources: the repository's data files as `{posix path: bytes}`.  EFFECT (reads disk or git).

Only `fleet/`, `policies/` and `jobs/` are read. A git revision is read through gitpython's object database,
without a checkout, so `fleet plan --base origin/main` works in a shallow CI clone that fetched the base.
This is the only module that imports `git`.
"""

from __future__ import annotations

import os
from pathlib import Path

from .load import DATA_DIRS
from .problems import UsageError

ROOTS = tuple(d.rstrip("/") for d in DATA_DIRS)


def read_worktree(repo: Path) -> dict[str, bytes]:
    """Every regular file under the data folders of `repo` (symlinks are not followed)."""
    if not repo.is_dir():
        raise UsageError(f"{repo} is not a directory", "pass --repo with the path of a Fleet repository")
    if not any((repo / r).is_dir() for r in ROOTS):
        raise UsageError(f"{repo} has none of {', '.join(ROOTS)}/",
                         "run Fleet in a Fleet repository, or pass --repo DIR")
    out: dict[str, bytes] = {}
    for root in ROOTS:
        base = repo / root
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in filenames:
                full = Path(dirpath) / name
                if name.startswith(".") or full.is_symlink() or not full.is_file():
                    continue
                out[full.relative_to(repo).as_posix()] = full.read_bytes()
    return out


def read_revision(repo: Path, rev: str) -> dict[str, bytes]:
    """The data files of commit `rev` (any git revision expression), read from the object store."""
    import git  # lazy: only commands that read history pay for it

    try:
        grepo = git.Repo(repo, search_parent_directories=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"{repo} is not a git repository",
                         "run in the repository's clone, or pass --repo DIR") from None
    try:
        commit = grepo.commit(rev)
    except (git.BadName, ValueError, git.GitCommandError):
        raise UsageError(f"unknown git revision `{rev}`",
                         "fetch it first (in CI: `git fetch origin <base> --depth=1`) or check the spelling") from None
    out: dict[str, bytes] = {}
    for root in ROOTS:
        try:
            tree = commit.tree / root
        except KeyError:
            continue
        for item in tree.traverse():
            if not isinstance(item, git.Blob):
                continue
            rel = str(item.path)
            hidden = any(part.startswith(".") for part in rel.split("/"))
            if item.mode & 0o170000 == 0o100000 and not hidden:  # regular files only, not symlinks
                out[rel] = item.data_stream.read()
    return out
