"""Stage 1, sources: the repository's data files as `{posix path: bytes}`.  EFFECT (reads disk or git).

Only the data folders (`fleet/`, `policies/`, `jobs/`, `robots/`, `deployments/`) are read. A git revision is
read through gitpython's object database, without a checkout, so `fleet plan --base origin/main` works in a
shallow CI clone that fetched the base.
This is the only module that imports `git`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .load import DATA_DIRS, Unreadable
from .problems import UsageError
from .yamlio import MAX_FILE_BYTES

ROOTS = tuple(d.rstrip("/") for d in DATA_DIRS)
MAX_DEPTH = 16
"""Folders nested deeper than this under a data folder are not read (the layout needs two levels)."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC   # a FIFO must not block the open
_LINK_HINT = ("replace the link with the file or folder itself: Fleet reads nothing through a link, which "
              "could point outside the repository")


def _link(target: str) -> Unreadable:
    return Unreadable(f"symlink:{target}", f"is a symbolic link (to {target!r}); Fleet reads only regular files "
                      "and folders inside the repository", _LINK_HINT)


def _too_big(size: int, identity: str) -> Unreadable:
    return Unreadable(identity, f"file is {size:,} bytes, over the {MAX_FILE_BYTES:,}-byte limit (not read)",
                      "split it: one cluster per file in fleet/clusters/, one job per file in jobs/<team>/")


def _not_folder(root: str, what: str) -> Unreadable:
    return Unreadable(f"not-a-folder:{what}", f"is {what}, but {root}/ must be a folder",
                      f"make {root} a folder of YAML files (DESIGN.md section 1)")


def _too_deep(rel: str) -> Unreadable:
    return Unreadable(f"too-deep:{rel}", f"folders nest deeper than {MAX_DEPTH} levels here; not read",
                      "keep the layout: fleet/clusters/<name>.yaml, jobs/<team>/<name>.yaml")


def _hidden(rel: str) -> Unreadable | None:
    """A hidden name (a leading dot) is not read; one named like a YAML file gets a warning, so that a document
    renamed so (`.placement.yaml`) is not lost without a word, while a draft kept so (`.draft.yaml`) blocks
    nothing. Other hidden names (`.gitkeep`) pass unseen."""
    if not rel.endswith((".yaml", ".yml")):
        return None
    return Unreadable(f"hidden:{rel}", "is a hidden file (its name starts with a dot); Fleet does not read it",
                      "rename it without the leading dot so that it is read (a draft may stay so), or move it out "
                      "of the data folders", warn=True)


_NESTED = ("is a git repository inside this one (a submodule or a nested clone), not a folder of this "
           "repository's files", "remove it: Fleet reads only files of this repository")


