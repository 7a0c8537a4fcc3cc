"""Traces for `fleet simulate` (DESIGN 4c): JSON Lines, one job document per line. Pure.

Each line is a job document with the fields of `jobs/<team>/<job>.yaml`, plus `submit_at_minutes` (from the
start of the simulation, >= 0) and optionally `actual_hours` (the true runtime on the first option; default
`duration_hours`) and `restart_minutes` (what each interruption costs the job: restore and warm-up; default
the fault model's). Blank lines and lines starting with `#` are skipped.

Loading goes through the same models and rules as the repository's own jobs: every line is built into a
`Job` (unknown fields, wrong types) and then the whole trace is validated against the repository's clusters
and policies by `validate` (team exists, options fit some pool, quota ceilings, priority ceilings, secrets in
env). Every problem names the trace file, the line, the column and the field, with a hint, exactly as
`fleet validate` does for a YAML file. A JSON line is also a YAML flow mapping, so a line with a problem is
parsed again by the strict YAML reader (`yamlio.parse`) only to locate the field; good lines take the fast
`json` path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..catalog import Catalog
from ..load import build, load
from ..models import Job
from ..problems import Problem, Severity
from ..validate import Validated, validate
from ..yamlio import ParsedDoc, parse

SUBMIT = "submit_at_minutes"
ACTUAL = "actual_hours"
RESTART = "restart_minutes"
MAX_TRACE_MINUTES = 10 * 365 * 24 * 60   # ten years: beyond any simulation, low enough to catch unit mix-ups


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: the job document, when it arrives and how long it truly runs."""

    job: Job
    submit_minutes: float
    actual_hours: float
    line: int
    restart_minutes: float | None = None


@dataclass(frozen=True)
class Trace:
    """A loaded trace: its jobs by arrival (ties by id), and the repository validated with these jobs in it
    (pools, unit prices and every job's resolved options, as the planner reads them)."""

    path: str
    jobs: tuple[TraceJob, ...]
    validated: Validated


def job_path(job: Job) -> str:
    """Where the job would live in the repository (the validator checks team folder and file name)."""
    return f"jobs/{job.team}/{job.name}.yaml"


class _LineDocs(Mapping[str, ParsedDoc]):
    """The parsed documents the validator locates fields in: the repository's, plus each trace line parsed
    (strict YAML, for positions) only when a problem is reported on it."""

    def __init__(self, base: Mapping[str, ParsedDoc], lines: Mapping[str, tuple[int, bytes]]) -> None:
        self._base, self._lines, self._parsed = base, lines, dict[str, ParsedDoc]()

    def __getitem__(self, path: str) -> ParsedDoc:
        if path in self._base:
            return self._base[path]
        if path not in self._parsed:
            _, raw = self._lines[path]
            doc = parse(path, raw)
            if isinstance(doc, Problem):
                raise KeyError(path)
            self._parsed[path] = doc
        return self._parsed[path]

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from self._lines

    def __len__(self) -> int:
        return len(self._base) + len(self._lines)


def _located(problem: Problem, trace: str, line: int) -> Problem:
    return replace(problem, path=trace, line=line)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _col(raw: bytes, key: str) -> int:
    at = raw.find(f'"{key}"'.encode())
    return at + 1 if at >= 0 else 1


def _line_problem(trace: str, line: int, raw: bytes) -> tuple[dict[str, Any] | None, Problem | None]:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as e:
        col = e.colno if isinstance(e, json.JSONDecodeError) else 1
        msg = e.msg if isinstance(e, json.JSONDecodeError) else "is not UTF-8 text" \
            if isinstance(e, UnicodeDecodeError) else "nested too deeply" if isinstance(e, RecursionError) \
            else "a number too long to read"     # ValueError: Python's limit on the digits of an integer
        return None, Problem(trace, line, col, f"this line is not valid JSON: {msg}",
                             hint="write one job per line as a JSON object, e.g. "
                                  '{"name": "j1", "team": "rl", "submit_at_minutes": 0, ...}')
    if not isinstance(doc, dict):
        return None, Problem(trace, line, 1, f"this line is a JSON {type(doc).__name__}, but a job object belongs here",
                             hint="write one job per line as a JSON object {...}")
    return doc, None


def _times(trace: str, line: int, raw: bytes, doc: dict[str, Any]) -> tuple[float, float | None, list[Problem]]:
    problems: list[Problem] = []
    submit = doc.pop(SUBMIT, None)
    actual = doc.pop(ACTUAL, None)
    if submit is None:
        problems.append(Problem(trace, line, 1, f"`{SUBMIT}` is missing", SUBMIT,
                                "add the job's arrival in minutes from the start of the simulation, e.g. "
                                f'"{SUBMIT}": 90'))
    elif not _number(submit) or not 0 <= submit <= MAX_TRACE_MINUTES:
        problems.append(Problem(trace, line, _col(raw, SUBMIT), f"`{SUBMIT}` is {json.dumps(submit)[:40]}", SUBMIT,
                                f"give minutes from the start of the simulation, 0 to {MAX_TRACE_MINUTES:,}"))
    if actual is not None and (not _number(actual) or not 0 < actual <= MAX_TRACE_MINUTES / 60):
        problems.append(Problem(trace, line, _col(raw, ACTUAL), f"`{ACTUAL}` is {json.dumps(actual)[:40]}", ACTUAL,
                                "give the job's true runtime in hours (> 0), or leave it out to use duration_hours"))
        actual = None
    return (float(submit) if _number(submit) else 0.0), (float(actual) if actual is not None else None), problems


