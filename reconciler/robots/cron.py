"""A deployment's window: a 5-field cron expression (UTC) that opens it, and how many hours it stays open. Pure.

Standard cron syntax: minute hour day-of-month month day-of-week, each `*`, a number, a range `a-b`, a list
`a,b`, and a step `*/n` or `a-b/n`; day-of-week 0-7 (0 and 7 are Sunday). As in cron, when both day fields are
restricted a day matches either. Names (`mon`, `jan`) and `@daily` are not read: write numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_LONGEST = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
_FIELDS = ("minute", "hour", "day of month", "month", "day of week")


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]          # 0 = Sunday
    any_day: bool
    any_weekday: bool

    def matches(self, t: datetime) -> bool:
        if t.minute not in self.minutes or t.hour not in self.hours or t.month not in self.months:
            return False
        day_ok, wd_ok = t.day in self.days, (t.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return day_ok and wd_ok
        return day_ok or wd_ok

    def last_start(self, now: datetime, within: timedelta) -> datetime | None:
        """The latest time in (now - within, now] the cron fires, or None."""
        t = now.replace(second=0, microsecond=0)
        end = now - within
        while t > end:
            if t.hour in self.hours and self.matches(t):
                return t
            t = t - (timedelta(minutes=1) if t.hour in self.hours else timedelta(minutes=t.minute + 1))
        return None

    def next_start(self, now: datetime, horizon: timedelta = timedelta(days=366)) -> datetime | None:
        """The first time at or after `now` the cron fires (within `horizon`), or None."""
        t = now.replace(second=0, microsecond=0)
        if t < now:
            t += timedelta(minutes=1)
        end = now + horizon
        while t <= end:
            if t.hour not in self.hours or t.month not in self.months:
                t = (t + timedelta(hours=1)).replace(minute=0)
                continue
            if self.matches(t):
                return t
            t += timedelta(minutes=1)
        return None


def parse(expr: str) -> Cron | str:
    """The expression as a `Cron`, or a sentence saying what is wrong with it."""
    parts = expr.split()
    if len(parts) != 5:
        return f"has {len(parts)} field(s); cron has 5: minute hour day-of-month month day-of-week"
    sets = []
    for text, (lo, hi), what in zip(parts, _BOUNDS, _FIELDS, strict=True):
        got = _field(text, lo, hi)
        if isinstance(got, str):
            return f"{what} `{text}`: {got}"
        sets.append(got)
    weekdays = frozenset(d % 7 for d in sets[4])
    if parts[2] != "*" and parts[4] == "*" and not any(d <= _LONGEST[m] for m in sets[3] for d in sets[2]):
        return (f"day of month `{parts[2]}` and month `{parts[3]}` never meet on a real date, so the window "
                "never opens")
    # as in Vixie cron and cronie: a day field starting with `*` (`*`, `*/2`) does not restrict the day
    return Cron(sets[0], sets[1], sets[2], sets[3], weekdays, parts[2].startswith("*"), parts[4].startswith("*"))


def _field(text: str, lo: int, hi: int) -> frozenset[int] | str:
    out: set[int] = set()
    for item in text.split(","):
        rng, _, step_s = item.partition("/")
        if (step_s and not step_s.isdigit()) or step_s == "0":
            return f"step `{step_s}` is not a whole number above 0"
        step = int(step_s) if step_s else 1
        if rng == "*":
            a, b = lo, hi
        else:
            a_s, dash, b_s = rng.partition("-")
            if not a_s.isdigit() or (dash and not b_s.isdigit()):
                return f"`{item}` is not a number, a range a-b or */n (names such as mon are not read)"
            a = int(a_s)
            b = int(b_s) if dash else (hi if step_s else a)
        if not (lo <= a <= hi and lo <= b <= hi) or a > b:
            return f"`{item}` is outside {lo}-{hi}"
        out.update(range(a, b + 1, step))
    return frozenset(out)


def window_open(cron: Cron, hours: float, now: datetime) -> bool:
    utc = now.astimezone(UTC) if now.tzinfo is not None else now     # the cron is read in UTC
    return cron.last_start(utc, timedelta(hours=hours)) is not None
