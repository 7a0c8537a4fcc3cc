"""Strict YAML with positions: bytes in, (plain data, positions) or located problems out.

Why not `yaml.safe_load`: it loses line numbers, silently keeps the last of two duplicate keys, and expands
alias bombs ("billion laughs") without limit. Here the libyaml C parser composes the node graph (fast: the
10,000-file benchmark depends on it) and a small walker builds plain dicts/lists while it

* records the line:col of every key and value, keyed by the field path (`("options", 0, "count")`),
* rejects duplicate keys (naming the line of the first one), merge keys (`<<`) and non-scalar keys,
* bounds how far anchors/aliases may expand (`MAX_NODES`) and how deep documents nest (`MAX_DEPTH`),
* rejects explicit tags other than YAML's own plain types (`!!binary`, `!custom`: a value a reviewer cannot
  read), scalars over `MAX_SCALAR_CHARS` (numbers over `MAX_NUMBER_CHARS`), and control characters that a
  double-quoted escape (`"\\e[2J"`) puts into a key or value,

and, before parsing, it rejects files over `MAX_FILE_BYTES`, bytes that are not UTF-8, characters that are
not text (control characters, a lone CR, bidirectional overrides, line separators the editor does not show),
tabs in indentation, empty files, nesting deeper than `MAX_DEPTH` (libyaml's composer recurses in C: a file
of 60,000 `[` overflowed the C stack and killed the process; the same error whatever nesting limit PyYAML
itself has) and multi-document streams, each with the exact position. So a file that comes back as data holds
only text that prints as itself. Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
import types
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import yaml

from . import yamlfast
from .problems import NOT_TEXT, UNPRINTABLE_IN_LINES, Problem, excerpt, printable

try:  # libyaml is in every PyYAML wheel; the pure-Python parser is the (slower) fallback.
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on the wheel
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

MAX_FILE_BYTES = 1 << 20
"""1 MiB: a cluster or job file is a few KiB; anything this large is a mistake or an attack."""
MAX_NODES = 20_000
"""Values a document may expand to, aliases included. The largest real file (a cluster with 1,000 pools) is
about 12,000 values; an alias bomb is millions."""
MAX_DEPTH = 32
"""Nesting depth. Fleet documents are at most 5 levels deep; a recursive alias would be infinite."""
MAX_SCALAR_CHARS = 65_536
"""A key or value. The longest real ones (a command line, an env value) are a few hundred characters."""
MAX_NUMBER_CHARS = 64
"""A number's spelling. Python refuses to convert an integer of over 4,300 digits; no Fleet number needs 20."""

Path = tuple[str | int, ...]

_DECIMAL = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_TAB_INDENT = re.compile(r"^[ ]*\t", re.MULTILINE)
_CONTENT = re.compile(r"^[ \t]*[^ \t#\r\n]", re.MULTILINE)
_BAD_CHAR = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{NOT_TEXT}]|\r(?!\n)")
"""Characters that are not text in a file: C0/C1 controls but tab and line ends (ESC drives the terminal, NUL
and U+FFFE made libyaml's reader fail), a CR without LF (libyaml reads it as a line end that git, editors and
the line numbers here do not), line/paragraph separators and NEL (the same), bidirectional controls (the text
displays in another order than it is read), noncharacters and a byte order mark anywhere but first."""
_ASCII_TEXT = bytes(range(0x20, 0x7F)) + b"\t\n"
"""Bytes that are text whatever follows: a file of only these (most are) needs no `_BAD_CHAR` search."""
_PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in
                        ("str", "int", "float", "bool", "null", "timestamp", "value", "seq", "map"))
