"""Every file Fleet writes, and the few of its own it reads back, without following a planted link. EFFECT (files).

A pull request controls what is in the repository and may leave things in an output folder: a symbolic link
where Fleet expects a folder (`.fleet -> /home/admin`), a pre-placed temporary file, a link or a directory
where Fleet writes a file. So:

- a folder is opened once (`Folder.open`: the path the user named, links in it followed, as the shell would)
  and every name under it is resolved from that folder's descriptor, one component at a time, with
  O_NOFOLLOW|O_DIRECTORY: a link or a non-folder on the way is an error, never followed out of the folder;
- `Folder.write` (`write_many`) writes a new temporary file beside the target (O_CREAT|O_EXCL|O_NOFOLLOW,
  a random name, so a planted `.tmp` is never opened), flushes it to disk and renames it over the target: a
  reader sees the old file or the new one, never half of one, and a failure leaves no temporary file behind.
  A rename replaces a link itself, not what it points to; a directory in the target's place is an error;
- `Folder.read` opens without following a link and without blocking (a FIFO would hang a plain `open`),
  and reads only a regular file no bigger than the limit it is given.
Every failure is a `UsageError` (exit 2) that names the path and says how to fix it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType

from .problems import UsageError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _why(e: OSError, link: bool = False) -> str:
    if link or e.errno in (errno.ELOOP, errno.EMLINK):
        return "is a symbolic link, which Fleet does not follow"
    if e.errno == errno.ENOTDIR:
        return "is not a directory"
    if e.errno == errno.EISDIR:
        return "is a directory, not a file"
    if e.errno == errno.ENOTEMPTY:
        return "is a non-empty directory, not a file"
    return os.strerror(e.errno or 0).lower() if e.errno else str(e)


def _is_link(name: str, folder: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _error(path: Path, e: OSError, hint: str = "", *, link: bool = False) -> UsageError:
    return UsageError(f"cannot write {path}: {_why(e, link)}",
                      hint or "remove or rename what is in the way (links are never followed), or write elsewhere")


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"not a relative path inside the folder: {rel!r}")
    return parts


class Folder:
    """An open folder: names under it are resolved from its descriptor, never through a symbolic link."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: Path, *, create: bool = True) -> Folder:
        """The folder the user named (created if missing and `create`)."""
        try:
            if create:
                path.mkdir(parents=True, exist_ok=True)
            return cls(os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), path)
        except FileExistsError:
            raise UsageError(f"{path} is a file, not a directory",
                             "give a directory (it is created if missing)") from None
        except OSError as e:
            raise _error(path, e, "give a directory Fleet may write in") from None

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def sub(self, rel: str, *, create: bool = True) -> Folder:
        """The folder `rel` (`a/b`) under this one, created if missing and `create`; the caller closes it."""
        fd, path = os.dup(self.fd), self.path
        try:
            for part in _parts(rel):
                path = path / part
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, _DIR, dir_fd=fd)
                os.close(fd)
                fd = child
        except OSError as e:
            link = _is_link(path.name, fd)   # O_NOFOLLOW|O_DIRECTORY on a link says ENOTDIR on Linux
            os.close(fd)
            raise _error(path, e, link=link) from None
        return Folder(fd, path)

    def write(self, rel: str, data: str | bytes) -> None:
        """Replace the file `rel` atomically (module docstring); its folders are created as needed."""
        self.write_many({rel: data})

    def write_many(self, files: Mapping[str, str | bytes]) -> None:
        """Replace each file of `files` atomically: every temporary file is written first, then all are
        flushed to disk at once (one fsync of one file, `os.sync` for many: a render's thousand fsyncs
        took seconds), then each is renamed over its target. On any failure no temporary file is left."""
        staged: list[tuple[str, str]] = []       # (rel, temporary name beside it)
        rel = ""
        try:
            for rel, data in files.items():
                raw = data.encode() if isinstance(data, str) else data
                staged.append((rel, self._stage(rel, raw, sync=len(files) == 1)))
            for rel, _ in staged:       # a folder where a file goes fails its rename: before any rename, not
                with self._parent(rel) as (fd, name), contextlib.suppress(FileNotFoundError):   # after half
                    if stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if len(files) > 1:
                os.sync()
            while staged:
                rel, tmp = staged[-1]
                with self._parent(rel) as (fd, name):
                    os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
                staged.pop()
        except BaseException as e:
            for staged_rel, tmp in staged:
                with contextlib.suppress(OSError, UsageError), self._parent(staged_rel) as (fd, _):
                    os.unlink(tmp, dir_fd=fd)
            if isinstance(e, OSError):
                raise _error(self.path / rel, e) from None
            raise
        # Folders are not fsynced: a rename lost in a crash leaves the old file, still whole.

    @contextlib.contextmanager
    def _parent(self, rel: str) -> Iterator[tuple[int, str]]:
        """(descriptor of the folder of `rel`, reached without following a link and created if missing; name)."""
        *folders, name = _parts(rel)
        if not folders:
            yield self.fd, name
            return
        with self.sub("/".join(folders)) as parent:
            yield parent.fd, name

    def _stage(self, rel: str, raw: bytes, *, sync: bool) -> str:
        """A new temporary file beside `rel` holding `raw` (O_EXCL|O_NOFOLLOW: never a planted one); its name."""
        with self._parent(rel) as (folder, name):
            while True:
                tmp = f".{name}.{secrets.token_hex(8)}.tmp"
                try:
                    fd = os.open(tmp, _CREATE, 0o666, dir_fd=folder)
                    break
                except FileExistsError:
                    continue
                except OSError as e:
                    raise _error(self.path / rel, e) from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
                if sync:
                    f.flush()
                    os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError, UsageError), self._parent(rel) as (folder, _):
                os.unlink(tmp, dir_fd=folder)
            raise
        return tmp

    def read(self, rel: str, limit: int) -> bytes | None:
        """The bytes of the regular file `rel`; None if it is missing, not a regular file (a link, a FIFO, a
        device, a folder), unreadable or over `limit` bytes. Never blocks, never follows a link."""
        *folders, name = _parts(rel)
        try:
            parent = self.sub("/".join(folders), create=False) if folders else None
        except UsageError:
            return None
        try:
            fd = os.open(name, _READ, dir_fd=(parent or self).fd)
        except OSError:
            return None
        finally:
            if parent is not None:
                parent.close()
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:   # before fdopen, which refuses a folder
            os.close(fd)
            return None
        with os.fdopen(fd, "rb") as f:
            data = f.read(st.st_size + 1)   # read(n) allocates n bytes first: ask for what stat said
            if len(data) > st.st_size:       # it grew meanwhile
                data += f.read(limit + 1 - len(data))
        return data if len(data) <= limit else None

    def kind(self, name: str) -> str:
        """`absent`, `file` (a regular file), `link` or `other`, without following a link."""
        try:
            mode = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return "absent"
        return "file" if stat.S_ISREG(mode) else "link" if stat.S_ISLNK(mode) else "other"

    def is_empty(self) -> bool:
        return not os.listdir(self.fd)

    def remove(self, rel: str) -> bool:
        """Delete the regular file `rel` (not a link's target, not a folder) and the folders that leaves
        empty, up to this one. False, touching nothing, if `rel` is anything else or goes through a link."""
        try:
            *folders, name = _parts(rel)
        except ValueError:
            return False
        chain = [os.dup(self.fd)]
        try:
            for part in folders:
                chain.append(os.open(part, _DIR, dir_fd=chain[-1]))
            if not stat.S_ISREG(os.stat(name, dir_fd=chain[-1], follow_symlinks=False).st_mode):
                return False
            os.unlink(name, dir_fd=chain[-1])
            for depth in range(len(folders), 0, -1):
                if os.listdir(chain[depth]):
                    break
                os.rmdir(folders[depth - 1], dir_fd=chain[depth - 1])
            return True
        except OSError:
            return False
        finally:
            for fd in chain:
                os.close(fd)


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a directory"))
    return next((what for test, what in kinds if test(mode)), "not a regular file")


