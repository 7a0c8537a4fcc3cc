"""What a job that waits rather than preempt counts on (issue 22 items 2 and 3). Pure: functions of a `PlanState`.

A job that could preempt but waits because its expected start comes soon enough (victims.cheaper_to_wait) counts
on the units it fits on at that start, as running work ends. `claim` records them (`Outcome.claims`), and every
later reckoning of the run for a job of its class or lower (reserve.py `_first_fit`: the waits `cheaper_to_wait`
weighs, the starts told) sees its gang take those units at its start, until its end. So the next job alike does
not count on the same ending work: it reckons past it, and preempts when that wait costs more. Before, each of a
burst of alike 1-GPU production pods on the Alibaba replay counted on the same GPU about to free and waited,
cycle after cycle, up to 2 hours (docs/benchmarks.md, thirtieth session). The waiting job is told the start it
decided on (starts.py).

A claim binds no placement and no preemption: it only says when the jobs behind it can expect to start. Holding
the claimed units as a reservation does (reserve.py) kept a whole node from every job of the class or lower for a
1-GPU pod's sake: on the Alibaba replay the fleet paid for more nodes and research waited longer; keeping the jobs
it binds from preempting into its units cost accelerator-hours on the generated traces (both tried, not kept:
docs/benchmarks.md).
"""

from __future__ import annotations

from ..resolve import run_hours
from .capacity import Claim
from .reserve import CREDIBLE, Found, earliest
from .state import JobInfo, PlanState


def claim(st: PlanState, info: JobInfo) -> None:
    """`info` waits rather than preempt: record the units and start it counts on (module docstring). A start that
    cannot be told, or is now, claims nothing."""
    if info.siblings or info.parent in st.outcome.claims:
        return
    found = earliest(st, info, {CREDIBLE: True}, quota_wait=True)
    if found is not None and found[0] > 0.0:
        claim_at(st, info, found)


def claim_at(st: PlanState, info: JobInfo, found: Found) -> None:
    """Record `info`'s claim of the (start, pool, units, option) `reserve.earliest` found for it."""
    start, ps, units, opt = found
    hours = run_hours(info.job.duration_hours, opt.relative_speed)
    st.outcome.claims[info.parent] = Claim(info.parent, info.priority, ps.pool.key, units, st.gang(opt, ps), start,
                                           None if hours is None else start + hours)
