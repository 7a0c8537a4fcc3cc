"""`fleet cost --history N`: the cost of each of the last N first-parent commits.  EFFECT (git, cache files).

Each commit's point is cached under `.fleet/cache/history/` by the content hash of its inputs: the git tree
shas of `fleet/`, `policies/` and `jobs/` (git's Merkle hash of every data file's bytes and name), the
packaged catalog's bytes and the Fleet version. Equal inputs give an equal point (`cost.history` is pure),
so a cached point is reused for any commit with the same data, and a new catalog or Fleet version
recomputes everything. Entries are written atomically (temporary file, then rename); an entry that cannot be
read or parsed is ignored and recomputed. The folder holds a `.gitignore` of `*`, so it is never committed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import multiprocessing
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from importlib import resources
from pathlib import Path

from . import __version__, sources
from .catalog import Catalog
from .cost.history import HistoryPoint
from .pipeline import cost_point

CACHE = Path(".fleet") / "cache" / "history"


def input_key(data_trees: tuple[str, ...], catalog_bytes: bytes) -> str:
    h = hashlib.sha256()
    for part in (__version__.encode(), hashlib.sha256(catalog_bytes).digest(), *(t.encode() for t in data_trees)):
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


PARALLEL_FROM = 32
"""Points to compute before a process pool pays for itself (starting a worker costs about a second)."""


def collect(repo: Path, count: int, catalog: Catalog, *, rev: str = "HEAD") -> tuple[HistoryPoint, ...]:
    """The points of the last `count` first-parent commits from `rev`, oldest first.

    1. List the commits and the content key of each; 2. take every key that is already cached (once per
    key: commits with equal data share a point); 3. compute the rest, in worker processes when there are many
    (each point is independent and `cost_point` is pure, so the result does not depend on how they are
    spread), and cache them; 4. stamp each commit's own sha, date and subject on its point."""
    reader = sources.RevisionReader(repo)
    catalog_bytes = (resources.files("reconciler.catalog") / "catalog.yaml").read_bytes()
    cache = repo / CACHE
    infos = list(reversed(reader.first_parent(count, rev)))
    keys = [input_key(info.data_trees, catalog_bytes) for info in infos]
    points: dict[str, HistoryPoint] = {}
    todo: dict[str, sources.CommitInfo] = {}
    for info, key in zip(infos, keys, strict=True):
        if key not in points and key not in todo:
            cached = _read(cache / f"{key}.json")
            if cached is None:
                todo[key] = info
            else:
                points[key] = cached
    jobs = [(i.sha, i.date, i.subject, reader.files(i.sha)) for i in todo.values()]
    for key, point in zip(todo, _compute(jobs, catalog), strict=True):
        _write(cache, f"{key}.json", json.dumps(point.to_dict(), sort_keys=True))
        points[key] = point
    return tuple(dataclasses.replace(points[key], commit=info.sha, date=info.date, subject=info.subject)
                 for info, key in zip(infos, keys, strict=True))


Job = tuple[str, str, str, dict[str, bytes]]
_WORKER_CATALOG: list[Catalog] = []


def _compute(jobs: list[Job], catalog: Catalog) -> list[HistoryPoint]:
    """`cost_point` of every job, in order; in a pool of worker processes when there are many."""
    workers = min(os.cpu_count() or 1, 8, max(1, len(jobs) // PARALLEL_FROM))
    if workers == 1:
        return [cost_point(*job, catalog) for job in jobs]
    context = multiprocessing.get_context("spawn")   # not fork: the parent holds git subprocesses and threads
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(catalog,)) as pool:
        return list(pool.map(_worker_point, jobs, chunksize=max(1, len(jobs) // (workers * 8))))


def _init_worker(catalog: Catalog) -> None:
    _WORKER_CATALOG.append(catalog)


def _worker_point(job: Job) -> HistoryPoint:
    return cost_point(*job, _WORKER_CATALOG[0])


def _read(path: Path) -> HistoryPoint | None:
    """A cached point, or None if it is missing or unreadable (then it is recomputed and rewritten)."""
    try:
        return HistoryPoint.from_dict(json.loads(path.read_bytes()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write(folder: Path, name: str, text: str) -> None:
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        (folder.parent / ".gitignore").write_text("*\n", encoding="utf-8")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, folder / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
