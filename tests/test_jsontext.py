"""jsontext.dumps_indented writes exactly what json.dumps(indent=2) writes (the plan's JSON is a contract)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from reconciler import jsontext
from reconciler.jsontext import dumps_indented

CASES: list[Any] = [
    {}, [], "", 0, -1, 1.5, 1e300, math.inf, -math.inf, True, False, None,
    {"a": [], "b": {}, "c": [1, [2, [3, {}]], {"d": None}], "e": True, "f": 2.0},
    {"é": "ü\u2028\x1b\"\\", "tuple": (1, "x", (2.5, False))},
    [{"job": "t/j", "units": [0, 1, 2], "hourly_usd": 98.32, "reason": "", "ok": True}] * 3,
    {"nested": [[[[[]]]]], "big": 10**30, "neg": -0.0},
]


@pytest.mark.parametrize("doc", CASES)
def test_same_text_as_json_dumps(doc: Any) -> None:
    assert dumps_indented(doc) == json.dumps(doc, indent=2)


def test_nan_and_unusual_values_as_json_dumps() -> None:
    assert dumps_indented([math.nan]) == json.dumps([math.nan], indent=2)

    class Text(str):
        pass

    odd = {1: "int key", None: Text("subclass"), 2.5: [True]}
    assert dumps_indented(odd) == json.dumps(odd, indent=2)


def test_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError):
        dumps_indented({"x": object()})
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        dumps_indented(loop)


@pytest.mark.parametrize("doc", [CASES[-1], {1: "an int key: json.dumps writes it"}])
def test_end_is_joined_after_the_text(doc: Any) -> None:
    """`end` follows the text, on the fast path and on json.dumps's alike (the plan's JSON ends with a newline)."""
    assert dumps_indented(doc, "\n") == json.dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize("doc", [*CASES, {1: "an int key: json.dumps writes it"}])
def test_the_chunks_join_to_the_text(doc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet plan --format json` prints the plan in chunks (a 100,000-job plan is 53 MB): joined, they are the
    text, wherever a chunk ends; a document json.dumps refuses fails before the first chunk."""
    for size in (1, 2, 3, jsontext.CHUNK_PIECES):
        monkeypatch.setattr(jsontext, "CHUNK_PIECES", size)
        chunks = list(jsontext.indented_chunks(doc, "\n"))
        assert "".join(chunks) == json.dumps(doc, indent=2) + "\n" and all(chunks)
    broken = jsontext.indented_chunks([1, 2, {"x": object()}])
    with pytest.raises(TypeError):
        next(broken)
