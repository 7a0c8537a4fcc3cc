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
import os
import tempfile
from importlib import resources
from pathlib import Path

from . import __version__, sources
from .catalog import Catalog
from .cost.history import HistoryPoint, cost_point

CACHE = Path(".fleet") / "cache" / "history"


def input_key(data_trees: tuple[str, ...], catalog_bytes: bytes) -> str:
    h = hashlib.sha256()
    for part in (__version__.encode(), hashlib.sha256(catalog_bytes).digest(), *(t.encode() for t in data_trees)):
        h.update(len(part).to_bytes(8, "big") + part)
    return h.hexdigest()


def collect(repo: Path, count: int, catalog: Catalog, *, rev: str = "HEAD") -> tuple[HistoryPoint, ...]:
    """The points of the last `count` first-parent commits from `rev`, oldest first."""
    reader = sources.RevisionReader(repo)
    catalog_bytes = (resources.files("reconciler.catalog") / "catalog.yaml").read_bytes()
    cache = repo / CACHE
    points: list[HistoryPoint] = []
    seen: dict[str, HistoryPoint] = {}
    for info in reversed(reader.first_parent(count, rev)):
        key = input_key(info.data_trees, catalog_bytes)
        point = seen.get(key) or _read(cache / f"{key}.json")
        if point is None:
            point = cost_point(info.sha, info.date, info.subject, reader.files(info.sha), catalog)
            _write(cache, f"{key}.json", json.dumps(point.to_dict(), sort_keys=True))
        seen[key] = point
        points.append(dataclasses.replace(point, commit=info.sha, date=info.date, subject=info.subject))
    return tuple(points)


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
