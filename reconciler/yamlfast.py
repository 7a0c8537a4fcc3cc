"""A fast reader for the plain block-style YAML that Fleet's files are written in, or None to say "ask libyaml".

`yamlio.parse` spent most of a 100,000-job plan's parse in libyaml's composer (a Python node and two marks per
value) and in the walk that turns nodes into dicts and records every value's line and column. Job files use a
small part of YAML: `key: value` lines, `- item` lists, one-line flow lists and maps of plain or quoted scalars
(`[python, -m, train]`, `{accelerator: tpu-v5p, count: 64}`), full-line comments. This module reads exactly that
part, line by line, into the same data libyaml gives; positions (`positions`, the same reading recording each
key's and value's line and column) only when a problem needs one. Lines met before (most lines of job files
recur) are not read again (`_SEEN`). Anything else (anchors, tags, block scalars, multi-line scalars or flow
collections, nested flow, escapes, trailing comments, duplicate or merge keys, empty values, quoted keys, any
error) makes it return None, and `yamlio.parse` reads the file with libyaml as before: so every problem message
still comes from one place, and a file outside the subset costs only the few lines read before it bailed.
`tests/test_yamlfast.py` checks that the two readers agree on every file of the example and generated fleets,
and on generated documents inside and just outside the subset, positions included.

Scalars are typed by the `plain` function `yamlio` passes in (YAML's own resolver and constructor), so `on`,
`1:30`, `0x1f`, `.inf` and `2026-11-01` mean what they mean to libyaml. Pure: no I/O (the memo of lines is a
cache: the same text always gives the same answer).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.\-/]{0,999}):(?: +|$)")
"""A plain key of at most 1,000 characters and its colon, then the spaces before the value (or the end of the
line). libyaml refuses a key of over 1,024 characters ("could not find expected ':'"): a longer one is its call."""
_PLAIN_START_BAD = frozenset("[]{},#&*!|>'\"%@`-?:")
"""YAML's indicators: a scalar that starts with one is not plain, but for `-` before text (`-m`, `--port`, `-1`)
and, outside flow collections, `?` and `:` before text (libyaml's rule)."""
_FLOW_BAD = frozenset("[]{}#:?\"'")
"""Characters the flow reader leaves to libyaml inside a plain flow item (nesting, comments, pairs, quotes)."""
_LINE = re.compile(r"^( *)([^ #\n](?:[^\n]*[^ \n])?)", re.MULTILINE)
"""A line with content: its indentation and its text without trailing spaces (blank and comment lines have
none: a `#` first is a comment)."""
_UNTRIMMED = re.compile(r"^( *)([^ #\n].*)", re.MULTILINE)
"""`_LINE` for a text in which no line ends with a space (most): the same lines, without its backtracking."""
_MARKER = re.compile(r"^(?:---|\.\.\.|%)", re.MULTILINE)
"""Document markers and directives: a stream of documents, or YAML's own settings."""


Inner = tuple[tuple[tuple["Path", int], ...], tuple[tuple["Path", int], ...]]
"""Inside a flow collection written on one line: (path, column) of each key, then of each value, the path
below the line's own and the column from 1 as if the line's text started the line."""
Seen = tuple["str | None", Any, int, "Inner | None"]
"""A line read before: its key (None: a `- value` line), its value, where the value starts in the text, and
its `Inner` positions (None until a reading that records positions has read it)."""
_SEEN: dict[Callable[[str], Any], dict[str, Seen]] = {}
"""Lines read before, by the `plain` they were typed with, then by text: most lines of job files recur
(`kind: training`, `command: [python, -m, train]`, `- {accelerator: tpu-v5p, count: 64}`), and reading each
again was most of the reader's time. A value is a scalar (immutable) or a flow collection of scalars, copied
when reused, so no two documents share a list or a dict. Cleared when full (`MEMO_LINES`)."""
MEMO_LINES = 50_000


class _Bail(Exception):
    """Outside the subset: let libyaml read it."""


Line = tuple[int, str]
"""(column where `text` starts, text): the text has no leading or trailing spaces."""


Path = tuple[str | int, ...]
Where = tuple[int, int]
"""(line, column), both from 1, as `yamlio.Positions` holds them."""
Spots = dict[Path, Where]
"""Field path -> where its value (or key) starts."""


def read(text: str, plain: Callable[[str], Any], max_depth: int) -> dict[str, Any] | None:
    """The data of a document in the subset, or None. `plain(text)` types a plain
    scalar (raising ValueError where libyaml's reading would end in a problem); collections nested `max_depth`
    deep are left to libyaml, which reports them."""
    reader = _start(text, plain, max_depth, record=False)
    return None if reader is None else reader.data


def positions(text: str, plain: Callable[[str], Any], max_depth: int) -> tuple[Spots, Spots] | None:
    """Where each value and each key of a document in the subset starts, as libyaml's marks give them (the
    start of a scalar, its opening quote, `[`, `{`, a list's first `-`, a block mapping's first key), or None.
    A second, slower reading than `read` (a path and a position per value): only a problem needs one."""
    reader = _start(text, plain, max_depth, record=True)
    if reader is None or reader.values is None or reader.keys is None:
        return None
    return reader.values, reader.keys


def top_level(text: str, field: str, *, key: bool = False) -> Where | None:
    """`Positions.of((field,), key=key)` of a document `read` answered, without reading it again: where a
    top-level field's value (or, with `key`, its key) starts; the document's first key when the field is not
    written. In the subset a line that starts with `field:` at column 0 is that field (nothing spans lines, a
    key is written once, a line of a list at column 0 starts with `- `). Most problems, and the warnings a
    generated fleet gives thousands of jobs, name a top-level field. None: it cannot tell (ask `positions`).
    Only a space separates a key from its value in YAML (a no-break space is text)."""
    m = re.search(r"^" + re.escape(field) + r":( *)([^ \n]?)", text, re.MULTILINE)
    if m is None:
        first = _LINE.search(text)
        return (text.count("\n", 0, first.start()) + 1 if first else 1), 1
    line = text.count("\n", 0, m.start()) + 1
    if key:
        return line, 1
    if m.group(2):
        return line, m.start(2) - m.start() + 1
    below = _LINE.search(text, m.end())   # the block collection under the key
    if below is None:
        return None   # an empty value: not in the subset
    return line + text.count("\n", m.end(), below.start()), len(below.group(1)) + 1


def _start(text: str, plain: Callable[[str], Any], max_depth: int, *, record: bool) -> _Reader | None:
    if "\\" in text or "\r" in text or "\t" in text:
        return None
    if ("---" in text or "..." in text or "%" in text) and _MARKER.search(text):   # the search only where one may be
        return None
    numbers: list[int] = []
    if record:  # the same lines as below, with their numbers
        lines: list[Line] = []
        n, last = 1, 0
        count = text.count
        for m in _LINE.finditer(text):
            at = m.start()
            n += count("\n", last, at)
            last = at
            numbers.append(n)
            lines.append((len(m.group(1)), m.group(2)))
    else:
        pattern = _LINE if " \n" in text or text.endswith(" ") else _UNTRIMMED
        lines = [(len(indent), body) for indent, body in pattern.findall(text)]
    if not lines or lines[0][0] != 0 or lines[0][1][:2] == "- " or lines[0][1] == "-":
        return None
    reader = _Reader(lines, plain, max_depth)
    if record:
        reader.numbers = numbers
        reader.values, reader.keys = {(): (numbers[0], 1)}, {}
    try:
        reader.data = reader.mapping(0, 0, ()) if record else reader.fast_mapping(0, 0)
    except (_Bail, ValueError):  # ValueError: `plain` refused a scalar
        return None
    if reader.i != len(lines):
        return None
    return reader


class _Reader:
    """Reads `lines` from `i` on. With `values` and `keys` set (by `positions`) it also records where each
    value and key starts, by field path; `numbers` holds each line's number then."""

    def __init__(self, lines: list[Line], plain: Callable[[str], Any], max_depth: int) -> None:
        self.lines = lines
        self.plain = plain
        self.max_depth = max_depth
        self.i = 0
        self.data: dict[str, Any] = {}
        self.numbers: list[int] = []
        self.values: Spots | None = None
        self.keys: Spots | None = None
        self.seen = _SEEN.setdefault(plain, {})

    def mapping(self, indent: int, depth: int, path: Path) -> dict[str, Any]:
        """The block mapping whose first key is `lines[i]`, at column `indent`."""
        if depth >= self.max_depth:
            raise _Bail
        lines = self.lines
        keys = self.keys
        seen_lines = self.seen
        out: dict[str, Any] = {}
        while self.i < len(lines):
            col, body = lines[self.i]
            if col < indent:
                break
            if col > indent:
                raise _Bail  # a continuation line, or a key indented differently
            seen = seen_lines.get(body)
            if seen is not None and seen[0] is not None and (keys is None or seen[3] is not None):
                key = seen[0]
                if key in out:
                    raise _Bail
                out[key] = self.again(seen, col, (*path, key) if keys is not None else (), depth)
                continue
            m = _KEY.match(body)
            if m is None:
                if body[:2] == "- " or body == "-":
                    break  # the caller's indentless list ends, or (at the top) the document is malformed
                raise _Bail
            key = m.group(1)
            if key in out or key == "<<":
                raise _Bail
            start = m.end()
            sub: Path = () if keys is None else (*path, key)
            if start == len(body):
                if keys is not None:
                    keys[sub] = (self.numbers[self.i], col + 1)
                self.i += 1
                out[key] = self.nested(indent, depth + 1, sub)
                continue
            out[key] = self.first(body, key, start, col, sub, depth)
        return out

    def fast_mapping(self, indent: int, depth: int) -> dict[str, Any]:
        """`mapping` when no positions are recorded (`read`): the same data and the same bails, a line read
        before taken from the memo inline (most lines of job files), without the path bookkeeping."""
        if depth >= self.max_depth:
            raise _Bail
        lines = self.lines
        seen_get = self.seen.get
        deep = depth + 1 >= self.max_depth   # a collection on a line would be too deep: libyaml's call
        out: dict[str, Any] = {}
        i, n = self.i, len(lines)
        while i < n:
            col, body = lines[i]
            if col != indent:
                if col < indent:
                    break
                raise _Bail  # a continuation line, or a key indented differently
            seen = seen_get(body)
            if seen is not None and seen[0] is not None:
                key = seen[0]
                if key in out:
                    raise _Bail
                value = seen[1]
                if type(value) is list or type(value) is dict:
                    if deep:
                        raise _Bail
                    value = value.copy()   # the memo's is its own
                out[key] = value
                i += 1
                continue
            m = _KEY.match(body)
            if m is None:
                if body[:2] == "- " or body == "-":
                    break  # the caller's indentless list ends, or (at the top) the document is malformed
                raise _Bail
            key = m.group(1)
            if key in out or key == "<<":
                raise _Bail
            start = m.end()
            self.i = i
            if start == len(body):
                self.i += 1
                out[key] = self.fast_nested(indent, depth + 1)
            else:
                out[key] = self.first(body, key, start, col, (), depth)
            i = self.i
        self.i = i
        return out

    def fast_nested(self, indent: int, depth: int) -> Any:
        """`nested` without positions."""
        if self.i == len(self.lines):
            raise _Bail  # an empty value (null): rare, and libyaml places it
        col, body = self.lines[self.i]
        is_list = body[:2] == "- " or body == "-"
        if col < indent or (col == indent and not is_list):
            raise _Bail
        return self.fast_sequence(col, depth) if is_list else self.fast_mapping(col, depth)

    def fast_sequence(self, indent: int, depth: int) -> list[Any]:
        """`sequence` without positions. A `- value` line in the memo passed every test below before it was
        remembered (they read the line's text alone), so it is taken at once."""
        if depth >= self.max_depth:
            raise _Bail
        lines = self.lines
        seen_get = self.seen.get
        deep = depth + 1 >= self.max_depth
        out: list[Any] = []
        i, n = self.i, len(lines)
        while i < n:
            col, body = lines[i]
            if col != indent:
                if col < indent:
                    break
                raise _Bail
            seen = seen_get(body)
            if seen is not None and seen[0] is None:
                value = seen[1]
                if type(value) is list or type(value) is dict:
                    if deep:
                        raise _Bail
                    value = value.copy()
                out.append(value)
                i += 1
                continue
            if body[:2] != "- ":
                if body == "-":
                    raise _Bail
                break  # the enclosing mapping's next key (an indentless list ends at it)
            rest = body[2:].lstrip(" ")
            item_col = col + len(body) - len(rest)
            self.i = i
            if rest[:2] == "- ":
                lines[i] = (item_col, rest)
                out.append(self.fast_sequence(item_col, depth + 1))
            elif _KEY.match(rest):  # `- key: v`: a mapping that starts mid-line
                lines[i] = (item_col, rest)
                out.append(self.fast_mapping(item_col, depth + 1))
            else:
                out.append(self.first(body, None, len(body) - len(rest), col, (), depth))
            i = self.i
        self.i = i
        return out

    def first(self, body: str, key: str | None, start: int, col: int, path: Path, depth: int) -> Any:
        """The value of line `i` (`body`, at column `col`), written from `body[start]` on after its key or dash,
        read and remembered (`_SEEN`); its positions recorded under `path` when recording. `depth`: that of the
        collection the line is in (a flow collection on it is one deeper)."""
        if depth + 1 >= self.max_depth and body[start] in "[{":
            raise _Bail   # libyaml reports the nesting
        keys, values = self.keys, self.values
        n = self.numbers[self.i] if keys is not None else 0
        if keys is not None and values is not None:
            if key is not None:
                keys[path] = (n, col + 1)
            values[path] = (n, col + start + 1)
        self.i += 1
        text = body[start:]
        inner: Inner | None = None
        if not (text[0] in _PLAIN_START_BAD or " #" in text or ": " in text or text[-1] == ":"):
            value = self.plain(text)   # the common line, `key: plain text`, without the calls
            inner = ((), ())
        elif keys is None or values is None:
            value = self.inline(body, start, col, path)
        else:   # the positions inside a flow collection, relative to the line, then placed
            self.keys, self.values = {}, {}
            try:
                value = self.inline(body, start, 0, ())
                inner = (tuple((p, at) for p, (_, at) in self.keys.items()),
                         tuple((p, at) for p, (_, at) in self.values.items()))
            finally:
                self.keys, self.values = keys, values
            self.place(inner, n, col, path)
        if len(self.seen) >= MEMO_LINES:
            self.seen.clear()
        self.seen[body] = (key, value, start, inner)
        return value.copy() if type(value) is list or type(value) is dict else value   # the memo's is its own

    def again(self, seen: Seen, col: int, path: Path, depth: int) -> Any:
        """`first` for a line read before (`seen`), at column `col`."""
        key, value, start, inner = seen
        is_collection = type(value) is list or type(value) is dict
        if is_collection and depth + 1 >= self.max_depth:
            raise _Bail
        keys, values = self.keys, self.values
        if keys is not None and values is not None and inner is not None:
            n = self.numbers[self.i]
            if key is not None:
                keys[path] = (n, col + 1)
            values[path] = (n, col + start + 1)
            if inner[1]:
                self.place(inner, n, col, path)
        self.i += 1
        return value.copy() if is_collection else value

    def place(self, inner: Inner, n: int, col: int, path: Path) -> None:
        """Record a line's `Inner` positions: line `n`, its text at column `col`, below `path`."""
        assert self.keys is not None and self.values is not None
        for p, at in inner[0]:
            self.keys[(*path, *p)] = (n, col + at)
        for p, at in inner[1]:
            self.values[(*path, *p)] = (n, col + at)

    def nested(self, indent: int, depth: int, path: Path) -> Any:
        """The block collection under `key:` at column `indent`: deeper lines, or a list at the same column."""
        if self.i == len(self.lines):
            raise _Bail  # an empty value (null): rare, and libyaml places it
        col, body = self.lines[self.i]
        is_list = body[:2] == "- " or body == "-"
        if col < indent or (col == indent and not is_list):
            raise _Bail
        if self.values is not None:
            self.values[path] = (self.numbers[self.i], col + 1)
        return self.sequence(col, depth, path) if is_list else self.mapping(col, depth, path)

    def sequence(self, indent: int, depth: int, path: Path) -> list[Any]:
        """The block list whose first `- ` is `lines[i]`, at column `indent`."""
        if depth >= self.max_depth:
            raise _Bail
        lines = self.lines
        values = self.values
        out: list[Any] = []
        while self.i < len(lines):
            col, body = lines[self.i]
            if col < indent:
                break
            if col > indent:
                raise _Bail
            if body[:2] != "- ":
                if body == "-":
                    raise _Bail
                break  # the enclosing mapping's next key (an indentless list ends at it)
            rest = body[2:].lstrip(" ")
            item_col = col + len(body) - len(rest)
            sub: Path = () if values is None else (*path, len(out))
            if rest[:2] == "- " or _KEY.match(rest):  # `- key: v`: a mapping (or list) that starts mid-line
                if values is not None:
                    values[sub] = (self.numbers[self.i], item_col + 1)
                lines[self.i] = (item_col, rest)
                nested = self.sequence if rest[:2] == "- " else self.mapping
                out.append(nested(item_col, depth + 1, sub))
                continue
            seen = self.seen.get(body)
            if seen is not None and (values is None or seen[3] is not None):
                out.append(self.again(seen, col, sub, depth))
            else:
                out.append(self.first(body, None, len(body) - len(rest), col, sub, depth))
        return out

    def inline(self, body: str, start: int, col: int, path: Path) -> Any:
        """The value written on the line after a key or dash (`body[start:]`; the line's text starts at column
        `col`): a scalar, `[...]` or `{...}`."""
        first = body[start]
        if first == "[" or first == "{":
            return self.flow(body, start, col, path)
        value, end = _scalar(body, start, self.plain, flow=False)
        if end != len(body):
            raise _Bail
        return value

    def flow(self, body: str, start: int, col: int, path: Path) -> Any:
        """A one-line flow list or map of scalars (no nesting, no comments)."""
        close = "]" if body[start] == "[" else "}"
        if body[-1] != close:
            raise _Bail
        inner = body[start + 1:-1]
        if not inner.strip(" "):
            return [] if close == "]" else {}
        items: list[Any] = []
        out: dict[str, Any] = {}
        plain = self.plain
        values, keys = self.values, self.keys
        at = col + start + 2  # the column (from 1) where the part being read starts
        for part in inner.split(","):  # quoted items with a comma in them are not split right: they bail below
            item = part.strip(" ")
            item_at = at + len(part) - len(part.lstrip(" "))
            at += len(part) + 1
            if close == "}":
                key, colon, value = item.partition(": ")
                if not colon or _KEY.fullmatch(key + ":") is None or key in out or key == "<<":
                    raise _Bail  # `k:v`, `k:`, a quoted or missing key, a duplicate or a merge: libyaml's call
                item = value.lstrip(" ")
                if keys is not None:
                    keys[(*path, key)] = (self.numbers[self.i - 1], item_at)
                item_at += len(key) + 2 + len(value) - len(item)
            if not item:
                raise _Bail  # `[a, , b]`, a trailing comma, `{k: }`
            if values is not None:
                sub = (*path, len(items)) if close == "]" else (*path, key)
                values[sub] = (self.numbers[self.i - 1], item_at)
            if item[0] not in _PLAIN_START_BAD and _FLOW_BAD.isdisjoint(item):
                value = plain(item)  # the common item, plain text, without the call
            else:
                value, end = _scalar(item, 0, plain, flow=True)
                if end != len(item):
                    raise _Bail
            if close == "}":
                out[key] = value
            else:
                items.append(value)
        return out if close == "}" else items


def _scalar(body: str, at: int, plain: Callable[[str], Any], *, flow: bool) -> tuple[Any, int]:
    """(value, where it ends) of the scalar at `body[at]`, which runs to the end of `body` (a line's text, or
    one item of a flow collection) unless it is quoted."""
    first = body[at]
    if first == "'":
        out = []
        i = at + 1
        while True:
            j = body.find("'", i)
            if j < 0:
                raise _Bail  # the quote closes on a later line, or the item held a comma
            out.append(body[i:j])
            if body[j + 1:j + 2] == "'":
                out.append("'")
                i = j + 2
                continue
            return "".join(out), j + 1
    if first == '"':
        j = body.find('"', at + 1)
        if j < 0:
            raise _Bail
        return body[at + 1:j], j + 1
    if first in _PLAIN_START_BAD and not (
            (first == "-" or (not flow and first in "?:")) and body[at + 1:at + 2] not in ("", " ")):
        raise _Bail
    text = body[at:]
    if flow:
        if not _FLOW_BAD.isdisjoint(text):
            raise _Bail
    elif " #" in text or ": " in text or text[-1] == ":":
        raise _Bail
    return plain(text), len(body)  # a ValueError from `plain` ends the read
