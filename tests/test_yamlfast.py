"""The fast reader (reconciler/yamlfast.py) against libyaml: the same data wherever it answers, and libyaml's
answer (data or problem) wherever it does not; positions found when asked; scalars YAML types but Python
refuses are problems, not tracebacks; parsing keeps nothing alive."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import yamlfast, yamlio
from reconciler.problems import Problem
from reconciler.yamlio import ParsedDoc, parse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from generate import generate  # noqa: E402


def typed(value: Any) -> Any:
    """`value` with each scalar's type beside it: `1 == 1.0 == True` must not hide a wrongly typed value."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, repr(value))


def libyaml(text: str) -> Any:
    """What libyaml and the walker give for `text` (checked as `parse` checks it): data, or the problem."""
    try:
        text = yamlio._decode(text.encode())
        yamlio._check_nesting(text)
        return typed(yamlio.read_with_libyaml(text)[0])
    except yamlio._Fail as f:
        return ("problem", f.line, f.col, f.message)


def fast(text: str) -> Any:
    data = yamlfast.read(text, yamlio._plain, yamlio.MAX_DEPTH)
    return None if data is None else typed(data)


def agree(text: str) -> bool:
    """The fast reader's data and positions are libyaml's wherever it answers, and `parse` gives libyaml's
    answer. True when the fast reader answered."""
    expected = libyaml(text)
    got = fast(text)
    spots = yamlfast.positions(text, yamlio._plain, yamlio.MAX_DEPTH)
    assert (got is None) == (spots is None), text
    if got is not None:
        assert got == expected, text
        assert spots is not None
        want = yamlio.read_with_libyaml(text)[1]
        assert spots[0] == want.values, text
        assert spots[1] == want.keys, text
        for field in [*(got or {}), "not-written"]:   # a top-level field, found without finding all positions
            for key in (False, True):
                assert yamlfast.top_level(text, field, key=key) == want.of((field,), key=key), (text, field, key)
    doc = parse("x.yaml", text.encode())
    if isinstance(doc, Problem):
        assert expected == ("problem", doc.line, doc.col, doc.message), text
    else:
        assert typed(doc.data) == expected, text
    return got is not None


def repository_files() -> dict[str, str]:
    tracked = [p for top in ("fleet", "policies", "jobs", "robots", "deployments", "examples")
               for p in sorted((ROOT / top).rglob("*.yaml"))]
    return {str(p.relative_to(ROOT)): p.read_text() for p in tracked}


def test_every_file_of_the_example_fleet_reads_the_same() -> None:
    files = repository_files()
    answered = {path for path, text in files.items() if agree(text)}
    jobs = [p for p in files if p.startswith("jobs/")]
    assert len(jobs) >= 20
    # the reader is there for job files: if it stopped reading them the plan would silently slow down again
    assert len(answered & set(jobs)) >= 0.9 * len(jobs), sorted(set(jobs) - answered)


def test_every_file_of_a_generated_fleet_reads_the_same() -> None:
    files = generate(clusters=20, pools=80, teams=6, jobs=600, seed=11)
    answered = [path for path, text in files.items() if agree(text)]
    assert len(answered) == len(files), sorted(set(files) - set(answered))


# Pieces of documents, in the subset and just outside it: values YAML types in unexpected ways, quoting,
# indicators, comments, flow collections, things only libyaml reads or rejects.
# (a document is in the subset only if every piece is: about a fifth of them are)
SCALARS = ["a", "job-1", "8", "-3", "0x1f", "0o17", "1_000", "1:30", "1.5", "-m", "--port", ".inf", "-.inf", ".nan",
           "1e3", "on", "no", "Yes", "null", "~", "2026-11-01", "2026-11-01 10:00:00", "'8'", "'it''s'", "''",
           '"x y"', '""', "a b", "a#b", "a:b", "us-docker.pkg.dev/ml/t:1", "a,b", "?a", ":a", "{}", "[]"] * 8 + [
           "2026-13-45", "<<", "=", "a #b", "a: b", "a:", "&x a", "*x", "!!str 8", "!x a", "|", ">", "- a", "-",
           "@a", "`a", "%a", "? a", "[a]", "'a", '"a', "'a' b", "x" * 70, "1" * 70, "{a: 1}", "a # c", "'a' # c",
           "é", "naïve ü", "'日本'"]
FLOW = ["a", "8", "-m", "--port", "'8'", '"a b"', "a b", "on", "~", ".inf", "'it''s'", "1:30", "a.b/c", "é"] * 8 + [
        "'a, b'", "a:b", "a: b", "", "[x]", "{x: 1}", "#a", "a #b", "*x", "2026-13-45", "?a", ":a", "-"]
