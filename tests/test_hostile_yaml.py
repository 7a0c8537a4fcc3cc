"""Hostile YAML (issue 10, classes 1 and 2): bytes a pull request controls must never crash Fleet, hide other
problems, or reach the terminal as anything but text. Each case gets a located error with a hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler import output, yamlio
from reconciler.cli import cli, main
from reconciler.problems import Problem, printable
from reconciler.yamlio import MAX_DEPTH, MAX_NUMBER_CHARS, MAX_SCALAR_CHARS, ParsedDoc, parse

from builders import JOB, with_files

V = "jobs/vision/train.yaml"
ROOT = Path(__file__).resolve().parents[1]


def bad(text: str | bytes) -> Problem:
    doc = parse(V, text.encode() if isinstance(text, str) else text)
    assert isinstance(doc, Problem), doc
    assert doc.hint, "every error says how to fix it"
    return doc


def ok(text: str | bytes) -> ParsedDoc:
    doc = parse(V, text.encode() if isinstance(text, str) else text)
    assert isinstance(doc, ParsedDoc), doc
    return doc


def tree(tmp_path: Path, files: dict[str, str | bytes | None]) -> Path:
    for rel, content in with_files(files).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    return tmp_path


def fleet(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command in its own process: a segfault there is a failed test, not a dead pytest."""
    env = {k: v for k, v in os.environ.items() if k != "FLEET_DEBUG"}
    return subprocess.run([sys.executable, "-c", "from reconciler.cli import main; main()", *args],
                          capture_output=True, text=True, env=env, check=False, timeout=120, cwd=ROOT)


def _git(repo: Path, message: str) -> None:
    """Make `repo` a git repository with one commit of everything in it."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", message]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


# --- class 1: nesting and scalar sizes ------------------------------------------------------------------------


@pytest.mark.parametrize("verb", [["validate"], ["plan"], ["cost"]])
def test_sixty_kilobytes_of_brackets_is_a_located_error_not_a_segfault(verb: list[str], tmp_path: Path) -> None:
    """60,000 `[` overflowed the C stack in libyaml's composer: the process died with SIGSEGV (rc -11)."""
    repo = tree(tmp_path, {V: "[" * 60_000})
    r = fleet(*verb, "--repo", str(repo))
    assert r.returncode == 1, (r.returncode, r.stderr[-500:])
    out = r.stdout + r.stderr
    assert f"{V}:1:{MAX_DEPTH + 1}: error: the document nests deeper than {MAX_DEPTH} levels" in out, out
    assert "internal error" not in out and "Traceback" not in out


def test_sixty_kilobytes_of_brackets_do_not_kill_check(tmp_path: Path) -> None:
    _git(tree(tmp_path, {}), "evil")
    (tmp_path / V).write_text("[" * 60_000)
    r = fleet("check", "--repo", str(tmp_path), "--base", "HEAD", "--author", "someone", "--format", "json")
    assert r.returncode == 1 and json.loads(r.stdout)["violations"], (r.returncode, r.stderr[-500:])


@pytest.mark.parametrize(("text", "line", "col"), [
    ("[" * 3000 + "]" * 3000, 1, MAX_DEPTH + 1),                        # RecursionError before
    ("{a: " * 3000 + "}" * 3000, 1, 4 * MAX_DEPTH + 1),
    ("a:\n" + "".join(" " * i + "-\n" for i in range(1, 200)), MAX_DEPTH + 1, MAX_DEPTH + 1),
    ("- " * 2000 + "x\n", 1, 2 * MAX_DEPTH + 1),                       # compact block sequences on one line
    ("a: " + "[b: " * 40 + "]" * 40 + "\n", 1, 2 * MAX_DEPTH + 1),    # implicit pair mappings inside flow lists
    ("a:\n" + "".join(" " * i + "b:\n" for i in range(1, 40)) + " " * 40 + "c\n", MAX_DEPTH + 1, MAX_DEPTH + 1),
])
def test_deep_nesting_is_located_before_the_parser_recurses(text: str, line: int, col: int) -> None:
    p = bad(text)
    assert (p.message, p.line, p.col) == (f"the document nests deeper than {MAX_DEPTH} levels", line, col)


_LIMIT = yaml.scanner.ScannerError("while increasing flow level", None, "exceeded maximum nesting depth",
                                   yaml.Mark("<unicode string>", 1000, 0, 1000, None, 0))
"""What PyYAML 6.0.4's libyaml raises at its own nesting limit (1,000 levels) on `[` * 3000."""


