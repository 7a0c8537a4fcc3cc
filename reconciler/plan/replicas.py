"""What a spread job's replicas (spread.py: one `JobInfo` per replica, placed one by one) keep from each other
in a run's state, for the waiting ones' reasons and expected starts (reasons.py, reserve.py): each replica
takes units of its own, and the replicas in one pool share one placement, of one option."""

from __future__ import annotations

from .capacity import PoolState
from .state import JobInfo, PlanState


def held_by_siblings(st: PlanState, info: JobInfo, ps: PoolState, option: int) -> dict[str, frozenset[int]]:
    """What the replica may not take on `ps` with its option `option` until a sibling there ends, by sibling:
    the sibling's units, or every unit while the sibling runs another option. Empty for a job that does not
    spread."""
    return {lv.info.id: frozenset(lv.units) if lv.option.index == option else frozenset(range(ps.pool.max))
            for lv in st.siblings_placed(info) if lv.pool is ps}


def waiting_replica(st: PlanState, info: JobInfo | None) -> JobInfo | None:
    """A spread job's first replica that waits (what the job's pending entry tells of), else `info` itself."""
    if info is None or not info.siblings:
        return info
    return next((st.jobs[s] for s in info.siblings if s not in st.live), info)


def apart(st: PlanState, info: JobInfo) -> str:
    """What a cache of room, reasons or starts keys a spread replica by besides what it keys every job by: its id
    while a sibling is placed (what it may take then depends on where), else "" (nothing is kept from it, so it
    reckons as any job alike: `held_by_siblings` is empty, and so is every room a sibling could hold)."""
    return info.id if info.siblings and st.siblings_placed(info) else ""