KEYS = ["name", "count", "a.b/c-d", "on", "1", "k", "image", "x_y"] * 8 + ["<<", "name", "'q'", "a b", "-k", "x?"]


@st.composite
def documents(draw: st.DrawFn) -> str:
    lines: list[str] = []

    def value(indent: int, depth: int) -> None:
        kind = draw(st.sampled_from(["scalar", "scalar", "flow-list", "flow-map", "map", "list"]
                                    if depth < 3 else ["scalar", "flow-list"]))
        if kind == "scalar":
            lines[-1] += " " + draw(st.sampled_from(SCALARS))
        elif kind == "flow-list":
            lines[-1] += " [" + ", ".join(draw(st.lists(st.sampled_from(FLOW), max_size=4))) + "]"
        elif kind == "flow-map":
            pairs = draw(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(FLOW)), max_size=3))
            lines[-1] += " {" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
        elif kind == "map":
            mapping(indent + draw(st.sampled_from([2, 2, 4, 1])), depth + 1)
        else:
            dash = indent + draw(st.sampled_from([0, 2, 2, 3]))
            for _ in range(draw(st.integers(1, 3))):
                if draw(st.booleans()):
                    lines.append(" " * dash + "- " + draw(st.sampled_from(KEYS)) + ":")
                    value(dash + 2, depth + 1)
                    for _ in range(draw(st.integers(0, 2))):
                        lines.append(" " * (dash + 2) + draw(st.sampled_from(KEYS)) + ":")
                        value(dash + 2, depth + 1)
                else:
                    lines.append(" " * dash + "-")
                    value(dash, depth + 1)
        if draw(st.integers(0, 9)) == 0:
            stray = ["# comment", "  # indented comment", "", "   ", "  more text", "- stray"]
            lines.append(draw(st.sampled_from(stray)))

    def mapping(indent: int, depth: int) -> None:
        for _ in range(draw(st.integers(1, 4))):
            lines.append(" " * indent + draw(st.sampled_from(KEYS)) + ":")
            value(indent, depth)

    mapping(0, 0)
    endings = ["\n", "", "\n\n", "\n# end\n"] * 3 + ["\n---\n", "\n...\n", "\n--- x\n"]
    return "\n".join(lines) + draw(st.sampled_from(endings))


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(documents())
def test_generated_documents_read_the_same(text: str) -> None:
    agree(text)


def test_the_generated_documents_reach_both_readers() -> None:
    """The property above means something only if the fast reader answers for many of them and not for all."""
    answered = []

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(documents())
    def run(text: str) -> None:
        answered.append(agree(text))

    run()
    assert 0.1 * len(answered) < sum(answered) < 0.9 * len(answered)


def test_positions_are_found_when_asked_and_match_libyamls(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "# a job\nname: a\noptions:\n- {accelerator: tpu-v5p, count: 8}\nenv: {SEED: '7'}\n"
    expected = yamlio.read_with_libyaml(text)[1]
    doc = parse("x.yaml", text.encode())
    assert isinstance(doc, ParsedDoc) and fast(text) is not None

    def no_libyaml(text: str) -> None:
        raise AssertionError("a file the fast reader read is not read again by libyaml for its positions")

    monkeypatch.setattr(yamlio, "read_with_libyaml", no_libyaml)
    assert doc.positions == expected
    assert doc.positions.values[("options", 0, "count")] == (4, 33)
    assert doc.positions.keys[("env", "SEED")] == (5, 7)


def test_a_date_python_cannot_make_is_a_problem_not_a_traceback() -> None:
    for text in ("start: 2026-13-45\n", "start: [2026-02-30]\n", "start: 0000-01-01\n"):
        doc = parse("jobs/a/x.yaml", text.encode())
        assert isinstance(doc, Problem), doc
        assert doc.message.startswith("invalid value:") and doc.col in (8, 9), doc
        assert "quote the value" in doc.hint


def test_parsing_keeps_no_nodes_alive() -> None:
    """PyYAML's `construct_object` keeps every node it constructs; called per value it grew a long-running
    `fleet reconcile` by each float, date or boolean of every file it read again."""
    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, yaml.Node))

    before = alive()
    for i in range(300):  # an anchor sends the file to libyaml; each float, date and boolean is its own node
        doc = parse(f"x{i}.yaml", f"a: &x {i}.5\nb: 2026-11-{1 + i % 28:02d}\nc: true\nd: *x\n".encode())
        assert isinstance(doc, ParsedDoc) and doc.data["a"] == i + 0.5
    assert alive() - before < 50