class _EventsWithALimit(yamlio._Loader):  # type: ignore[misc,name-defined]
    """libyaml's scanner reads ahead of the events: on deep flow nesting its limit fires before the first event."""

    def get_event(self) -> Any:
        raise _LIMIT


class _ComposerWithALimit(yamlio._FastLoader):
    def get_single_node(self) -> Any:
        raise _LIMIT


@pytest.fixture
def libyaml_with_a_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """libyaml as PyYAML 6.0.4 builds it, whatever PyYAML this runs on (the lock pins 6.0.3)."""
    monkeypatch.setattr(yamlio, "_Loader", _EventsWithALimit)
    monkeypatch.setattr(yamlio, "_FastLoader", _ComposerWithALimit)


@pytest.mark.usefixtures("libyaml_with_a_limit")
@pytest.mark.parametrize(("text", "line", "col"), [
    ("[" * 3000 + "]" * 3000, 1, MAX_DEPTH + 1),
    ("{a: " * 3000 + "}" * 3000, 1, 4 * MAX_DEPTH + 1),
    ("a:\n" + "".join(" " * i + "-\n" for i in range(1, 200)), MAX_DEPTH + 1, MAX_DEPTH + 1),
])
def test_deep_nesting_is_located_whatever_libyaml_limits(text: str, line: int, col: int) -> None:
    """A fresh clone with PyYAML 6.0.4 (issue 20 item 9) said `1:1001: invalid YAML: exceeded maximum nesting
    depth`: its libyaml stopped before Fleet's depth pass saw level 33, and the composer reported its error."""
    p = bad(text)
    assert (p.message, p.line, p.col) == (f"the document nests deeper than {MAX_DEPTH} levels", line, col)
    assert "flatten" in p.hint


@pytest.mark.usefixtures("libyaml_with_a_limit")
def test_pyyamls_own_nesting_limit_is_fleets_error() -> None:
    """Where only PyYAML's limit fires (Fleet's pass found no level over its own), the file still gets Fleet's
    error at PyYAML's position, not `invalid YAML: ...` with a hint about quoting."""
    p = bad("a: [1]\n" * 20)
    assert (p.message, p.line, p.col) == (f"the document nests deeper than {MAX_DEPTH} levels", 1, 1001)
    assert "flatten" in p.hint


def test_the_depth_limit_is_exact() -> None:
    # the root mapping is level 1; its value lists are levels 2..
    assert ok("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n").data["a"]
    assert "nests deeper" in bad("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n").message


def test_aliases_cannot_nest_past_the_limit() -> None:
    """Each anchor nests 30 levels, within the limit in the text; 40 of them through aliases nest 1,200."""
    text = "".join(f"a{i}: &a{i} " + "[" * 30 + (f"*a{i - 1}" if i else "x") + "]" * 30 + "\n" for i in range(40))
    assert "nests deeper" in bad(text).message


@pytest.mark.parametrize("number", ["9" * 5000, "0x" + "f" * 5000, "1." + "5" * 5000, "-" + "1" * 100])
def test_a_number_of_thousands_of_digits_is_located(number: str) -> None:
    """Python refuses int() of over 4,300 digits: `internal error: ValueError` before."""
    p = bad(JOB.replace("count: 16", f"count: {number}"))
    assert (p.line, p.col) == (9, 12)
    assert p.message == f"a {len(number):,}-character number, over the {MAX_NUMBER_CHARS}-character limit"


def test_the_number_limit_is_exact_and_quoted_digits_are_text() -> None:
    assert ok(f"a: {'1' * MAX_NUMBER_CHARS}\nb: '{'9' * 5000}'\n").data["a"] == int("1" * MAX_NUMBER_CHARS)
    assert "-character number" in bad(f"a: {'1' * (MAX_NUMBER_CHARS + 1)}\n").message


