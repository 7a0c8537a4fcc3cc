"""`fleet cost --history N`: the cost of each of the last N first-parent commits.  EFFECT (git, cache files).

Each commit's point is cached under `.fleet/cache/history/` by the content hash of its inputs: the git tree
shas of `fleet/`, `policies/` and `jobs/` (git's Merkle hash of every data file's bytes and name), the
packaged catalog's bytes and Fleet's own code (a hash of every file of the `reconciler` package, so any
change to the code that computes a point recomputes it, whatever the version string says). Equal inputs give
an equal point (`cost.history` is pure), so a cached point is reused for any commit with the same data.
Within a run, each process also reuses the last point it computed for a commit that changes only jobs'
`duration_hours`, when no question its plan asked of those durations gets another answer (history_reuse.py).

The cache is an optimisation, never trusted: the repository (and so `.fleet/`) is whatever a pull request
left there. Entries are read and written through `safeio` (no link followed, no FIFO opened, at most
`ENTRY_LIMIT` bytes, written atomically); an entry that is missing, not a regular file, too big, not JSON,
too deeply nested or not a valid point is recomputed; a cache folder that cannot be written (read-only, or
a link) only means nothing is cached. The folder holds a `.gitignore` of `*`, so it is never committed.

A commit whose files cannot be read (objects missing from the clone) or whose point fails is an error point
of the report (errors = 1, not cached), not a failed report; so are the points a worker process had left
when it died. Ctrl-C stops the worker processes at once: they are born with SIGINT blocked, then ignore it (the
terminal sends it to the whole process group, and a worker interrupted while starting printed a traceback
or hung the pool), and the parent terminates them.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager, suppress
from importlib import resources
from pathlib import Path

from . import sources
from .catalog import Catalog
from .cost.history import HistoryPoint
from .history_reuse import Reuse
from .load import ParseCache
from .problems import FleetError
from .safeio import Folder

CACHE = Path(".fleet") / "cache" / "history"
ENTRY_LIMIT = 1 << 16
"""A point is a few hundred bytes (one amount per team): anything bigger is not a point."""


@functools.cache
def code_hash() -> bytes:
    """A hash of every file of the installed `reconciler` package (its code, catalog and templates)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            rel = path.relative_to(root).as_posix().encode()
            data = path.read_bytes()
            h.update(len(rel).to_bytes(8, "big") + rel + len(data).to_bytes(8, "big") + data)
    return h.digest()


def input_key(data_trees: tuple[str, ...], catalog_bytes: bytes) -> str:
    h = hashlib.sha256()
    for part in (code_hash(), hashlib.sha256(catalog_bytes).digest(), *(t.encode() for t in data_trees)):
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


PARALLEL_FROM = 32
"""Points to compute before a process pool pays for itself (starting a worker costs about a second)."""
GUIDE, LAST_CHUNK = 3, 8
"""Chunks shrink with the work left (guided scheduling): each is the points left over `workers * GUIDE`, at least
`LAST_CHUNK`. A worker takes the next chunk when it is done, so the last one runs alone while the others wait
(8 points at the end, not 62 as with 8 equal chunks a worker); and a chunk's first commit is computed afresh (its
worker's last point is from another chunk, history_reuse.py) and parses the files changed since (`_WORKER_PARSES`),
so long chunks first: 23 chunks for 1,000 points, not 64."""