def test_lines_read_before_give_equal_values_that_no_two_documents_share() -> None:
    text = "name: a\ncommand: [python, -m, train]\nenv: {SEED: '7'}\noptions:\n  - {accelerator: tpu-v5p, count: 8}\n"
    first, second = fast(text), yamlfast.read(text, yamlio._plain, yamlio.MAX_DEPTH)
    third = yamlfast.read(text, yamlio._plain, yamlio.MAX_DEPTH)
    assert second is not None and third is not None and typed(second) == first
    second["command"].append("x")
    second["env"]["SEED"] = "8"
    second["options"][0]["count"] = 9
    assert typed(third) == first


def test_a_line_read_before_is_placed_where_it_stands_now() -> None:
    """The memo of lines keeps positions relative to the line: the same line at another line and column
    (another document, a deeper list, a list item) is placed there, as libyaml places it."""
    texts = ["name: a\noptions:\n  - {accelerator: tpu-v5p, count: 8}\nenv: {SEED: '7', RUN: x}\n",
             "# first\n\nname: b\nenv: {SEED: '7', RUN: x}\ngroup:\n    options:\n"
             "        - {accelerator: tpu-v5p, count: 8}\n",
             "name: c\nlist:\n- - {accelerator: tpu-v5p, count: 8}\n- env: {SEED: '7', RUN: x}\n"]
    for _ in range(2):   # the second round reads every line from the memo
        for text in texts:
            assert agree(text), text


def deep(levels: int, leaf: str) -> str:
    lines = [" " * i + f"k{i}:" for i in range(levels)]
    lines[-1] += " " + leaf
    return "\n".join(lines) + "\n"


# Found by an adversarial review of the fast reader (each one disagreed with libyaml, or crashed, before its fix).
REVIEWED = [
    "k" * 1025 + ": 1\n",                        # libyaml refuses a key of over 1,024 characters
    "a: 1\n" + "k" * 1025 + ": 2\n",
    "a:\n- " + "k" * 1025 + ": 1\n",
    "a: {" + "k" * 1025 + ": 1}\n",
    "k" * 1000 + ": 1\n",                        # one it takes
    "a: \xa0b\nc: 1\n",                          # a no-break space is text, not the space before a value
    "a: \xa0b\n",
    "kind: training\nname: \xa0job\n",
    "a: b\u3000c\nd: \u2003\n",
    deep(31, "[a]"), deep(32, "[a]"), deep(32, "{b: 1}"), deep(32, "x"), deep(33, "[]"),   # nesting at the limit
    "a:\n" + "- " * 31 + "[x]\n", "a:\n" + "- " * 30 + "[x]\n",
]


@pytest.mark.parametrize("text", REVIEWED, ids=range(len(REVIEWED)))
def test_what_a_review_found_reads_as_libyaml_reads_it(text: str) -> None:
    for _ in range(2):   # the second time from the memo of lines
        agree(text)
    doc = parse("x.yaml", text.encode())
    if isinstance(doc, ParsedDoc):
        for field in doc.data:
            assert doc.locate((field,)) == yamlio.read_with_libyaml(text)[1].of((field,))


def test_the_first_reading_of_a_line_is_not_the_memos_either() -> None:
    text = "name: a\ncommand: [python, -m, train, first-reading]\nenv: {A: b}\n"
    first = parse("a.yaml", text.encode())
    assert isinstance(first, ParsedDoc)
    first.data["command"].append("Z")
    first.data["env"]["A"] = "changed"
    again = parse("b.yaml", text.encode())
    assert isinstance(again, ParsedDoc)
    assert again.data == {"name": "a", "command": ["python", "-m", "train", "first-reading"], "env": {"A": "b"}}


@pytest.mark.parametrize("text", ["a: !!seq x\n", "a: !!map x\n", "a: [!!seq x]\n", "a: !!bool x\n", "a: !!bool ''\n",
                                  "a: !!timestamp x\n", "a: !!timestamp 2026-13-45\n", "a: !!int x\n", "a: !!int 0x\n",
                                  "a: !!float x\n", "a: !!value x\n"])
def test_a_scalar_its_tag_refuses_is_a_problem_not_a_traceback_or_an_empty_value(text: str) -> None:
    """`!!seq x` gave an empty list (the value dropped) or, called directly, a generator; `!!bool x` and
    `!!timestamp x` ended in a KeyError and an AttributeError."""
    doc = parse("jobs/a/x.yaml", text.encode())
    assert isinstance(doc, Problem), doc
    assert doc.message.startswith("invalid value") and "quote the value" in doc.hint and doc.line == 1, doc
