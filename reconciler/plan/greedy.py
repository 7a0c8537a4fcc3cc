"""Steps 2-7 of the planner (planner.py's docstring) as one run on a fresh `PlanState`: the greedy."""

from __future__ import annotations

from collections import defaultdict

from .locality import data_region_first
from .place import in_order, try_place
from .preempt import UNTIL, WITH, try_preempt
from .reasons import record_wait
from .reserve import hold
from .state import JobInfo, PlanState
from .sticky import keep_base
from .summary import freeze
from .types import Plan, Preemption


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
    later = after_preemptors(st, queue)
    st.failed.update(later)                          #    tried after their preemptor's class, again in 6.
    later_at: dict[int, list[JobInfo]] = defaultdict(list)     # by the class of the preemptor each waits for
    for info in sorted((i for i in queue if i.id in later), key=lambda i: (-i.priority, i.id)):
        later_at[st.fleet.by_job[later[info.id].by].priority].append(info)
    by_class: dict[int, list[JobInfo]] = defaultdict(list)
    for info in queue:
        if info.id not in lead and info.id not in later:
            by_class[info.priority].append(info)
    leftover = in_order(st, [i for i in queue if i.id in lead and i.id not in later], allow_borrow=True, fair=False)
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
        for info in later_at.get(level, ()):    # victims of this class's preemptors: after them, before lower classes
            if try_place(st, info, allow_borrow=True, status_reason=forced.get(info.id, "")):
                st.failed.discard(info.id)
    failed: dict[int, list[str]] = defaultdict(list)
    for job_id in st.failed:
        failed[st.jobs[job_id].priority].append(job_id)
    for level in sorted(failed, reverse=True):                              # 6. capacity freed since: highest
        for job_id in sorted(failed[level]):                                #    class first, then by id
            try_place(st, st.jobs[job_id], allow_borrow=True, status_reason=forced.get(job_id, ""))
    for job_id, why in forced.items():
        if job_id in st.live and not st.live[job_id].kept and not st.live[job_id].reason:
            st.live[job_id].reason = why
    # The base names a spread job's preemptor by its job id (summary.freeze), the state by its replicas' ids: each
    # job placed and running nowhere yet, by its id, with the first of its placed ids. A service that runs
    # already stops its victims at once (`take`), so nothing waits for it.
    running = st.fleet.live.running if st.fleet.live is not None else {}
    placed: dict[str, str] = {}
    for jid in sorted(st.live) if later else ():
        if (parent := st.live[jid].info.parent) not in running:
            placed.setdefault(parent, jid)
    for job_id, pre in later.items():   # still stopped for a preemptor placed, not started: the stop stands
        if job_id not in st.live and (by := placed.get(pre.by)) is not None:
            head = pre.reason.split(UNTIL, 1)[0].split(WITH, 1)[0].split(WAITS, 1)[0]
            st.outcome.preemptions.append(Preemption(job_id, by, f"{head}{WAITS}{pre.by} has started"))


WAITS = "; stopped, it waits until "


def after_preemptors(st: PlanState, queue: list[JobInfo]) -> dict[str, Preemption]:
    """The queued jobs (by id) that a preemption of the base (the last plan, planned from what runs) stopped for
    a preemptor that has not started (it is queued too), with that preemption. Each is tried only after its
    preemptor's class's preemption step (before lower classes; again in 6.), in what its preemptor leaves; its
    stop stands (in this plan's preemptions, so the next cycle's base has it) while the preemptor is placed and
    has not started. As Kueue admits a preemptor once its victims are gone, before they are requeued. Before, a
    victim of a class at or above its preemptor's (a borrower reclaimed, `reclaim_within_cohort: any`) was placed
    again first, into what it had given back, while the preemptor waited for its other victims' checkpoints: it
    started again and was reclaimed again, cycle after cycle (docs/benchmarks.md, thirty-first session). A spread
    job's preemptor is named by its job id in the base (summary.freeze) and by its replicas' ids in the state: its
    stop stands while one of them is placed and the job runs nowhere yet (until 2026-12-07 the stop was dropped,
    as no replica has the job's id)."""
    base = st.base
    if st.fleet.live is None or base is None or not base.preemptions:
        return {}
    waiting = {i.parent for i in queue}
    stopped = {p.job: p for p in base.preemptions if p.job in waiting and p.by in waiting}
    return {i.id: stopped[i.parent] for i in queue if i.parent in stopped}
