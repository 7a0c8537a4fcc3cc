"""Problems: what is wrong with the input, where, and how to fix it.

Every user-facing failure of the pure stages is a `Problem` value, never an exception: the loader and the
validator collect them all so that one run shows every error at once. A problem names the file, the 1-based
line and column, the field path inside the document (`options[0].topology`), a message that says what is
wrong, and a hint that says how to fix it.

`FleetError` is the one exception hierarchy for the effectful edges (I/O, git, Pulumi, usage); the CLI turns
it into a message and an exit code, never a traceback unless FLEET_DEBUG=1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

NOT_TEXT = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufdd0-\ufdef\ufeff\ufffe\uffff"
"""Beyond the C0 controls, characters (as a regex class) that do not print as themselves: DEL and the C1
controls (NEL among them), bidirectional marks and overrides, line/paragraph separators, noncharacters, BOM."""
_UNPRINTABLE = re.compile(f"[\x00-\x1f{NOT_TEXT}]")
UNPRINTABLE_IN_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{NOT_TEXT}]")
"""The same save newline and tab, which a key or value (after its escapes) or a whole report may hold."""


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(s: str, *, lines: bool = False) -> str:
    """`s` with every character that does not print as itself written as an escape (`\\x1b`, `\\x0a` for a
    newline, `\\u202e`): file content (a value, a key, a file name) quoted in a message can then neither drive
    the terminal (clear it, forge an `ok: no problems found` line) nor start a line of its own. Ordinary text
    comes back unchanged. With `lines`, newlines and tabs stay: a whole report (Markdown, HTML) keeps its layout."""
    pattern = UNPRINTABLE_IN_LINES if lines else _UNPRINTABLE
    return pattern.sub(_escape, s) if pattern.search(s) else s


def excerpt(value: object, limit: int = 60) -> str:
    """`value` as text, cut to `limit` characters: a message quotes the start of a value, never 60 KB of it."""
    s = str(value)
    return s if len(s) <= limit else f"{s[:limit]}... ({len(s) - limit:,} more characters)"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True, order=True)
class Problem:
    """One located problem. Ordered by file, line, column so reports are stable."""

    path: str
    line: int
    col: int
    message: str
    field: str = ""
    hint: str = ""
    severity: Severity = Severity.ERROR

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "severity": str(self.severity),
            "field": self.field,
            "message": self.message,
            "hint": self.hint,
        }


def format_field(path: tuple[str | int, ...]) -> str:
    """`('options', 0, 'topology')` -> `options[0].topology`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


class FleetError(Exception):
    """Base of every error Fleet reports to a user. `exit_code` follows the CLI contract."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(FleetError):
    """Bad command line or environment (no repository, unknown revision, missing tool): exit 2."""

    exit_code = 2


class RejectedError(FleetError):
    """The input or the change is rejected: exit 1."""

    exit_code = 1
