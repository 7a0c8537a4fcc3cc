"""Formatting problems for people and machines. Pure: returns text; the CLI prints it.

Text and workflow commands go to a terminal or a CI log, so every field of a problem passes through
`printable` (a message may quote a value, a key or a file name from the pull request); JSON escapes by itself."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .problems import Problem, Severity, printable


def text(problems: Sequence[Problem]) -> str:
    """`path:line:col: error: message` and an indented hint, then a one-line summary."""
    lines = []
    for p in problems:
        where = f" [{printable(p.field)}]" if p.field else ""
        lines.append(f"{printable(p.path)}:{p.line}:{p.col}: {p.severity}: {printable(p.message)}{where}")
        if p.hint:
            lines.append(f"    hint: {printable(p.hint)}")
    errors = sum(p.severity == Severity.ERROR for p in problems)
    warnings = len(problems) - errors
    lines.append(f"{errors} error(s), {warnings} warning(s)" if problems else "ok: no problems found")
    return "\n".join(lines) + "\n"


def _escape_data(s: str) -> str:
    """The workflow-command encoding of `%`, CR and LF, then `printable` for the rest (ESC would still reach
    the CI log, which renders terminal escape codes)."""
    return printable(s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_prop(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github(problems: Sequence[Problem]) -> str:
    """GitHub Actions workflow commands, so each problem shows inline on the pull request's diff."""
    lines = []
    for p in problems:
        level = "error" if p.severity == Severity.ERROR else "warning"
        title = f"fleet: {p.field}" if p.field else "fleet"
        body = p.message + (f" Hint: {p.hint}" if p.hint else "")
        lines.append(f"::{level} file={_escape_prop(p.path)},line={p.line},col={p.col},"
                     f"title={_escape_prop(title)}::{_escape_data(body)}")
    return "\n".join(lines) + ("\n" if lines else "")


def as_json(problems: Sequence[Problem]) -> str:
    errors = sum(p.severity == Severity.ERROR for p in problems)
    doc = {"ok": errors == 0, "errors": errors, "warnings": len(problems) - errors,
           "problems": [p.as_dict() for p in problems]}
    return json.dumps(doc, indent=2) + "\n"