"""What the resolver gives an untagged node: any other tag was written explicitly in the file."""
_SCALAR = yaml.constructor.SafeConstructor()
_STR = "tag:yaml.org,2002:str"
_RESOLVE = functools.lru_cache(maxsize=50_000)(yaml.resolver.Resolver().resolve)
"""YAML's implicit-tag resolver, memoized in C: Fleet files repeat the same keys and values (`name`,
`accelerator`, `tpu-v5p`, ...), and resolving each one in Python was a third of load time. Bounded, so a file
of distinct values only churns it. No path resolvers are registered, so a shared resolver gives the same tags."""
_IMPLICIT = yaml.resolver.Resolver.yaml_implicit_resolvers
_TYPED_FIRST = frozenset(c for c in _IMPLICIT if c)
"""The first characters of every implicit type but the string (digits, `-`, `.`, `~`, `t`, `n`, `y`, ...): the
resolver tries only the patterns registered under a value's first character (and the wildcard ones, under None:
PyYAML registers none), so a plain scalar that starts with any other character is a string without asking it.
Distinct values (a job's name, its run id) missed the memo above and cost a call of the resolver in Python each."""
_WILDCARD = None in _IMPLICIT


class _FastLoader(_Loader):
    """libyaml's parser with the per-node hooks that its composer calls back into Python made C callables:
    the memoized resolver, and no-ops for the path-resolver bookkeeping (no path resolvers are registered).
    A Python method per node (three per node, 400,000 calls for the 10,000-job benchmark) was a sixth of it."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.resolve = _RESOLVE  # type: ignore[method-assign]
        self.descend_resolver = _IGNORE_TWO  # type: ignore[method-assign]
        self.ascend_resolver = int  # type: ignore[method-assign,assignment]


_IGNORE_TWO: Any = {}.get
"""A C callable of two arguments whose result the composer discards (`descend_resolver(parent, index)`)."""


@dataclass(frozen=True)
class Positions:
    """Line:col (1-based) of each key and value of one document, keyed by field path."""

    values: dict[Path, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """Best position for `path`: the key (for unknown or misnamed fields) or the value, else the
        nearest enclosing field that has one, else the top of the file."""
        table = self.keys if key else self.values
        p = path
        while p:
            if p in table:
                return table[p]
            if p in self.values:
                return self.values[p]
            p = p[:-1]
        return self.values.get((), (1, 1))


@dataclass(frozen=True)
class ParsedDoc:
    """One file's data, and where each of its fields is written (`positions`, found when first asked for:
    only a problem needs one, and recording 30 of them per file was a third of parsing 100,000 files)."""

    path: str
    data: Any
    text: str = field(default="", repr=False, compare=False)
    _positions: list[Positions] = field(default_factory=list, repr=False, compare=False)

    def locate(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """`positions.of(path, key=key)`; a top-level field of a file the fast reader read is found without
        finding every position (`yamlfast.top_level`)."""
        if len(path) == 1 and not self._positions and isinstance(path[0], str):
            found = yamlfast.top_level(self.text, path[0], key=key)
            if found is not None:
                return found
        return self.positions.of(path, key=key)

    def without_data(self) -> ParsedDoc:   # what `load` keeps once the model is built: the text locates fields
        return ParsedDoc(self.path, None, self.text, self._positions)

    @property
    def positions(self) -> Positions:
        if not self._positions:  # the text was read once already: by the fast reader, unless it is outside its subset
            fast = yamlfast.positions(self.text, _plain, MAX_DEPTH)
            self._positions.append(Positions(*fast) if fast else read_with_libyaml(self.text)[1])
        return self._positions[0]


class _Fail(Exception):
    def __init__(self, line: int, col: int, message: str, hint: str) -> None:
        super().__init__(message)
        self.line, self.col, self.message, self.hint = line, col, message, hint


def _line_col(text: bytes | str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    nl = b"\n" if isinstance(before, bytes) else "\n"
    line = before.count(nl) + 1  # type: ignore[arg-type]
    col = offset - (before.rfind(nl) + 1) + 1  # type: ignore[arg-type]
    return line, col


def parse(path: str, raw: bytes) -> ParsedDoc | Problem:
    """Parse one YAML document strictly. Returns the data with positions, or the first problem."""
    try:
        text = _decode(raw)
        fast = yamlfast.read(text, _plain, MAX_DEPTH) if len(text) <= MAX_SCALAR_CHARS else None
        if fast is not None:  # the block-style subset job files are written in, read without libyaml
            return ParsedDoc(path, fast, text)
        _check_nesting(text)   # after the fast reader, which leaves anything nested deeper than MAX_DEPTH to libyaml
        data, positions = read_with_libyaml(text)
        return ParsedDoc(path, data, text, [positions])
    except _Fail as f:
        return Problem(path, f.line, f.col, f.message, hint=f.hint)


def read_with_libyaml(text: str) -> tuple[dict[str, Any], Positions]:
    """A checked text's data and positions, read by libyaml and `_Walker` (any YAML); raises `_Fail`."""
    node = _compose(text)
    walker = _Walker(aliases="*" in text, tags="!" in text, escapes="\\" in text, long=len(text) > MAX_SCALAR_CHARS)
    data = walker.build(node, ())
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__} value"
        raise _Fail(*_mark(node), f"the document is {kind}, but a mapping of fields belongs here",
                    "start the file with `name: ...` and the other fields as `key: value` lines")
    return data, Positions(walker.values, walker.keys)


