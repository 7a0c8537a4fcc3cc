"""The pure pipeline, stage by stage (DESIGN.md section 5). Each step is a function of the previous result."""

from __future__ import annotations

from collections.abc import Mapping

from .catalog import Catalog
from .gcpause import paused_gc
from .load import load
from .validate import Validated, validate


def check(files: Mapping[str, bytes], catalog: Catalog) -> Validated:
    """1. load: parse and build the documents.  2. validate: cross-document and domain rules."""
    loaded = load(files)
    with paused_gc():
        return validate(loaded, catalog)