def parse_lines(trace: str, raw: bytes) -> tuple[list[TraceJob], list[Problem], dict[str, tuple[int, bytes]]]:
    """Build every line into a TraceJob (no cross-document rules yet); the problems, located."""
    jobs: list[TraceJob] = []
    problems: list[Problem] = []
    lines: dict[str, tuple[int, bytes]] = {}
    for n, text in enumerate(raw.split(b"\n"), start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith(b"#"):
            continue
        doc, bad = _line_problem(trace, n, text)
        if doc is None:
            problems.append(bad)  # type: ignore[arg-type]
            continue
        restart = doc.pop(RESTART, None)
        submit, actual, found = _times(trace, n, text, doc)
        if restart is not None and (not _number(restart) or not 0 <= restart <= MAX_TRACE_MINUTES):
            found.append(Problem(trace, n, _col(text, RESTART), f"`{RESTART}` is {json.dumps(restart)[:40]}",
                                 RESTART, "give the minutes an interruption costs the job (restore and warm-up), "
                                          ">= 0, or leave it out for the default"))
        problems += found
        try:
            job = Job.model_validate(doc)
        except ValueError:
            parsed = parse(trace, text)
            if isinstance(parsed, Problem):
                problems.append(_located(parsed, trace, n))
                continue
            at: list[Problem] = []
            clean = {k: v for k, v in parsed.data.items() if k not in (SUBMIT, ACTUAL, RESTART)}
            build(Job, replace(parsed, data=clean), at)
            problems += [_located(p, trace, n) for p in at]
            continue
        if found:
            continue
        hours = actual if actual is not None else job.duration_hours
        if hours is None:
            problems.append(Problem(trace, n, 1, f"job `{job.id}` has neither `{ACTUAL}` nor `duration_hours`",
                                    ACTUAL, f'add "{ACTUAL}": HOURS (the true runtime) or "duration_hours": HOURS'))
            continue
        path = job_path(job)
        if path in lines:
            problems.append(Problem(trace, n, _col(text, "name"), f"job `{job.id}` is also on line {lines[path][0]}",
                                    "name", "job ids (team/name) are unique in a trace: rename one of the two"))
            continue
        lines[path] = (n, text)
        jobs.append(TraceJob(job, submit, hours, n, float(restart) if restart is not None else None))
    return jobs, problems, lines


def load_trace(trace: str, raw: bytes, repo_files: Mapping[str, bytes], catalog: Catalog) -> Trace | list[Problem]:
    """The trace `raw` (read from the file named `trace`) validated against the repository's clusters and
    policies (its own jobs/ are left out: the trace is the workload). Every error, located; or the Trace."""
    jobs, problems, lines = parse_lines(trace, raw)
    files = {p: b for p, b in repo_files.items() if not p.startswith("jobs/")}
    loaded = load(files)
    by_id = {tj.job.id: tj for tj in jobs}
    loaded = replace(loaded, jobs=tuple(tj.job for tj in sorted(jobs, key=lambda t: t.job.id)),
                     job_paths={tj.job.id: job_path(tj.job) for tj in jobs},
                     docs=_LineDocs(loaded.docs, lines))
    v = validate(loaded, catalog)
    for p in v.problems:
        if p.severity != Severity.ERROR:
            continue
        if p.path in lines:
            problems.append(_located(p, trace, lines[p.path][0]))
        else:
            problems.append(p)                  # the repository itself (fleet/, policies/) is invalid
    if problems:
        return sorted(set(problems))
    ordered = tuple(sorted(by_id.values(), key=lambda t: (t.submit_minutes, t.job.id)))
    return Trace(trace, ordered, v)


def trace_line(job: Job, submit_minutes: float, actual_hours: float | None = None) -> str:
    """One trace line: the job document (defaults left out, as a person would write it) and the times."""
    doc: dict[str, Any] = job.model_dump(mode="json", exclude_defaults=True)
    doc[SUBMIT] = round(submit_minutes, 3)
    if actual_hours is not None:
        doc[ACTUAL] = round(actual_hours, 4)
    return json.dumps(doc, separators=(",", ":"), sort_keys=False)


def write_lines(lines: Iterable[str]) -> str:
    return "".join(line + "\n" for line in lines)