def _decode(raw: bytes) -> str:
    if len(raw) > MAX_FILE_BYTES:
        raise _Fail(1, 1, f"file is {len(raw):,} bytes, over the {MAX_FILE_BYTES:,}-byte limit",
                    "split it: one cluster per file in fleet/clusters/, one job per file in jobs/<team>/")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_col(raw, e.start)
        raise _Fail(line, col, f"byte 0x{raw[e.start]:02x} is not valid UTF-8",
                    "save the file as UTF-8 (for example `iconv -f latin1 -t utf-8`)") from None
    text = text.removeprefix("\ufeff")
    m = _BAD_CHAR.search(text) if raw.translate(None, _ASCII_TEXT) or b"\r" in raw else None
    if m:
        raise _Fail(*_line_col(text, m.start()), *_not_text(m.group()))
    m = _TAB_INDENT.search(text) if "\t" in text else None   # the search (every line) only where a tab is
    if m:
        line, col = _line_col(text, m.end() - 1)
        raise _Fail(line, col, "tab character in indentation", "YAML indents with spaces only: replace the tab")
    if not _CONTENT.search(text):
        raise _Fail(1, 1, "the file is empty", "add the document's fields, or delete the file")
    return text


_C0 = ("NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "TAB", "LF", "VT", "FF", "CR", "SO", "SI",
       "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US")


def char_name(ch: str) -> str:
    """`U+001B (ESC)`: how a message names a character that does not print as itself."""
    code = ord(ch)
    name = _C0[code] if code < 32 else "DEL" if code == 0x7F else "NEL" if code == 0x85 else unicodedata.name(ch, "")
    return f"U+{code:04X}" + (f" ({name})" if name else "")


def _not_text(ch: str) -> tuple[str, str]:
    """Message and hint for a character that is not text (see `_BAD_CHAR`)."""
    if ch == "\r":
        return ("carriage return (CR) without a line feed: YAML reads it as a line end that git and editors do not "
                "show", "save the file with LF line endings (for example `dos2unix FILE`)")
    if ch == "\ufeff":
        return ("byte order mark (U+FEFF) inside the file", "delete it: only the very first character may be one")
    what = "bidirectional control" if unicodedata.category(ch) == "Cf" else "control"
    if ch in "\x85\u2028\u2029":
        what = "invisible line break"
    elif unicodedata.category(ch) == "Cn":
        what = "noncharacter"
    return (f"{what} character {char_name(ch)} in the file: the text would not show as what Fleet reads",
            "delete it (`cat -A FILE` shows where it is); write text only, and spaces for indentation")