def _special(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"))
    return next((what for test, what in kinds if test(mode)), "a special file")


def read_worktree(repo: Path) -> dict[str, bytes]:
    """Every regular file under the data folders of `repo`, read through folder descriptors that never follow
    a symbolic link (a link, a FIFO or a device is an `Unreadable` entry, never opened or followed), each
    file's size checked before it is read."""
    if not repo.is_dir():
        raise UsageError(f"{repo} is not a directory", "pass --repo with the path of a Fleet repository")
    top = os.open(repo, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        present: dict[str, os.stat_result] = {}
        for root in ROOTS:
            try:
                present[root] = os.stat(root, dir_fd=top, follow_symlinks=False)
            except FileNotFoundError:
                continue
        if not present:
            raise UsageError(f"{repo} has none of {', '.join(ROOTS)}/",
                             "run Fleet in a Fleet repository, or pass --repo DIR")
        out: dict[str, bytes] = {}
        for root, st in present.items():
            if stat.S_ISDIR(st.st_mode):
                fd = os.open(root, _DIR, dir_fd=top)
                try:
                    _walk(fd, root, 1, out)
                finally:
                    os.close(fd)
            elif stat.S_ISLNK(st.st_mode):
                out[f"{root}/"] = _link(os.readlink(root, dir_fd=top))
            else:
                out[f"{root}/"] = _not_folder(root, _special(st.st_mode))
        return out
    finally:
        os.close(top)


def _walk(folder: int, prefix: str, depth: int, out: dict[str, bytes]) -> None:
    """Read the folder open as `folder` (named `prefix`) into `out`; hidden names are skipped (`_hidden`), and a
    folder holding `.git` (a checked-out submodule, a clone) is one `Unreadable` entry, as a revision's gitlink is."""
    with os.scandir(folder) as it:   # each entry's type as the listing gives it: no stat per file
        listed = list(it)
    if any(e.name == ".git" for e in listed):
        out[f"{prefix}/" if depth == 1 else prefix] = Unreadable(f"nested:{prefix}", *_NESTED)   # as `files` names it
        return
    for e in listed:    # a hidden regular file named like a YAML file is told of (not a link: an editor's lock)
        if e.name.startswith(".") and e.is_file(follow_symlinks=False) and (hidden := _hidden(f"{prefix}/{e.name}")):
            out[f"{prefix}/{e.name}"] = hidden
    entries = sorted((e.name, _kind(e)) for e in listed if not e.name.startswith("."))
    for name, mode in entries:
        rel = f"{prefix}/{name}"
        if stat.S_ISDIR(mode):
            if depth >= MAX_DEPTH:
                out[rel] = _too_deep(rel)
                continue
            if name.endswith((".yaml", ".yml")):        # else an empty one passes unseen where a file was meant
                out[rel] = Unreadable(f"folder:{rel}", "is a folder named like a YAML file; no document is read "
                                      "from it", "replace it with the file you meant, or remove or rename the folder")
            fd = os.open(name, _DIR, dir_fd=folder)
            try:
                _walk(fd, rel, depth + 1, out)
            finally:
                os.close(fd)
        elif stat.S_ISLNK(mode):
            out[rel] = _link(os.readlink(name, dir_fd=folder))
        elif stat.S_ISREG(mode):
            out[rel] = _read_file(folder, name)
        else:
            out[rel] = Unreadable(f"special:{_special(mode)}", f"is {_special(mode)}, not a file "
                                  "(not opened)", "remove it: Fleet reads only regular files")


def _kind(entry: os.DirEntry[str]) -> int:
    """The file type bits of `entry` (not following a link): a folder, a link or a regular file as the listing
    says (no system call where the file system gives the type, as most do; `_read_file` checks a file's type
    again on the open descriptor), anything else from `lstat`."""
    if entry.is_dir(follow_symlinks=False):
        return stat.S_IFDIR
    if entry.is_symlink():
        return stat.S_IFLNK
    if entry.is_file(follow_symlinks=False):
        return stat.S_IFREG
    return entry.stat(follow_symlinks=False).st_mode


def _read_file(folder: int, name: str) -> bytes:
    """A regular file's bytes, its size checked (again, on the open file) before anything is read."""
    fd = os.open(name, _FILE, dir_fd=folder)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):               # replaced between the listing and the open
        os.close(fd)
        return Unreadable(f"special:{_special(st.st_mode)}", f"is {_special(st.st_mode)}, not a file",
                          "remove it: Fleet reads only regular files")
    try:   # os.read on the descriptor: a buffered file object per file was a third of reading 10,000 files
        if st.st_size > MAX_FILE_BYTES:
            return _too_big(st.st_size, f"large:{st.st_size}:{st.st_mtime_ns}")
        data = _read_up_to(fd, st.st_size + 1, b"")   # ask for what stat said (read(n) allocates n bytes first)
        if len(data) > st.st_size:                     # it grew meanwhile
            data = _read_up_to(fd, MAX_FILE_BYTES + 1, data)
    finally:
        os.close(fd)
    return data if len(data) <= MAX_FILE_BYTES else _too_big(len(data), f"large:{len(data)}")


def _read_up_to(fd: int, limit: int, data: bytes) -> bytes:
    """`data` and what follows it in `fd`, up to `limit` bytes in all or the end of the file."""
    while len(data) < limit:
        chunk = os.read(fd, limit - len(data))
        if not chunk:
            break
        data += chunk
    return data


def read_revision(repo: Path, rev: str) -> dict[str, bytes]:
    """The data files of commit `rev` (any git revision expression), read from the object store."""
    reader = RevisionReader(repo)
    return reader.files(reader.resolve(rev))


def commit_of(repo: Path, rev: str, *, required: bool) -> str | None:
    """The commit sha of `rev` in the git repository `repo`. When `repo` is not a git repository (or, for
    HEAD, has no commit yet): None unless `required`, else the usage error `RevisionReader` gives."""
    try:
        return RevisionReader(repo).resolve(rev)
    except UsageError:
        if required:
            raise
        return None


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
        try:
            import git  # lazy: only commands that read history pay for it
        except ImportError:   # gitpython refuses to import when it finds no `git` program (GIT_PYTHON_REFRESH)
            raise UsageError("cannot read git history: the `git` program is not installed or not on PATH",
                             "install git (or set GIT_PYTHON_GIT_EXECUTABLE to it); commands without --base, --rev "
                             "or --history need no git") from None

        self._git = git
        try:
            self.grepo = git.Repo(repo, search_parent_directories=False)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise UsageError(f"{repo} is not a git repository",
                             "run in the repository's clone, or pass --repo DIR") from None
        self._listings: dict[bytes, tuple[tuple[str, bytes, int], ...]] = {}
        self._blobs: dict[bytes, bytes] = {}

    def resolve(self, rev: str) -> str:
        """The commit sha of `rev`, or a usage error (exit 2) that says how to fetch it. The commit object itself
        is read: in a shallow clone `HEAD~1` names a parent whose object is not there."""
        git = self._git
        if not rev.strip():
            raise UsageError("the git revision is empty", "name a revision, e.g. origin/main or HEAD~1")
        try:
            commit = self.grepo.commit(rev)
            commit.tree.binsha   # noqa: B018  (reads the commit object: missing in a shallow clone)
            return str(commit.hexsha)
        except (git.BadName, git.BadObject, ValueError, git.GitCommandError):
            hint = ("fetch it first (in CI: `git fetch origin <base> --depth=1`; in a shallow clone: "
                    "`git fetch --deepen=1` for HEAD~1) or check the spelling")
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
        """The data files of commit `sha`. Each tree entry is taken by its mode: folders are listed, regular
        files read (their size checked first), and a symbolic link, a submodule, or a file where a data folder
        belongs is an `Unreadable` entry: never content, never listed as a folder. Hidden paths are skipped, but for
        those named like YAML files (`_hidden`)."""
        git = self._git
        try:
            top = {name: (binsha, mode) for binsha, mode, name in self._entries(self.grepo.commit(sha).tree.binsha)}
            out: dict[str, bytes] = {}
            for root in ROOTS:
                if root not in top:
                    continue
                binsha, mode = top[root]
                if mode & 0o170000 == 0o040000:
                    for rel, entry_sha, entry_mode in self._listing(binsha, root, 1):
                        out[rel] = self._entry(entry_sha, entry_mode, rel)
                else:
                    entry = self._entry(binsha, mode, root)
                    out[f"{root}/"] = entry if isinstance(entry, Unreadable) else _not_folder(root, "a file")
            return out
        except (ValueError, git.BadObject, git.GitCommandError) as e:
            raise UsageError(f"cannot read the files of commit {sha[:12]}: {e}",
                             "the clone lacks some of its objects: fetch it fully "
                             "(`git fetch --unshallow`, or without --filter)") from None

    def _entry(self, binsha: bytes, mode: int, rel: str) -> bytes:
        kind = mode & 0o170000
        if mode == -2:
            hidden = _hidden(rel)
            assert hidden is not None
            return hidden
        if mode < 0:
            return _too_deep(rel)
        if kind == 0o120000:
            target = self._blob(binsha, 4096)
            return _link("(a long path)" if isinstance(target, Unreadable) else target.decode("utf-8", "replace"))
        if kind == 0o160000:
            return Unreadable(f"submodule:{binsha.hex()}", "is a git submodule (a commit of another repository), "
                              "not a file", "remove the submodule: Fleet reads only files of this repository")
        if kind != 0o100000:
            return Unreadable(f"mode:{mode:o}:{binsha.hex()}", f"has git mode {mode:o}, not a regular file",
                              "commit it as a regular file")
        return self._blob(binsha, MAX_FILE_BYTES)

    def _blob(self, binsha: bytes, limit: int) -> bytes:
        """A blob's bytes, its size read from the object header first: one over `limit` is not read."""
        blob = self._blobs.get(binsha)
        if blob is None:
            size = self.grepo.odb.info(binsha).size
            if size > limit:
                return _too_big(size, f"blob:{binsha.hex()}")
            blob = self._blobs[binsha] = self.grepo.odb.stream(binsha).read()
        return blob

    def _entries(self, binsha: bytes) -> list[tuple[bytes, int, str]]:
        from git.objects.fun import tree_entries_from_data

        return list(tree_entries_from_data(self.grepo.odb.stream(binsha).read()))

    def _listing(self, binsha: bytes, prefix: str, depth: int) -> tuple[tuple[str, bytes, int], ...]:
        """(path, sha, mode) of every non-folder entry under the tree `binsha`, recursively."""
        key = binsha + prefix.encode()
        found = self._listings.get(key)
        if found is None:
            entries: list[tuple[str, bytes, int]] = []
            for sha, mode, name in self._entries(binsha):
                if name.startswith("."):
                    if mode & 0o170000 == 0o100000 and _hidden(f"{prefix}/{name}") is not None:
                        entries.append((f"{prefix}/{name}", sha, -2))
                    continue
                rel = f"{prefix}/{name}"
                if mode & 0o170000 != 0o040000:
                    entries.append((rel, sha, mode))
                elif depth >= MAX_DEPTH:
                    entries.append((rel, sha, -1))
                else:
                    entries.extend(self._listing(sha, rel, depth + 1))
            found = self._listings[key] = tuple(entries)
        return found


def changed_paths(repo: Path, rev: str) -> tuple[str, ...]:
    """Every path of the whole tree that differs between commit `rev` and the work tree, sorted: tracked files
    added, edited or deleted since `rev`, and untracked files that `.gitignore` does not exclude.

    `fleet check` needs it for the files outside the data folders (workflows, CODEOWNERS, the tool's own code),
    which `read_worktree` and `read_revision` do not read, and for what those two skip inside them (hidden
    names, submodules). The index counts too: a submodule (gitlink) that is not checked out is an empty folder,
    and git's diff against the work tree does not list it, only the one against the index does."""
    reader = RevisionReader(repo)
    sha = reader.resolve(rev)
    g = reader.grepo.git
    tracked = g.diff("--name-only", "--no-renames", "-z", sha, "--")
    staged = g.diff("--cached", "--name-only", "--no-renames", "-z", sha, "--")
    untracked = g.ls_files("--others", "--exclude-standard", "-z")
    return tuple(sorted({p for out in (tracked, staged, untracked) for p in out.split("\0") if p}))
