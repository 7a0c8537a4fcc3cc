"""The stack specs `fleet apply` works on.  EFFECT (read).

Two ways in, one checked result: `specs_from_render(files)` takes the specs the render stage built in memory
(the default: apply renders the repository it is run in, so what is applied is exactly what the plan says),
and `load_specs(dir)` reads the ones `fleet render --out DIR` wrote into `DIR/stacks/` (`--specs DIR`: apply
what a reviewer looked at). Both check every spec against the contract the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.spec import SpecError, validate_spec

from ..problems import UsageError


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


def specs_from_render(files: dict[str, str]) -> list[StackSpec]:
    """The stack specs among the files `reconciler.render.render` returns (`stacks/<stack>.json`), checked and
    sorted by stack name, as if `fleet render` had written them and `load_specs` had read them back."""
    return [_parse(text, f"(rendered) {rel}", Path(rel).stem)
            for rel, text in sorted(files.items()) if rel.startswith("stacks/") and rel.endswith(".json")]


def _load(path: Path) -> StackSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), "(file)", f"not UTF-8 text ({e.reason})") from None
    return _parse(text, str(path), path.stem)


def _parse(text: str, source: str, stem: str) -> StackSpec:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(source, f"line {e.lineno} column {e.colno}", f"invalid JSON: {e.msg}") from None
    spec = validate_spec(data, source)
    if spec["stack"] != stem:
        raise SpecError(source, "stack", f"{spec['stack']!r} differs from the file name; it must be {stem!r}")
    return StackSpec(name=spec["stack"], layer=spec["layer"], cluster=spec["cluster"], spec=spec, source=source)