def _check_nesting(text: str) -> None:
    """Reject documents that nest deeper than `MAX_DEPTH`, before libyaml's composer recurses into them.

    Fast bound first: every collection needs its own `[`, `{`, `-`, `?` or `:` (a flow sequence may also hold
    one implicit `key: value` mapping per level, so `[` counts twice), so a document with fewer of them than
    `MAX_DEPTH` cannot nest deeper, and ordinary files skip the exact pass: libyaml's event stream, which keeps
    its own stack (no recursion), read up to the first collection that is too deep or to a syntax error (the
    composer then reports that).

    Fleet's limit must not depend on PyYAML's. PyYAML 6.0.4's libyaml stops at its own nesting limit (1,000
    levels, "exceeded maximum nesting depth") in the scanner, which reads ahead of the events: on 60,000 `[` it
    fails before the event for level 1 comes out, so the pass above never sees level 33. So when libyaml stops
    with any error, the text is read again by PyYAML's pure-Python parser (iterative, no nesting limit, about
    30 times slower, so only files that fail anyway pay for it; it stops at the same syntax error, or at the
    first level over `MAX_DEPTH` that libyaml's limit hid)."""
    dashes = sum(text.count(f"-{blank}") for blank in " \n\t\r") + text.endswith("-")
    if 2 * text.count("[") + text.count("{") + text.count(":") + text.count("?") + dashes < MAX_DEPTH:
        return
    if not _within_depth(_Loader(text)):  # libyaml stopped at a YAML error: read it again without libyaml
        _within_depth(yaml.SafeLoader(text))


def _within_depth(parser: Any) -> bool:
    """Read `parser`'s events; raise at the first collection deeper than `MAX_DEPTH`. True when the stream ends
    within it, False when a YAML error stops it first (the composer reports that error)."""
    depth = 0
    try:
        while (event := parser.get_event()) is not None:
            kind = type(event)
            if kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(event.start_mark)
            elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
                depth -= 1
    except yaml.YAMLError:
        return False
    finally:
        parser.dispose()
    return True


def _too_deep(mark: yaml.Mark | None) -> _Fail:
    return _Fail(*((mark.line + 1, mark.column + 1) if mark else (1, 1)), f"the document nests deeper than {MAX_DEPTH} "
                 "levels", "Fleet documents are a few levels deep: flatten it")


