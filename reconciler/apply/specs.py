"""Read the stack specs `fleet render --out DIR` wrote into `DIR/stacks/`.  EFFECT (read).

`load_specs(dir)` is the only way specs enter `fleet apply`: when the render stage is merged, apply can build
the same specs in memory and skip the files, without touching the orchestration.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.spec import SpecError, validate_spec

from ..problems import UsageError

DEFAULT_SPECS_DIR = Path(".fleet/render/stacks")


@dataclass(frozen=True)
class StackSpec:
    """One parsed, checked stack spec and where it came from."""

    name: str
    layer: str
    cluster: str
    spec: dict[str, Any]
    source: str


def load_specs(directory: Path) -> list[StackSpec]:
    """Every `*.json` stack spec in `directory`, checked against the contract, sorted by stack name."""
    if not directory.is_dir():
        raise UsageError(f"no stack specs: {directory} is not a directory",
                         "render them first: `fleet render --out .fleet/render` (or pass --specs DIR)")
    paths = sorted(directory.glob("*.json"))
    if not paths:
        raise UsageError(f"no stack specs (*.json) in {directory}",
                         "render them first: `fleet render --out .fleet/render` (or pass --specs DIR)")
    return [_load(path) for path in paths]


def _load(path: Path) -> StackSpec:
    source = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise SpecError(source, "(file)", f"not UTF-8 text ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise SpecError(source, f"line {e.lineno} column {e.colno}", f"invalid JSON: {e.msg}") from None
    spec = validate_spec(data, source)
    if spec["stack"] != path.stem:
        raise SpecError(source, "stack", f"{spec['stack']!r} differs from the file name; it must be {path.stem!r}")
    return StackSpec(name=spec["stack"], layer=spec["layer"], cluster=spec["cluster"], spec=spec, source=source)
