"""Stage 1, sources: the repository's data files as `{posix path: bytes}`.  EFFECT (reads disk or git).

Only `fleet/`, `policies/` and `jobs/` are read. A git revision is read through gitpython's object database,
without a checkout, so `fleet plan --base origin/main` works in a shallow CI clone that fetched the base.
This is the only module that imports `git`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
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
    reader = RevisionReader(repo)
    return reader.files(reader.resolve(rev))


@dataclass(frozen=True, slots=True)
class CommitInfo:
    sha: str
    date: str                       # committer date, ISO 8601
    subject: str
    data_trees: tuple[str, ...]     # the tree sha of each of ROOTS ("" if absent): a hash of every data file


class RevisionReader:
    """Reads the data files of many commits of one repository through one `git cat-file` process.

    Trees and blobs are content-addressed, so a tree's listing and a blob's bytes are read once per sha and
    reused by every commit that shares them: a history where each commit changes one job file reads one new
    blob and a few small trees per commit."""

    def __init__(self, repo: Path) -> None:
        import git  # lazy: only commands that read history pay for it

        self._git = git
        try:
            self.grepo = git.Repo(repo, search_parent_directories=False)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise UsageError(f"{repo} is not a git repository",
                             "run in the repository's clone, or pass --repo DIR") from None
        self._listings: dict[bytes, tuple[tuple[str, bytes], ...]] = {}
        self._blobs: dict[bytes, bytes] = {}

    def resolve(self, rev: str) -> str:
        """The commit sha of `rev`, or a usage error (exit 2) that says how to fetch it."""
        git = self._git
        try:
            return str(self.grepo.commit(rev).hexsha)
        except (git.BadName, ValueError, git.GitCommandError):
            hint = "fetch it first (in CI: `git fetch origin <base> --depth=1`) or check the spelling"
            raise UsageError(f"unknown git revision `{rev}`", hint) from None

    def first_parent(self, count: int, rev: str = "HEAD") -> list[CommitInfo]:
        """The last `count` first-parent commits from `rev`, newest first (fewer in a short or shallow clone)."""
        sha = self.resolve(rev)
        out = []
        for c in self.grepo.iter_commits(sha, first_parent=True, max_count=count):
            trees = []
            for root in ROOTS:
                try:
                    trees.append(str((c.tree / root).hexsha))
                except KeyError:
                    trees.append("")
            subject = str(c.message).split("\n", 1)[0]
            out.append(CommitInfo(str(c.hexsha), c.committed_datetime.isoformat(), subject, tuple(trees)))
        return out

    def files(self, sha: str) -> dict[str, bytes]:
        """The data files of commit `sha`: regular files only (not symlinks), hidden paths skipped."""
        tree = self.grepo.commit(sha).tree
        out: dict[str, bytes] = {}
        for root in ROOTS:
            try:
                sub = tree / root
            except KeyError:
                continue
            for rel, binsha in self._listing(sub.binsha, root):
                blob = self._blobs.get(binsha)
                if blob is None:
                    blob = self._blobs[binsha] = self.grepo.odb.stream(binsha).read()
                out[rel] = blob
        return out

    def _listing(self, binsha: bytes, prefix: str) -> tuple[tuple[str, bytes], ...]:
        key = binsha + prefix.encode()
        found = self._listings.get(key)
        if found is None:
            entries: list[tuple[str, bytes]] = []
            from git.objects.fun import tree_entries_from_data

            for sha, mode, name in tree_entries_from_data(self.grepo.odb.stream(binsha).read()):
                if name.startswith("."):
                    continue
                rel = f"{prefix}/{name}"
                if mode & 0o170000 == 0o040000:
                    entries.extend(self._listing(sha, rel))
                elif mode & 0o170000 == 0o100000:  # regular files only, not symlinks or submodules
                    entries.append((rel, sha))
            found = self._listings[key] = tuple(entries)
        return found


def changed_paths(repo: Path, rev: str) -> tuple[str, ...]:
    """Every path of the whole tree that differs between commit `rev` and the work tree, sorted: tracked files
    added, edited or deleted since `rev`, and untracked files that `.gitignore` does not exclude.

    `fleet check` needs it for the files outside the data folders (workflows, CODEOWNERS, the tool's own code),
    which `read_worktree` and `read_revision` do not read."""
    reader = RevisionReader(repo)
    sha = reader.resolve(rev)
    g = reader.grepo.git
    tracked = g.diff("--name-only", "--no-renames", "-z", sha, "--")
    untracked = g.ls_files("--others", "--exclude-standard", "-z")
    return tuple(sorted({p for p in (*tracked.split("\0"), *untracked.split("\0")) if p}))