def _compose(text: str) -> yaml.Node:
    loader = _FastLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = (e.problem or str(e)).strip()
        if e.context and e.context_mark and e.problem_mark and e.context_mark.line != e.problem_mark.line:
            what += f" ({e.context.replace('while parsing a', 'in the')} that starts on line {e.context_mark.line + 1})"
        if "nesting" in (e.problem or ""):  # PyYAML's own limit (6.0.4: "exceeded maximum nesting depth", at
            raise _too_deep(mark) from None  # 1,000 levels): deeper than Fleet's too, one error whichever fired
        if "expected a single document" in str(e):
            raise _Fail(line, col, "more than one YAML document (`---`) in the file",
                        "keep one document per file") from None
        raise _Fail(line, col, f"invalid YAML: {what}",
                    "check the indentation and quoting on this line and the one before it") from None
    finally:
        loader.dispose()
    assert node is not None  # the empty case is caught in _decode
    return node


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Walker:
    """Builds plain data from a node graph, recording positions and enforcing the bounds.

    Aliases make the graph a DAG (or, for a recursive alias, a cycle). Expanded sizes are computed first,
    memoized per node and without expanding anything, so an alias bomb is rejected at the key that would
    expand it, in time linear in the file, and a cycle is caught before any recursion runs away."""

    def __init__(self, *, aliases: bool, tags: bool, escapes: bool, long: bool) -> None:
        self.aliases = aliases  # without aliases a document is no bigger than its text: skip the size pass
        self.tags = tags  # without a `!` in the text every tag is a resolved one
        self.escapes = escapes  # without a `\` the text check before parsing covered every key and value
        self.long = long  # no key or value is longer than the text it is written in
        self.careful = tags or escapes or long  # else `_check` has nothing to find: most files skip it
        self.values: dict[Path, tuple[int, int]] = {}
        self.keys: dict[Path, tuple[int, int]] = {}
        self.count = 0
        self._sizes: dict[int, int] = {}

    def size(self, node: yaml.Node, depth: int = 0) -> int:
        known = self._sizes.get(id(node))
        if known is not None:
            if known < 0:
                raise _Fail(*_mark(node), "an alias refers to its own parent (a recursive alias)",
                            "remove the alias that points back into the value that contains it")
            return known
        if depth > MAX_DEPTH:
            raise _Fail(*_mark(node), f"the document nests deeper than {MAX_DEPTH} levels",
                        "Fleet documents are a few levels deep: flatten it")
        self._sizes[id(node)] = -1
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(self.size(n, depth + 1) for n in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(self.size(v, depth + 1) for _, v in node.value)
        self._sizes[id(node)] = min(total, 1 << 62)
        return total

    def _budget(self, node: yaml.Node, at: yaml.Node) -> None:
        if self.aliases and self.count + self.size(node) > MAX_NODES:
            raise _Fail(*_mark(at), f"the document expands to more than {MAX_NODES:,} values "
                        "(anchors and aliases multiply it)", "write the values out instead of nesting aliases")

    def _check(self, node: yaml.Node) -> None:
        """The tag, length and text of a key or value, where the checks before parsing could not see them."""
        if self.tags and node.tag not in _PLAIN_TAGS:
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            raise _Fail(*_mark(node), f"explicit tag `{printable(tag)}`: Fleet reads plain values only",
                        "remove the tag and write the value as plain text (`!!binary` and custom tags hide "
                        "what a value is from the people who review the change)")
        if not isinstance(node, yaml.ScalarNode):
            return
        if self.long and len(node.value) > MAX_SCALAR_CHARS:
            raise _Fail(*_mark(node), f"a {len(node.value):,}-character value, over the {MAX_SCALAR_CHARS:,}-character "
                        "limit", "shorten it: a long script or file belongs in the image, not in the YAML")
        if self.escapes:
            m = UNPRINTABLE_IN_LINES.search(node.value)
            if m:
                raise _Fail(*_mark(node), f"an escape in this value makes the control character {char_name(m.group())}",
                            "remove the escape (`\\e`, `\\x1b`, `\\u202e`, ...): values must be text that prints as "
                            "itself")

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.count += 1
        mark = node.start_mark
        self.values[path] = (mark.line + 1, mark.column + 1)
        if self.careful:
            self._check(node)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if len(path) >= MAX_DEPTH:  # aliases can nest deeper than the text does
            raise _Fail(mark.line + 1, mark.column + 1, f"the document nests deeper than {MAX_DEPTH} levels",
                        "Fleet documents are a few levels deep: flatten it (or write the aliased values out)")
        # A plain string item is built inline (its position, count and value as `build` would): most values
        # are, and a call per value was a third of the walk. Checks (`careful`) and other tags go to `build`.
        inline = not self.careful
        values = self.values
        if isinstance(node, yaml.SequenceNode):
            out_list = []
            for i, item in enumerate(node.value):
                if self.aliases:
                    self._budget(item, item)
                if inline and type(item) is yaml.ScalarNode and item.tag == _STR:
                    self.count += 1
                    imark = item.start_mark
                    values[(*path, i)] = (imark.line + 1, imark.column + 1)
                    out_list.append(item.value)
                else:
                    out_list.append(self.build(item, (*path, i)))
            return out_list
        assert isinstance(node, yaml.MappingNode)
        out: dict[str, Any] = {}
        keys = self.keys
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _Fail(*_mark(key_node), "merge keys (`<<:`) are not supported",
                            "write the fields out; Fleet files are short on purpose")
            if not isinstance(key_node, yaml.ScalarNode):
                raise _Fail(*_mark(key_node), "a mapping key must be a plain string", "quote the key")
            if self.careful:
                self._check(key_node)
            key = key_node.value
            sub = (*path, key)
            if key in out:
                raise _Fail(*_mark(key_node),
                            f"duplicate key `{excerpt(key)}` (first defined on line {keys[sub][0]})",
                            "remove one of the two; YAML would silently keep only the last")
            kmark = key_node.start_mark
            keys[sub] = (kmark.line + 1, kmark.column + 1)
            if self.aliases:
                self._budget(value_node, key_node)
            if inline and type(value_node) is yaml.ScalarNode and value_node.tag == _STR:
                self.count += 1
                vmark = value_node.start_mark
                values[sub] = (vmark.line + 1, vmark.column + 1)
                out[key] = value_node.value
            else:
                out[key] = self.build(value_node, sub)
        return out

    @staticmethod
    def _scalar(node: yaml.ScalarNode) -> Any:
        tag, value = node.tag, node.value
        if tag == _STR:
            return value
        try:
            return _typed(tag, value)
        except _Invalid as e:
            raise _Fail(*_mark(node), e.message, e.hint) from None


class _Invalid(Exception):
    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def _typed(tag: str, value: str) -> Any:
    """The value of a scalar YAML types as `tag` (not a string), or `_Invalid`."""
    if len(value) > MAX_NUMBER_CHARS:
        raise _Invalid(f"a {len(value):,}-character number, over the {MAX_NUMBER_CHARS}-character limit",
                       "write an ordinary number, or quote the value if it is text")
    if tag == "tag:yaml.org,2002:int" and _DECIMAL.match(value):  # the common case, without the constructor
        return int(value)
    try:
        return _construct(tag, value)
    except yaml.constructor.ConstructorError as e:
        raise _Invalid(f"invalid value: {e.problem}", "quote the value to make it a string") from None
    except (ValueError, OverflowError, KeyError, AttributeError, TypeError) as e:
        # `2026-13-45` is a timestamp to the resolver, not to `datetime`; `!!bool x`, `!!int x` and `!!timestamp x`
        # end in the constructors' own errors
        what = _KINDS.get(tag.replace("tag:yaml.org,2002:", ""), "a value of its tag")
        why = f" ({excerpt(str(e))})" if what == "a date" and isinstance(e, ValueError) else ""
        hint = "write a real date (YYYY-MM-DD)" if what == "a date" else f"write {what}"
        raise _Invalid(f"invalid value: `{excerpt(value)}` is not {what}{why}",
                       f"{hint}, or quote the value to make it a string") from None


_KINDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "timestamp": "a date", "null": "null"}


