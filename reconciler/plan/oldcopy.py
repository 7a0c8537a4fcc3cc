"""A running service that the plan moves keeps serving where it runs until its new copy is up: the loop deletes
the old copy only then (make-before-break), and that copy is paid meanwhile. So while the plan has a running
service anywhere but where it runs, its team's budget is charged the old copy's hourly as well, as a victim held
to its checkpoint still spends its team's budget (victims.py): nothing of the team starts into spend that the move
frees only a cycle later. Before 2026-12-07 the move's saving was spent at once.

A service stopped as a preemption's victim is not charged here (`PlanState.evict(stop=True)`): its copy stops now,
or runs on beside a fellow victim held to its checkpoint and spends as the victims held do (`victims.runs_on`). Only
a copy that is paid: not on a lost cluster nor on a failed unit (that copy is gone, or not billed). A service spread
over failure domains is placed replica by replica (spread.py): each running replica's copy is charged where its
group runs, and released when that replica is placed back there (since 2026-12-07, fortieth session: before, only a
service that ran as one group was)."""

from __future__ import annotations

from typing import Any, Protocol

from ..resolve import ResolvedOption
from .capacity import Gang, PoolState
from .spread import split_base
from .types import Placement, Plan, nano


class PlanState(Protocol):
    """What of `state.PlanState` this module reads and keeps (state.py calls it: no import back)."""

    fleet: Any
    pools: dict[str, PoolState]
    team_hourly: dict[str, int]
    base: Plan | None
    old_copy: dict[str, int]
    paid_at: dict[str, tuple[str, tuple[int, ...], int]]

    def gang(self, opt: ResolvedOption, ps: PoolState) -> Gang: ...


JobInfo = Any   # state.JobInfo (id, team, job, options, siblings)


def start(st: PlanState) -> None:
    """Charge every paid running service's copy to its team from the start: placed where it runs, the charge goes
    (`placed`); taken out of there, it comes back (`removed`). A spread service's replicas each as its group runs
    them (`_replicas`)."""
    live = st.fleet.live
    if live is None:
        return
    for job_id, r in live.running.items():
        info = st.fleet.jobs.get(job_id)
        if info is not None and info.job.kind == "inference" and not info.siblings:
            _charge(st, info, r.cluster, r.pool, r.units, info.job.replicas)
    for bp in _replicas(st):
        _charge(st, st.fleet.jobs[bp.job], bp.cluster, bp.pool, bp.units, 1)


def _replicas(st: PlanState) -> list[Placement]:
    """The running replicas of spread services where they run, one placement each (`spread.split_base` of the
    base, which holds what runs: plan/live.py): of a service whose Deployments / LeaderWorkerSets are seen
    (`LiveInputs.serving`), as many of each group as its object runs; of one seen as JobSets (the simulator shows
    a service so, one group per cluster), every group of the base: what the planner keeps as running
    (sticky.keep_base)."""
    live = st.fleet.live
    left = {(j, c, p): n for j, groups in live.serving.items() for c, p, n, _ in groups}
    out = []
    for bp in split_base(st.fleet, st.base):
        info = st.fleet.jobs.get(bp.job)
        if info is None or not info.siblings or info.job.kind != "inference":
            continue
        if info.parent in live.serving:
            if left.get((info.parent, bp.cluster, bp.pool), 0) <= 0:
                continue
            left[(info.parent, bp.cluster, bp.pool)] -= 1
        elif info.parent not in live.running:
            continue
        out.append(bp)
    return out


def _charge(st: PlanState, info: JobInfo, cluster: str, pool: str, units: tuple[int, ...], replicas: int) -> None:
    """`info`'s copy running on `cluster`/`pool` `units` (`replicas` of it) charged to its team, when it is paid:
    not on a lost cluster nor on a failed unit."""
    live, key = st.fleet.live, f"{cluster}/{pool}"
    was = st.pools.get(key)
    if was is None or cluster in live.lost or (units and live.unit_failure(key, units)):
        return
    opt = next((o for o in info.options if o.accelerator == was.pool.accelerator), None)
    if opt is None:
        return
    gang = st.gang(opt, was)
    count = len(units) or max(1, gang.whole_units) * replicas
    st.paid_at[info.id] = (key, units, nano(was.charge(gang, count)))
    removed(st, info.id, info.team, None)


def _there(st: PlanState, job_id: str, key: str | None, units: tuple[int, ...]) -> bool:
    at = st.paid_at[job_id]
    return key == at[0] and (not at[1] or at[1] == units)


def placed(st: PlanState, info: JobInfo, ps: PoolState, units: tuple[int, ...]) -> None:
    """`info` placed on `ps` `units`: where its paid copy runs, that copy's charge is this placement's."""
    if info.id in st.old_copy and _there(st, info.id, ps.pool.key, units):
        st.team_hourly[info.team] -= st.old_copy.pop(info.id)


def removed(st: PlanState, job_id: str, team: str, where: tuple[str, tuple[int, ...]] | None,
            stop: bool = False) -> None:
    """`job_id` taken out of `where` (None: never placed): its paid copy runs on, charged to its team; not when
    the copy stops (`stop`: a preemption's victim)."""
    if stop or job_id not in st.paid_at or job_id in st.old_copy:
        return
    if where is None or _there(st, job_id, *where):
        paid = st.old_copy[job_id] = st.paid_at[job_id][2]
        st.team_hourly[team] += paid