def _chunk_sizes(n: int, workers: int) -> list[int]:
    sizes: list[int] = []
    while n > 0:
        sizes.append(min(n, max(LAST_CHUNK, n // (workers * GUIDE))))
        n -= sizes[-1]
    return sizes


def collect(repo: Path, count: int, catalog: Catalog, *, rev: str = "HEAD") -> tuple[HistoryPoint, ...]:
    """The points of the last `count` first-parent commits from `rev`, oldest first.

    1. List the commits and the content key of each; 2. take every key that is already cached (once per
    key: commits with equal data share a point); 3. compute the rest, in worker processes when there are many
    (each point is independent and `cost_point` is pure, so the result does not depend on how they are
    spread), and cache them; 4. stamp each commit's own sha, date and subject on its point."""
    reader = sources.RevisionReader(repo)
    catalog_bytes = (resources.files("reconciler.catalog") / "catalog.yaml").read_bytes()
    infos = list(reversed(reader.first_parent(count, rev)))
    keys = [input_key(info.data_trees, catalog_bytes) for info in infos]
    points: dict[str, HistoryPoint] = {}
    todo: dict[str, sources.CommitInfo] = {}
    with _cache(repo) as cache:
        for info, key in zip(infos, keys, strict=True):
            if key not in points and key not in todo:
                cached = _read(cache, f"{key}.json")
                if cached is None:
                    todo[key] = info
                else:
                    points[key] = cached
        jobs: list[Job] = [(i.sha, i.date, i.subject, None) for i in todo.values()]
        read = functools.partial(_with_files, reader)
        for key, job, point in zip(todo, jobs, _compute(jobs, catalog, read), strict=True):
            if point is None:      # unreadable or failed: an error point, recomputed next time
                point = HistoryPoint(job[0], job[1], job[2], 1)
            else:
                _write(cache, f"{key}.json", json.dumps(point.to_dict(), sort_keys=True))
            points[key] = point
    return tuple(dataclasses.replace(points[key], commit=info.sha, date=info.date, subject=info.subject)
                 for info, key in zip(infos, keys, strict=True))


def _with_files(reader: sources.RevisionReader, job: Job) -> Job:
    """The job with its commit's files (None if they cannot be read)."""
    try:
        return (*job[:3], reader.files(job[0]))
    except FleetError:
        return (*job[:3], None)


Job = tuple[str, str, str, "dict[str, bytes] | None"]
_WORKER_CATALOG: list[Catalog] = []
_WORKER_PARSES = ParseCache()   # a worker's chunks are runs of consecutive commits: most files parse once
_WORKER_REUSE = Reuse()         # and most commits change one thing: a duration change often decides nothing


def _point(job: Job, catalog: Catalog, cache: ParseCache | None = None,
           reuse: Reuse | None = None) -> HistoryPoint | None:
    """The commit's point; None if its files could not be read or its point failed (a bug shows as an error
    point of that commit, not as a failed report). `cache`: the parses of the commits computed before it in
    this process (load.ParseCache: by each file's bytes); `reuse`: the last point computed in this process,
    reused when the commit changes only durations that no decision of it read (history_reuse.py)."""
    sha, date, subject, files = job
    if files is None:
        return None
    try:
        return (reuse or Reuse(tracking=False)).point(sha, date, subject, files, catalog, cache)
    except Exception:  # one bad commit must not fail the report
        return None


def _compute(jobs: list[Job], catalog: Catalog,
             read: Callable[[Job], Job] = lambda job: job) -> list[HistoryPoint | None]:
    """`_point` of every job, in order; in a pool of worker processes when there are many. `read(job)`: the
    job with its files, called just before the job is computed or sent to a worker (the workers start on
    the first chunks while the parent reads the commits of the next). A worker that dies (killed, or a crash
    in a C extension) makes the points it had left None: error points, not a hang and not a failed report."""
    workers = min(os.cpu_count() or 1, 8, max(1, len(jobs) // PARALLEL_FROM))
    if workers == 1:
        cache, reuse = ParseCache(), Reuse()
        return [_point(read(job), catalog, cache, reuse) for job in jobs]
    chunks, at = [], 0
    for size in _chunk_sizes(len(jobs), workers):
        chunks.append(jobs[at:at + size])
        at += size
    pool = _pool(workers, catalog)
    try:
        futures = []
        for chunk in chunks:
            ready = [read(job) for job in chunk]
            with _sigint_blocked():     # workers start during submit
                futures.append(_submit(pool, ready))
        out: list[HistoryPoint | None] = []
        broken = False
        for chunk, future in zip(chunks, futures, strict=True):
            if future is None or broken:    # a dead worker: what the others finished counts, nothing is awaited
                found = future.result() if future is not None and future.done() and not future.cancelled() \
                    and future.exception() is None else None
            else:
                found = _result(pool, future)
            broken = broken or found is None
            out += found if found is not None else [None] * len(chunk)
    except BaseException:               # Ctrl-C above all: stop the workers now, do not wait for their work
        _stop(pool)
        raise
    if broken:
        _stop(pool)
    else:
        pool.shutdown()
    return out


def _result(pool: ProcessPoolExecutor, future: Future[list[HistoryPoint | None]]) -> list[HistoryPoint | None] | None:
    """The chunk's points; None when a worker died. The pool says so itself (BrokenProcessPool) once its manager
    thread sees the dead worker; but a worker killed just after it was started can be missed (the manager waits on
    the workers it knew of when it last woke, and the dead one took chunks with it: CI hung for a minute, then
    the test killed it), so the workers are looked at every second too."""
    while True:
        try:
            return future.result(timeout=1.0)
        except BrokenProcessPool:
            return None
        except TimeoutError:
            if any(p.exitcode is not None for p in list((pool._processes or {}).values())):
                return None


def _stop(pool: ProcessPoolExecutor) -> None:
    """Stop the workers now, without waiting for their work."""
    for process in list((pool._processes or {}).values()):
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _submit(pool: ProcessPoolExecutor, chunk: list[Job]) -> Future[list[HistoryPoint | None]] | None:
    """The chunk's future; None when the pool broke before it was submitted (a worker died while the others
    were still being started, as on a loaded machine): its points are error points like the rest."""
    try:
        return pool.submit(_worker_chunk, chunk)
    except BrokenProcessPool:
        return None


def _pool(workers: int, catalog: Catalog) -> ProcessPoolExecutor:
    """Spawned, not forked: the parent holds git subprocesses and threads."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                               initargs=(catalog,))


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked while worker processes are started: they inherit the mask through exec, so they are born
    deaf to it (until `_init_worker` ignores it), and a Ctrl-C meanwhile is held, then delivered here."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)   # as the caller had it: blocked stays blocked


def _init_worker(catalog: Catalog) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # the parent handles Ctrl-C: it terminates the workers
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _WORKER_CATALOG.append(catalog)


def _worker_chunk(chunk: list[Job]) -> list[HistoryPoint | None]:
    return [_point(job, _WORKER_CATALOG[0], _WORKER_PARSES, _WORKER_REUSE) for job in chunk]


@contextmanager
def _cache(repo: Path) -> Iterator[Folder | None]:
    """The cache folder, created (with its `.gitignore`) if missing; None if it cannot be (then nothing is
    read from or written to a cache). `.fleet` and its subfolders are never followed if they are links."""
    try:
        with Folder.open(repo, create=False) as root, root.sub(CACHE.parent.as_posix()) as parent:
            if parent.kind(".gitignore") == "absent":
                with suppress(FleetError, OSError):
                    parent.write(".gitignore", "*\n")
            folder = parent.sub(CACHE.name)
    except (FleetError, OSError):
        yield None
        return
    with folder:
        yield folder


def _read(cache: Folder | None, name: str) -> HistoryPoint | None:
    """A cached point, or None if it is missing or not a valid entry (module docstring): recomputed."""
    raw = cache.read(name, ENTRY_LIMIT) if cache is not None else None
    if raw is None:
        return None
    try:
        return HistoryPoint.from_dict(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _write(cache: Folder | None, name: str, text: str) -> None:
    """Cache an entry; a cache that cannot take it (read-only, a directory in its place) is skipped."""
    if cache is not None:
        with suppress(FleetError, OSError):
            cache.write(name, text)
