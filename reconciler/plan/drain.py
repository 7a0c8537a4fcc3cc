"""Victims that keep running until their next checkpoint (victims.hold_until_checkpoint, `PlanState.draining`), as
the estimates see them. Pure: functions of a `PlanState`.

Such a victim holds, until it stops at its checkpoint (the preemption's `after_minutes`), its team's quota, its
spend and the units its preemptor does not take; it is in no pool's placements (`on_pool`) and no team's holders
(`holding`). So the estimates (reserve.py: the units that free on a pool, the quota and spend its team gets back;
reasons.py: who holds what a waiting job needs) count it apart, as running work that ends at its checkpoint, and
its preemptor, which starts only then, as ending that much later. Only the expected starts do (starts.py: the
cache key `DRAINS`): reservations, claims and the wait-or-preempt choice reckon as before, so what the
plan decides does not change (those decisions would need measuring: docs/benchmarks.md). Until 2026-12-07 no
estimate did: its units, quota and spend never freed in any estimate, so the victim itself was
told no expected start ("no end the plan reckons with frees what it lacks"), a short job that could run between
the checkpoint and the next reservation was told a later start, and a waiting job's reason named only the
preemptor as holding the pool.
"""

from __future__ import annotations

from typing import NamedTuple

from .state import Live, PlanState, amount, qkey


class Stop(NamedTuple):
    """A victim running until its checkpoint: when it stops (hours from now), its placement, the units it still
    holds (those of its units its preemptor does not take), and its preemptor."""

    hours: float
    lv: Live
    units: tuple[int, ...]
    by: str


DRAINS = "drains"   # a cache holding this key counts the victims held until their checkpoint (module docstring)
STOPS = ("drain", "stops")   # the cache's key of `stops`


def stops(st: PlanState, cache: dict[object, object]) -> list[Stop]:
    """Each victim held until its checkpoint, by victim id; [] when there is none (planned from git alone) or the
    cache does not count them."""
    if not st.draining or DRAINS not in cache:
        return []
    found: list[Stop] | None = cache.get(STOPS)   # type: ignore[assignment]
    if found is None:
        found = []
        for p in st.outcome.preemptions:
            lv = st.draining.get(p.job)
            if lv is None or p.after_minutes is None:
                continue
            by = st.live.get(p.by)
            mine = set(by.units) if by is not None and by.pool is lv.pool else set()
            found.append(Stop(p.after_minutes / 60.0, lv, tuple(u for u in lv.units if u not in mine), p.by))
        found = cache[STOPS] = sorted(found, key=lambda s: s.lv.info.id)
    return found


def delay(st: PlanState, job_id: str, cache: dict[object, object]) -> float:
    """Hours the placement `job_id` starts late: a preemptor starts once the last of its victims held until their
    checkpoint stopped (0.0 for any other)."""
    if not st.draining or DRAINS not in cache:
        return 0.0
    late: dict[str, float] | None = cache.get(LATE)   # type: ignore[assignment]
    if late is None:
        late = {}
        for s in stops(st, cache):
            late[s.by] = max(late.get(s.by, 0.0), s.hours)
        cache[LATE] = late
    return late.get(job_id, 0.0)


LATE = ("drain", "late")   # the cache's key of `delay`'s preemptors


def on_pool(st: PlanState, key: str, cache: dict[object, object]) -> list[Stop]:
    """The victims held until their checkpoint on pool `key`."""
    return [s for s in stops(st, cache) if s.lv.pool.pool.key == key]


def quota_ends(st: PlanState, team: str, acc: str, cache: dict[object, object]) -> list[tuple[float, int]]:
    """(when, quota of `acc` it gives back) of the team's victims held until their checkpoint."""
    return [(s.hours, amount(s.lv.info, s.lv.option)) for s in stops(st, cache)
            if s.lv.info.team == team and qkey(s.lv.info, s.lv.option) == acc]


def spend_ends(st: PlanState, team: str, cache: dict[object, object]) -> list[tuple[float, float]]:
    """(when, hourly spend it gives back) of the team's victims held until their checkpoint."""
    return [(s.hours, s.lv.hourly_usd) for s in stops(st, cache) if s.lv.info.team == team]
