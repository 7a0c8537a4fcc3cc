"""Snapshot files: `fleet observe --out FILE` writes one, `--observed FILE` reads it back.

EFFECT (file system). Apart from `kube` on purpose: `fleet status --observed FILE` and the planning commands
read a snapshot without importing the Kubernetes client (about 1.2 s of start-up on the 2-core machine).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from pydantic import ValidationError

from ..problems import RejectedError, UsageError
from ..safeio import read_file, write_file
from .model import FROM_FILE, Snapshot

MAX_SNAPSHOT_BYTES = 256 << 20
"""256 MiB: a snapshot of 20 clusters of 12,000 objects each is about 100 MiB; a larger file is not one."""


def read_snapshot(path: Path) -> Snapshot:
    """A snapshot `fleet observe --format json` wrote, or `RejectedError` naming the file and the field. It is
    read by the repository's file rules (`safeio.read_file`: a regular file, not through a link, at most
    `MAX_SNAPSHOT_BYTES`), or a `UsageError` says why not."""
    text = read_file(path, MAX_SNAPSHOT_BYTES, "the snapshot",
                     "write one with `fleet observe --format json --out FILE` and pass that regular file")
    try:
        return Snapshot.model_validate_json(text, context={FROM_FILE: True})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise RejectedError(f"{path}: field `{where}`: {first['msg']} ({e.error_count()} error(s))",
                            "not a snapshot of this Fleet version: write it again with "
                            "`fleet observe --format json --out FILE`") from None


def previous_snapshot(path: Path) -> Snapshot | None:
    """The snapshot an earlier `fleet observe --out FILE` left there, to carry over what only it knows (since
    when a cluster is unreachable, its last completion records: model.carry_over); None when there is none or
    it is not one (it is about to be replaced anyway)."""
    try:
        return Snapshot.model_validate_json(read_file(path, MAX_SNAPSHOT_BYTES, "the snapshot", ""))
    except (UsageError, ValidationError):
        return None


def write_snapshot(path: Path, snap: Snapshot) -> None:
    """`snap.to_json()` into `path` through `safeio` (atomic, never through a planted link). The text is
    encoded cluster by cluster straight into the bytes written, so only that one copy (100 MiB for 20 clusters
    of 12,000 objects) is held, not also `to_json()`'s string and pydantic's buffer behind it."""
    data = bytearray()
    for chunk in snap.json_chunks():
        data += chunk.encode()
    write_file(path, cast(bytes, data))     # written with `file.write`, which takes any buffer: no bytes() copy
