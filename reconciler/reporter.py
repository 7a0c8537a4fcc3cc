"""The problem collector that validate and validate_jobs share: each rule adds a problem by field path, and
the collector locates it (file, line, column) in the loaded documents. Pure.

Its own module so that `validate` imports `validate_jobs` and neither imports the other back."""

from __future__ import annotations

from .load import Loaded
from .problems import Problem, Severity, format_field
from .resolve import Issue


class Reporter:
    """Collects problems, locating each field path in its file."""

    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded
        self.problems: list[Problem] = list(loaded.problems)

    def add(self, path: str, fld: tuple[str | int, ...], message: str, hint: str = "", *,
            key: bool = False, severity: Severity = Severity.ERROR) -> None:
        line, col = self.loaded.locate(path, fld, key=key)
        self.problems.append(Problem(path, line, col, message, format_field(fld), hint, severity))

    def issues(self, path: str, prefix: tuple[str | int, ...], issues: list[Issue]) -> None:
        for fld, message, hint in issues:
            self.add(path, (*prefix, *fld), message, hint)