class UnreadableFile(UsageError):
    """`read_file`'s error: `reason` says why without the path (`is a FIFO (named pipe), ...`)."""

    def __init__(self, path: Path, what: str, reason: str, hint: str) -> None:
        super().__init__(f"cannot read {what} {path}: {reason}", hint)
        self.reason = reason


def read_file(path: Path, limit: int, what: str, hint: str) -> bytes:
    """The bytes of the regular file the user named (`--observed FILE`, a file of `--specs DIR`), read by the
    repository's rules: the folders on the way are followed as the shell would, the file itself is opened
    without following a link (it could point anywhere: /dev/zero, a file outside) and without blocking (a FIFO
    would hang a plain open), must be a regular file, and is read only if it is at most `limit` bytes (its size
    checked before reading, and again while reading, if it grows). Every failure is an `UnreadableFile`
    (a `UsageError`, exit 2) naming the file, with `hint`."""
    try:
        fd = os.open(path, _READ)
    except OSError as e:
        why = _why(e, e.errno == errno.ELOOP) if e.errno in (errno.ELOOP, errno.EISDIR) else (e.strerror or str(e))
        raise UnreadableFile(path, what, why, hint) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(path, what, f"it is {_kind(st.st_mode)}; Fleet reads only regular files", hint)
        if st.st_size > limit:
            raise UnreadableFile(path, what, f"it is {st.st_size:,} bytes, over the {limit:,}-byte limit (not read)",
                                 hint)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnreadableFile(path, what, f"it grew past the {limit:,}-byte limit while it was read", hint)
        return b"".join(chunks)
    except OSError as e:
        raise UnreadableFile(path, what, e.strerror or str(e), hint) from None
    finally:
        os.close(fd)


