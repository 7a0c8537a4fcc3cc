"""`json.dumps(doc, indent=2)`, byte for byte, in about a third of the time. Pure.

With `indent` set the standard library leaves its C encoder for the pure-Python one (nested generators, one
call per token): writing the plan of 10,000 jobs took a quarter of a second. Here one recursive function
writes into a list and the C helpers of `json.encoder` escape the strings. Anything the fast path does not
know (a subclass, a non-string key, an object `json` refuses) goes to `json.dumps` itself, so the two never
differ, errors included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii
from typing import Any

_INF = float("inf")


class _Unusual(Exception):
    """A value the fast path leaves to `json.dumps`."""


def dumps_indented(doc: Any, end: str = "") -> str:
    """`json.dumps(doc, indent=2) + end` (ASCII output, `NaN`/`Infinity` as the standard library writes them).
    `end` is joined with the rest: adding it after would copy the whole text again (53 MB at 100,000 jobs)."""
    return "".join(_pieces(doc, end))


CHUNK_PIECES = 50_000
"""Pieces (a line, or a part of one) per chunk of `indented_chunks`: about 1 MB of a plan's JSON."""


def indented_chunks(doc: Any, end: str = "") -> Iterator[str]:
    """`dumps_indented(doc, end)` in consecutive chunks, to print without holding the whole text (53 MB at
    100,000 jobs) and the output stream's encoded copy of it at once. The whole document is written before
    the first chunk, so an error (what `json.dumps` refuses) comes before any output, as with the text."""
    out = _pieces(doc, end)
    for i in range(0, len(out), CHUNK_PIECES):
        yield "".join(out[i:i + CHUNK_PIECES])


def _pieces(doc: Any, end: str) -> list[str]:
    out: list[str] = []
    try:
        _write(doc, "\n", out)
    except (_Unusual, RecursionError):  # RecursionError: a cycle, which json.dumps names
        return [json.dumps(doc, indent=2) + end]
    out.append(end)
    return out


def _scalar(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is int:
        return int.__repr__(value)
    if kind is float:
        if value != value:
            return "NaN"
        if value == _INF:
            return "Infinity"
        if value == -_INF:
            return "-Infinity"
        return float.__repr__(value)
    raise _Unusual


def _write(value: Any, newline: str, out: list[str]) -> None:
    kind = type(value)
    if kind is dict:
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        sep = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _Unusual
            kind = type(item)
            if kind is str:  # the leaves inline: a call per value was half the time
                out.append(f"{sep}{encode_basestring_ascii(key)}: {encode_basestring_ascii(item)}")
            elif kind is int:
                out.append(f"{sep}{encode_basestring_ascii(key)}: {int.__repr__(item)}")
            else:
                out.append(f"{sep}{encode_basestring_ascii(key)}: ")
                _write(item, inner, out)
            sep = "," + inner
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        sep = "[" + inner
        for item in value:
            kind = type(item)
            if kind is str:
                out.append(sep + encode_basestring_ascii(item))
            elif kind is int:
                out.append(sep + int.__repr__(item))
            else:
                out.append(sep)
                _write(item, inner, out)
            sep = "," + inner
        out.append(newline + "]")
    else:
        out.append(_scalar(value))
