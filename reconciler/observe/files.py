"""Snapshot files: `fleet observe --out FILE` writes one, `--observed FILE` reads it back.

EFFECT (file system). Apart from `kube` on purpose: `fleet status --observed FILE` and the planning commands
read a snapshot without importing the Kubernetes client (about 1.2 s of start-up on the 2-core machine).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..problems import RejectedError, UsageError
from .model import Snapshot


def read_snapshot(path: Path) -> Snapshot:
    """A snapshot `fleet observe --format json` wrote, or `RejectedError` naming the file and the field."""
    try:
        text = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read the snapshot {path}: {e.strerror or e}",
                         "write one with `fleet observe --format json --out FILE`") from None
    try:
        return Snapshot.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise RejectedError(f"{path}: field `{where}`: {first['msg']} ({e.error_count()} error(s))",
                            "not a snapshot of this Fleet version: write it again with "
                            "`fleet observe --format json --out FILE`") from None


def write_snapshot(path: Path, snap: Snapshot) -> None:
    """`snap.to_json()` into `path`, cluster by cluster (never the whole 100 MiB text at once), through a
    temporary file renamed at the end, so a failure never leaves a half-written snapshot."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for chunk in snap.json_chunks():
            f.write(chunk)
    tmp.replace(path)