@functools.lru_cache(maxsize=4096)
def _construct(tag: str, value: str) -> Any:
    """YAML's constructor for one plain scalar, by tag and text: its results (numbers, booleans, None, dates) are
    immutable, so they can be shared. Called directly rather than through `construct_object`, which keeps every
    node it constructs in a dict that is never cleared: a long-running `fleet reconcile` grew by each float.
    The collection constructors (`!!seq x`, `!!map x`) are generators: run to the end, they refuse a scalar
    (ConstructorError), where their first step alone gave an empty list or dict and dropped the value."""
    constructor = _SCALAR.yaml_constructors.get(tag) or _SCALAR.yaml_constructors[None]
    made = constructor(_SCALAR, yaml.ScalarNode(tag, value))
    if isinstance(made, types.GeneratorType):
        for _ in made:   # its second step raises for a scalar node
            pass
        raise yaml.constructor.ConstructorError(None, None, "a collection's tag on a scalar")  # pragma: no cover
    return made


def _plain(text: str) -> Any:
    """A plain scalar's value, as libyaml's reading gives it; ValueError where that reading ends in a problem."""
    if text and text[0] not in _TYPED_FIRST and not _WILDCARD:   # `job-4581`, `team-048`: a string
        return text
    tag = _RESOLVE(yaml.ScalarNode, text, (True, False))
    if tag == _STR:
        return text
    try:
        return _typed(tag, text)
    except _Invalid:
        raise ValueError(text) from None
