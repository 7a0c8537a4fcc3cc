"""Steps 2-7 of the planner (planner.py's docstring) as one run on a fresh `PlanState`: the greedy."""

from __future__ import annotations

from collections import defaultdict

from .locality import data_region_first
from .place import in_order, try_place
from .preempt import try_preempt
from .reasons import record_wait
from .reserve import hold
from .state import JobInfo, PlanState
from .sticky import keep_base
from .summary import freeze
from .types import Plan


def run(st: PlanState) -> Plan:
    """One greedy run under `st.strategy`; the state holds its final placements afterwards."""
    place_all(st)
    return freeze(st)                                                       # 7. targets, quotas, cost


def place_all(st: PlanState) -> None:
    """Steps 2-6 of `run`: the state's placements, without the frozen plan (improve.py freezes only the plan it
    keeps)."""
    queue = keep_base(st)                                                    # 2. stickiness
    forced = st.outcome.forced
    lead = set(st.strategy.lead)
    by_class: dict[int, list[JobInfo]] = defaultdict(list)
    for info in queue:
        if info.id not in lead:
            by_class[info.priority].append(info)
    leftover = in_order(st, [i for i in queue if i.id in lead], allow_borrow=True, fair=False)
    for info in leftover:
        by_class[info.priority].append(info)
    fair = st.strategy.order == "fair"
    for level in sorted(by_class, reverse=True):                            # 3. class by class
        waiting = data_region_first(st, by_class[level], fair=fair)         #    jobs' data regions first
        if st.strategy.nominal_first:
            waiting = in_order(st, waiting, allow_borrow=False, fair=fair)      # 4. pass A: within nominal
        waiting = in_order(st, waiting, allow_borrow=True, fair=fair)           #    pass B: borrowing
        blocked = []
        for info in waiting:                                                # 5. preemption
            if not try_preempt(st, info):
                if st.fleet.for_people:
                    record_wait(st, info)                                   #    why it waits, now
                st.failed.add(info.id)
                blocked.append(info)
        hold(st, level, blocked)                                                  #    its first blocked job's units
    failed: dict[int, list[str]] = defaultdict(list)
    for job_id in st.failed:
        failed[st.jobs[job_id].priority].append(job_id)
    for level in sorted(failed, reverse=True):                              # 6. capacity freed since: highest
        for job_id in sorted(failed[level]):                                #    class first, then by id
            try_place(st, st.jobs[job_id], allow_borrow=True, status_reason=forced.get(job_id, ""))
    for job_id, why in forced.items():
        if job_id in st.live and not st.live[job_id].kept and not st.live[job_id].reason:
            st.live[job_id].reason = why
