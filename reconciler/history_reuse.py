"""`fleet cost --history`: a commit that only changes jobs' `duration_hours` gets an earlier commit's point when
no decision of that point depended on the durations it changes. Pure (one object per process keeps the last
point it computed).

Why it helps: in a history, most commits change one thing, and a job's duration is read by few decisions of a
plan from git (the reservations and their backfill, reserve.py). Each point is planned with every duration a
`tracked.Tracked` float: the same values and arithmetic, plus a trace of every question the planner and the
pricing asked of a duration (comparisons, truth, hashes; tracked.py). The next commit reuses that point only
when
1. its files are the same bytes, but for job files (every file the loader read as a job, in both commits);
2. it validates, and its jobs are the same models, field for field (compared by `repr`, which tells 8 from
   8.0 and 0.0 from -0.0), but for `duration_hours`; each duration is a float in both, or absent in both;
3. every question of the trace gets the same answer with the new durations (`tracked.holds`, each expression
   re-evaluated by the same float operations);
4. the traced point holds no tracked value (none of its amounts was computed from a duration).
Then the planner, a deterministic function of the validated files (it reads no file positions, problems or
paths, which are all that 1 and 2 leave free), takes the same path on both commits and makes the same plan, and
the pricing the same point. Anything else a duration is used for refuses to be tracked (`tracked.Poisoned`):
that commit is computed without tracking, and this process stops tracking. A commit that does not validate is
its error point, as before, and leaves the last computed point as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from .catalog import Catalog
from .cost.history import HistoryPoint
from .load import ParseCache
from .pipeline import check, checked_point
from .tracked import Entry, Poisoned, Tracked, holds, recording
from .validate import Validated


@dataclass(frozen=True)
class _Computed:
    catalog: Catalog
    files: Mapping[str, bytes]
    job_files: frozenset[str]
    jobs: tuple[str, ...]                 # each job's repr without its duration
    durations: tuple[float | None, ...]
    trace: tuple[Entry, ...]
    token: object                         # the variables of the trace (tracked.py)
    point: HistoryPoint


@dataclass
class Reuse:
    """The points of one process's commits, in any order (`history_cache`: a worker's chunks)."""

    tracking: bool = True
    computed: int = 0
    reused: int = 0
    _last: _Computed | None = None

    def point(self, commit: str, date: str, subject: str, files: Mapping[str, bytes], catalog: Catalog,
              cache: ParseCache | None = None) -> HistoryPoint:
        """`pipeline.cost_point` of the commit: the same point, computed or reused (module docstring)."""
        v = check(files, catalog, cache)
        if not v.ok:
            return checked_point(commit, date, subject, v)
        durations = tuple(j.duration_hours for j in v.loaded.jobs)
        job_files = frozenset(v.loaded.job_paths.values())
        jobs = tuple(repr(j.model_copy(update={"duration_hours": None})) for j in v.loaded.jobs)
        last = self._last
        if last is not None and _same_but_durations(last, catalog, files, job_files, jobs, durations) \
                and holds(last.trace, durations, last.token):
            self.reused += 1
            return dataclasses.replace(last.point, commit=commit, date=date, subject=subject,
                                       by_team=dict(last.point.by_team))
        self.computed += 1
        traced = _traced(commit, date, subject, v, durations) if self.tracking and _floats(durations) else None
        if traced is None:
            if self.tracking and _floats(durations):
                self.tracking = False       # poisoned: this process stops paying for traces
            self._last = None
            try:
                return checked_point(commit, date, subject, v)
            except Poisoned as e:   # a tracked value kept from an earlier point: a bug, the commit's error point
                raise RuntimeError("a tracked duration outlived its point") from e
        point, trace, token = traced
        self._last = _Computed(catalog, dict(files), job_files, jobs, durations, trace, token, point)
        return point


def _floats(durations: tuple[float | None, ...]) -> bool:
    return all(d is None or type(d) is float for d in durations)


def _same_but_durations(last: _Computed, catalog: Catalog, files: Mapping[str, bytes], job_files: frozenset[str],
                        jobs: tuple[str, ...], durations: tuple[float | None, ...]) -> bool:
    """Conditions 1 and 2 of the module docstring."""
    if catalog is not last.catalog or job_files != last.job_files or jobs != last.jobs \
            or files.keys() != last.files.keys():
        return False
    if any((a is None) != (b is None) or (a is not None and type(a) is not float)
           for a, b in zip(durations, last.durations, strict=True)):
        return False
    return all(path in job_files or data == last.files[path] for path, data in files.items())


def _traced(commit: str, date: str, subject: str, v: Validated,
            durations: tuple[float | None, ...]) -> tuple[HistoryPoint, tuple[Entry, ...], object] | None:
    """The point, computed with every duration tracked, its trace and the token of its variables; None when a
    duration was used in a way the trace cannot replay, or reached the point."""
    token = object()
    jobs = tuple(j if d is None else j.model_copy(update={"duration_hours": Tracked(d, ("var", i, token))})
                 for i, (j, d) in enumerate(zip(v.loaded.jobs, durations, strict=True)))
    tracked = dataclasses.replace(v, loaded=dataclasses.replace(v.loaded, jobs=jobs))
    try:
        with recording() as trace:
            point = checked_point(commit, date, subject, tracked)
            if any(isinstance(x, Tracked) for x in (point.hourly_usd, point.idle_hourly_usd, point.placed,
                                                    point.pending, *point.by_team.values())):
                return None
    except Poisoned:
        return None
    return point, tuple(trace), token