def write_file(path: Path, data: str | bytes) -> None:
    """Write the file the user named (`--out FILE`, or a file in a folder the user named) atomically."""
    with Folder.open(path.parent) as folder:
        folder.write(path.name, data)


def append_line(path: Path, line: str) -> None:
    """Append one line to a journal the user named (`fleet reconcile --log FILE`): opened without following a
    link, created if missing, written with one `write` in append mode (O_APPEND), so concurrent lines never
    interleave within a line and a crash loses at most the line being written."""
    data = (line.rstrip("\n") + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise _error(path, e, "name a regular file in a folder you can write", link=e.errno == errno.ELOOP) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path} is not a regular file", "name a regular file for the log")
        os.write(fd, data)
    finally:
        os.close(fd)


RENDER_MANIFEST = ".fleet-render"
"""Lists the files `fleet render` wrote into --out, so a later render removes only its own stale files."""
MANIFEST_LIMIT = 16 << 20


def write_tree(out: Path, files: dict[str, str], *, repo: Path, force: bool = False) -> tuple[int, int]:
    """Write `files` under `out` (each atomically), then remove the files an earlier render wrote that are no
    longer rendered, and the folders that leaves empty. Anything Fleet did not write is never touched.

    `out` must not be `/`, the home folder or the repository; a non-empty folder must hold a `.fleet-render`
    (a regular file: Fleet wrote it) unless `force`. A manifest entry is removed only if it is a regular file
    reached without a link, inside `out`."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory", "give a directory (it is created if missing)")
    where = out.resolve()
    for name, place in (("the root folder", Path("/")), ("your home folder", Path.home()),
                        ("the repository", repo)):
        if where == place.resolve():
            raise UsageError(f"--out {out} is {name}; render writes and deletes files there",
                             "give a folder of its own, e.g. --out rendered")
    with Folder.open(out) as folder:
        kind = folder.kind(RENDER_MANIFEST)
        before: set[str] = set()
        if kind == "file":
            listed = folder.read(RENDER_MANIFEST, MANIFEST_LIMIT)
            before = set((listed or b"").decode("utf-8", "replace").splitlines())
        elif not force and (kind != "absent" or not folder.is_empty()):
            what = "is not a regular file" if kind != "absent" else "is missing"
            raise UsageError(f"--out {out} is not empty and was not written by `fleet render` "
                             f"(its {RENDER_MANIFEST} {what})",
                             "give an empty or new folder, or pass --force to write into this one")
        folder.write_many(files)
        stale = sorted(before - set(files))
        removed = sum(folder.remove(rel) for rel in stale if not rel.startswith("/"))
        folder.write(RENDER_MANIFEST, "".join(f"{rel}\n" for rel in sorted(files)))
    return len(files), removed