@pytest.mark.parametrize("text", [
    "image: " + "a" * (MAX_SCALAR_CHARS + 1) + "\n",
    "? " + "k" * (MAX_SCALAR_CHARS + 1) + "\n: 1\n",                    # a key
    "v: |\n" + "  line\n" * (MAX_SCALAR_CHARS // 5 + 1),               # a block scalar
])
def test_an_overlong_key_or_value_is_located(text: str) -> None:
    p = bad(text)
    assert "-character value, over the 65,536-character limit" in p.message and p.line == 1


# --- class 2: bytes that are not text -------------------------------------------------------------------------


@pytest.mark.parametrize(("char", "name"), [
    ("\x00", "U+0000 (NUL)"), ("\x07", "U+0007 (BEL)"), ("\x1b", "U+001B (ESC)"), ("\x7f", "U+007F (DEL)"),
    ("\x85", "U+0085 (NEL)"), ("\x9b", "U+009B"), ("\ufffe", "U+FFFE"), ("\u2028", "U+2028 (LINE SEPARATOR)"),
    ("\u202e", "U+202E (RIGHT-TO-LEFT OVERRIDE)"), ("\u2066", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
])
def test_a_character_that_is_not_text_is_located(char: str, name: str) -> None:
    p = bad(JOB.replace("train:1", f"tr{char}ain:1"))
    assert (p.line, p.col) == (13, 31)
    assert f"character {name} in the file" in p.message


def test_a_byte_order_mark_is_fine_first_but_not_later() -> None:
    ok("\ufeffname: a\n")
    p = bad("\ufeffname: a\nteam: \ufeffb\n")
    assert (p.line, p.col, p.message) == (2, 7, "byte order mark (U+FEFF) inside the file")


def test_cr_only_line_endings_are_rejected_not_read_as_an_empty_file() -> None:
    p = bad("# a job\rname: train\rteam: vision\r")                # was "the file is empty"
    assert (p.line, p.col) == (1, 8) and p.message.startswith("carriage return (CR) without a line feed")
    assert "LF line endings" in p.hint
    assert ok(JOB.replace("\n", "\r\n")).data["name"] == "train"   # CRLF is fine


@pytest.mark.parametrize(("text", "tag", "line", "col"), [
    (JOB.replace("image: us-docker.pkg.dev/ml/train:1", "image: !!binary dXMtZG9ja2Vy"), "!!binary", 13, 8),
    (JOB.replace("command: [python, -m, train]", "command: !cmd [python, -m, train]"), "!cmd", 14, 10),
    (JOB.replace("env:", "env: !!omap"), "!!omap", 15, 6),
    ("name: train\n!!binary dGVhbQ==: vision\n", "!!binary", 2, 1),                   # on a key
    ("name: !<tag:example.com,2026:x> train\n", "tag:example.com,2026:x", 1, 7),
    ("name: !!python/object:os.system train\n", "!!python/object:os.system", 1, 7),
    ("name: !a%1Bb x\n", "!a\\x1bb", 1, 7),                                           # escaped in the message
])
def test_an_explicit_tag_is_rejected(text: str, tag: str, line: int, col: int) -> None:
    """`!!binary` was decoded silently: a reviewer saw base64 where the cluster got an image name."""
    p = bad(text)
    assert (p.line, p.col, p.message) == (line, col, f"explicit tag `{tag}`: Fleet reads plain values only")


def test_standard_tags_and_exclamation_marks_in_text_are_fine_but_not_a_set() -> None:
    assert ok("a: !!str 8\nb: 'hi!'\nc: !!int '3'\n").data == {"a": "8", "b": "hi!", "c": 3}
    assert bad("a: !!str 8\nb: !!set {x, y}\n").message == "explicit tag `!!set`: Fleet reads plain values only"


@pytest.mark.parametrize(("text", "name"), [
    ('name: "\\e[2J\\e[Hok: no problems found"\n', "U+001B (ESC)"),
    ('name: "a\\x07"\n', "U+0007 (BEL)"),
    ('name: "a\\rok"\n', "U+000D (CR)"),
    ('name: "a\\u202eb"\n', "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ('name: "\\N"\n', "U+0085 (NEL)"),
    ('name: a\n"k\\0": 1\n', "U+0000 (NUL)"),
])
def test_an_escape_that_makes_a_control_character_is_rejected(text: str, name: str) -> None:
    p = bad(text)
    assert p.message == f"an escape in this value makes the control character {name}"


def test_escaped_tabs_and_newlines_are_fine_but_not_a_vertical_tab() -> None:
    assert ok('v: "a\\tb\\nc"\n').data == {"v": "a\tb\nc"}
    assert bad('v: "a\\tb\\vc"\n').message.endswith("U+000B (VT)")


def test_a_file_that_is_not_text_does_not_hide_other_problems(tmp_path: Path) -> None:
    """A NUL byte once stopped the whole run with `internal error: ReaderError`, naming no file."""
    repo = tree(tmp_path, {V: JOB.replace("train:1", "train:1\x00"),
                           "jobs/vision/other.yaml": JOB.replace("name: train", "name: other").replace(
                               "priority: production", "priority: nope")})
    r = CliRunner().invoke(cli, ["validate", "--repo", str(repo), "--format", "json"])
    assert r.exit_code == 1, r.output
    found = {(p["path"], p["line"]) for p in json.loads(r.output)["problems"]}
    assert found == {(V, 13), ("jobs/vision/other.yaml", 3)}, found


# --- nothing from a file reaches the terminal unescaped --------------------------------------------------------

FORGED = "\x1b[2J\x1b[H\rok: no problems found\n\x07\u202e"


def test_printable_escapes_every_control_character_and_keeps_text() -> None:
    assert printable(FORGED) == "\\x1b[2J\\x1b[H\\x0dok: no problems found\\x0a\\x07\\u202e"
    assert printable("a\tb\nc\x1b", lines=True) == "a\tb\nc\\x1b"
    assert printable("jobs/vision/trän.yaml: `ok`") == "jobs/vision/trän.yaml: `ok`"


@pytest.mark.parametrize("fmt", [output.text, output.github])
def test_problem_output_quotes_file_content_escaped(fmt: object) -> None:
    problem = Problem(f"jobs/{FORGED}.yaml", 1, 1, f"`{FORGED}` is not a valid name", field=FORGED, hint=FORGED)
    text = fmt([problem])  # type: ignore[operator]
    assert not any(c in text for c in "\x1b\r\x07\u202e"), repr(text)
    assert ("%0Dok: no problems found%0A" if fmt is output.github else "\\x0dok: no problems found\\x0a") in text
    assert text.count("\n") == (3 if fmt is output.text else 1), repr(text)  # problem, hint, summary / one command
    assert "\nok: no problems found" not in text


def test_a_value_cannot_forge_the_ok_line(tmp_path: Path) -> None:
    repo = tree(tmp_path, {V: JOB.replace("name: train", 'name: "x\\nok: no problems found\\t"')})
    r = CliRunner().invoke(cli, ["validate", "--repo", str(repo)])
    assert r.exit_code == 1
    assert "ok: no problems found" not in r.output.splitlines(), r.output
    assert f"{V}:1:7: error: `x\\x0aok: no problems found\\x09` is not a valid name" in r.output, r.output


def test_a_message_quotes_only_the_start_of_a_long_value(tmp_path: Path) -> None:
    """A 60 KB value that fails a check once came back whole in the message, on every output format."""
    long = "x" * 60_000
    repo = tree(tmp_path, {V: JOB.replace("train:1\n", f"train:1\nkind: {long}\nreplicas: {long}\n? {long}\n: 1\n")})
    r = CliRunner().invoke(cli, ["validate", "--repo", str(repo), "--format", "json"])
    messages = sorted(p["message"] for p in json.loads(r.output)["problems"])
    cut = "x" * 60 + "... (59,940 more characters)"
    assert messages == [f"`replicas` must be a whole number, not str `{cut}`", f"`{cut}` is not a valid kind",
                        f"unknown field `{cut}`"], messages
    assert bad(f"? {long}\n: 1\n? {long}\n: 2\n").message == f"duplicate key `{cut}` (first defined on line 1)"


def test_an_error_message_quoting_an_argument_is_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tree(tmp_path, {})
    with pytest.raises(SystemExit) as exit_:
        main(["explain", "vision/\x1b[2Jtrain", "--repo", str(repo)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "error: no job `vision/\\x1b[2Jtrain` in the repository" in err and "\x1b" not in err, err


def test_a_commit_subject_in_the_cost_report_is_escaped(tmp_path: Path) -> None:
    """The history table quotes commit subjects, which the pull request's author writes."""
    _git(tree(tmp_path, {}), "evil \x1b[2J\x1b]0;pwned\x07")
    r = fleet("cost", "--history", "1", "--repo", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "evil \\x1b[2J\\x1b]0;pwned\\x07" in r.stdout and "\x1b" not in r.stdout, r.stdout[-800:]


def test_a_snapshot_file_quoted_by_status_is_escaped(tmp_path: Path) -> None:
    """`fleet status --observed FILE` prints the problems a snapshot file holds: a file like any other."""
    repo = tree(tmp_path / "repo", {})
    problem = {"resource": "nodes", "kind": "refused", "message": "refused \x1b[2J\x1b[Hok: all clear\x07", "hint": "x"}
    snap = {"version": 1, "observed_at": "2026-11-23T04:00:00+00:00", "clusters": [
        {"name": "gke-usc1", "status": "unreachable", "problems": [problem]}]}
    (tmp_path / "snap.json").write_text(json.dumps(snap))
    r = fleet("status", "--repo", str(repo), "--observed", str(tmp_path / "snap.json"))
    assert r.returncode == 2, r.stderr          # its one cluster was not read: what runs is unknown (issue 20)
    assert "\x1b" not in r.stderr
    assert "refused \\x1b[2J\\x1b[Hok: all clear\\x07" in r.stdout and "\x1b" not in r.stdout, r.stdout
