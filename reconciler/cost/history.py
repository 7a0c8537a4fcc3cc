"""The cost of one commit, for `fleet cost --history N`: a small summary of its priced plan. Pure.

`pipeline.cost_point` computes one from a commit's files.

Each commit is planned on its own (no base): its cost depends only on its data files, the catalog and the
Fleet version, which is what lets the caller cache a point by the content hash of those inputs. A commit
whose data does not validate is a point with its error count and no cost, not a failure of the report.

A point is cached exactly (`to_dict`: unrounded floats, which JSON writes with `repr` and reads back bit for
bit) and rounded only when the report writes it (`report_dict`), so a cached history is the same report as
a fresh one. Rounding in the cache once made them differ: the monthly cost was recomputed from the hourly
cost rounded to cents ($18,712,659 cached against $18,712,658 fresh on the example).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .model import HOURS_PER_MONTH, money, monthly_money

CACHE_FORMAT = 3
"""Bumped when `to_dict` changes meaning; an entry of another format is recomputed (format 1 rounded to cents;
format 2 counted placements as `placed`, not jobs: `Plan.counts`)."""


@dataclass(frozen=True)
class HistoryPoint:
    commit: str
    date: str                       # committer date, ISO 8601, as git stores it
    subject: str
    errors: int                     # validation errors; cost fields are 0 when > 0
    hourly_usd: float = 0.0
    idle_hourly_usd: float = 0.0
    placed: int = 0
    pending: int = 0
    by_team: Mapping[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.errors == 0

    @property
    def monthly_usd(self) -> float:
        return self.hourly_usd * HOURS_PER_MONTH

    def to_dict(self) -> dict[str, Any]:
        """Everything, exactly: the cache entry that `from_dict` reads back to an equal point."""
        return {"format": CACHE_FORMAT, "commit": self.commit, "date": self.date, "subject": self.subject,
                "errors": self.errors, "hourly_usd": self.hourly_usd, "idle_hourly_usd": self.idle_hourly_usd,
                "placed": self.placed, "pending": self.pending, "by_team": dict(sorted(self.by_team.items()))}

    def report_dict(self) -> dict[str, Any]:
        """The point as the JSON report shows it: dollars to the cent, monthly = written hourly x 730."""
        return {"commit": self.commit, "date": self.date, "subject": self.subject, "errors": self.errors,
                "hourly_usd": money(self.hourly_usd), "monthly_usd": monthly_money(self.hourly_usd),
                "idle_hourly_usd": money(self.idle_hourly_usd), "placed": self.placed, "pending": self.pending,
                "by_team": {k: money(v) for k, v in sorted(self.by_team.items())}}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> HistoryPoint:
        """Read back `to_dict` (the cache). Raises KeyError/TypeError/ValueError on a malformed entry or one
        written in another format (the caller recomputes it)."""
        if d.get("format") != CACHE_FORMAT:
            raise ValueError(f"cache format {d.get('format')!r}, not {CACHE_FORMAT}")
        by_team = d["by_team"]
        if not isinstance(by_team, dict):
            raise TypeError("by_team is not a mapping")
        return HistoryPoint(str(d["commit"]), str(d["date"]), str(d["subject"]), int(d["errors"]),
                            _dollars(d["hourly_usd"]), _dollars(d["idle_hourly_usd"]), int(d["placed"]),
                            int(d["pending"]), {str(k): _dollars(v) for k, v in by_team.items()})


def _dollars(value: Any) -> float:
    """A cached amount: a finite JSON number (json reads `Infinity`/`NaN`, which no point ever holds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"not a finite amount: {value!r}")
    return float(value)
