"""The strict YAML reader: positions, types and bounds."""

from __future__ import annotations

import pytest

from reconciler.problems import Problem
from reconciler.yamlio import MAX_NODES, ParsedDoc, parse


def ok(text: str) -> ParsedDoc:
    doc = parse("x.yaml", text.encode())
    assert isinstance(doc, ParsedDoc), doc
    return doc


def bad(text: str | bytes) -> Problem:
    doc = parse("x.yaml", text.encode() if isinstance(text, str) else text)
    assert isinstance(doc, Problem), doc
    return doc


def test_positions_of_keys_and_values() -> None:
    doc = ok("name: a\noptions:\n  - accelerator: tpu-v5p\n    count: 8\n")
    assert doc.data == {"name": "a", "options": [{"accelerator": "tpu-v5p", "count": 8}]}
    assert doc.positions.values[("name",)] == (1, 7)
    assert doc.positions.keys[("options", 0, "count")] == (4, 5)
    assert doc.positions.values[("options", 0, "count")] == (4, 12)
    # a missing field is located at its nearest existing parent
    assert doc.positions.of(("options", 0, "topology")) == (3, 5)


@pytest.mark.parametrize(("text", "value"), [
    ("v: 8", 8), ("v: 1.5", 1.5), ("v: true", True), ("v: ~", None), ("v: '8'", "8"), ("v: 4x4x4", "4x4x4"),
    ("v: no", False),  # YAML 1.1: pydantic then rejects it where a string belongs, with a quoting hint
])
def test_scalar_types(text: str, value: object) -> None:
    assert ok(text).data["v"] == value


def test_bom_is_accepted() -> None:
    assert ok("\ufeffname: a\n").data == {"name": "a"}


def test_aliases_within_bounds_expand() -> None:
    doc = ok("a: &x [1, 2]\nb: *x\n")
    assert doc.data == {"a": [1, 2], "b": [1, 2]}


def test_alias_bomb_is_rejected_quickly() -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    p = bad("\n".join(levels) + "\n")  # 10^9 values if expanded
    assert f"more than {MAX_NODES:,} values" in p.message
    assert p.line == 5  # the first key whose value would pass the bound


def test_tab_inside_value_is_fine_but_not_in_indentation() -> None:
    assert ok('v: "a\tb"\n').data == {"v": "a\tb"}
    p = bad("a:\n\tb: 1\n")
    assert (p.line, p.col, p.message) == (2, 1, "tab character in indentation")


def test_non_string_key_is_rejected() -> None:
    p = bad("? [a, b]\n: 1\n")
    assert "plain string" in p.message


def test_undecodable_position_counts_bytes() -> None:
    p = bad(b"a: 1\nb: \xff\n")
    assert (p.line, p.col) == (2, 4)
