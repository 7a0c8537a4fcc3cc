"""What the jobs ahead in the queue will spend, as the expected starts of those after them reckon it (starts.py
`_queued`). Pure: functions of a `PlanState`.

Jobs reckoned in queue order each claim the units their start counts on (claims.py); they also claim their team's
budget: from its start until its end, a job ahead spends its claim's hourly cost (`PlanState.attributed`), which its
team's budget pays before any job behind it. So a job its budget blocks starts once the team's spend has ended
enough to pay for it on top of what the jobs ahead then spend, and only if, through its own run, each job ahead
that starts meanwhile is still paid for (the reckoning `reserve._budget_free_at` makes, with the cache key
`SPENDS`: the starts told only, never a decision). Until 2026-12-07 it counted only placed jobs' spend: two jobs
waiting for a budget that pays for one of them were told the same start.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

from .state import JobInfo, PlanState

SPENDS = "spends"   # a cache holding this key counts the spend of the claims of jobs ahead (module docstring)
Ahead = tuple[tuple[float, float | None, float], ...]   # (start, end or None: never, hourly) of claims ahead


def ahead(st: PlanState, info: JobInfo, cache: dict[object, object]) -> Ahead:
    """The claims of `info`'s team's other jobs of its class or higher (those reckoned ahead of it) as spend;
    () when the cache does not count them."""
    claims = st.outcome.claims
    if SPENDS not in cache or not claims or st.teams[info.team].budget_monthly_usd is None:
        return ()
    key = ("spend-ahead", len(claims))   # claims are only added while the starts are reckoned
    by_team: dict[str, list[tuple[int, str, float, float | None, float]]] | None = cache.get(key)  # type: ignore
    if by_team is None:
        by_team = {}
        for c in claims.values():
            who = st.fleet.by_job.get(c.job)
            ps = st.pools.get(c.pool_key)
            if who is not None and ps is not None and c.job not in st.live:
                by_team.setdefault(who.team, []).append(
                    (c.priority, c.job, c.start, c.end, st.attributed(ps, c.gang, c.units)))
        cache[key] = by_team
    return tuple((s, e, h) for p, j, s, e, h in by_team.get(info.team, ()) if p >= info.priority and j != info.parent)


def covered(ends: Sequence[tuple[float, float]], claims: Ahead, lack: float, hours: float | None) -> float | None:
    """The first moment (0, or when a placement or a claim ends) at which the spend ended by then, less what the
    claims then running spend, covers `lack`, and still does at each claim's start before the job, started then,
    ends (`hours`: how long it runs, `run_hours`; None: never); None: never, in this reckoning."""
    times = [e for e, _ in ends]
    freed = list(accumulate(back for _, back in ends))

    def room(t: float) -> float:
        k = bisect_right(times, t)
        return (freed[k - 1] if k else 0.0) - sum(h for s, e, h in claims if s <= t and (e is None or t < e))

    for t in sorted({0.0, *times, *(e for _, e, _ in claims if e is not None)}):
        last = None if hours is None else t + hours
        if room(t) >= lack and all(room(s) >= lack for s, _, _ in claims if t < s and (last is None or s < last)):
            return t
    return None
