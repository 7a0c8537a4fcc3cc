"""Step 5 of the planner: preemption of kept (running) work for a job that does not fit otherwise.

Victims are kept placements of preemptible classes that `policies/priorities.yaml` lets the job preempt:
its own team's lower-priority jobs (`within_team`), borrowers in its cohort when the job is within its
nominal quota (`reclaim_within_cohort`), or lower-priority jobs at or below `max_priority_threshold` when the
job must borrow (`borrow_within_cohort`). Victims may run in any pool: one on the pool the job would land on
frees capacity there, one anywhere frees the quota (its team's or its cohort's, same accelerator) or the
budget (its team's) the job needs. For each option and candidate pool, victims are taken in order of least
work lost (`checkpoint_minutes`), then lowest priority, then id (and again largest first, which frees the
most quota per victim), each only if it remedies something still lacking, until the job fits; then every
victim the job turns out not to need goes back. The (option, pool)
needing the fewest victims wins (then least work lost, option index, pool): fewest victims and least lost
work first, in that greedy order, not a global optimum. Victims go back to the queue and may land elsewhere
in the final pass.
"""

from __future__ import annotations

from ..resolve import ResolvedOption
from .capacity import PoolState
from .place import try_place
from .state import JobInfo, Live, PlanState, amount
from .types import Preemption


def allowed(st: PlanState, victim: Live, job: JobInfo, acc: str, need: int) -> str | None:
    """Why `job` (needing `need` of `acc`) may preempt `victim` (the rule), or None."""
    rules = st.fleet.prio.preemption
    v = victim.info
    if not v.preemptible or v.priority > job.priority:
        return None
    if v.team == job.team:
        if rules.within_team != "never" and v.priority < job.priority:
            return f"lower priority in team {job.team}"
        return None
    domain = st.quota.domain
    if domain.get(v.team) is None or domain.get(v.team) != domain.get(job.team):
        return None
    within_nominal = st.quota.shortfall(job.team, acc, need, allow_borrow=False) == 0
    if within_nominal and st.quota.is_borrowing(v.team, victim.option.accelerator):
        if rules.reclaim_within_cohort == "any" or (
                rules.reclaim_within_cohort == "lower_priority" and v.priority < job.priority):
            return f"reclaiming {acc} quota that team {v.team} borrowed"
        return None
    bw = rules.borrow_within_cohort
    if bw.policy == "lower_priority" and v.priority < job.priority and (
            bw.max_priority_threshold is None or v.priority <= bw.max_priority_threshold):
        return "borrowing within the cohort from lower-priority work"
    return None


def _fits(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState) -> tuple[bool, bool, bool]:
    """Whether the job's gang finds units on `ps`, is within its team's quota, and within its budget."""
    gang = st.gang(opt, ps)
    units = ps.find(gang, job.job.replicas) if ps.may_fit(gang, job.job.replicas) else None
    quota_ok = st.quota.shortfall(job.team, opt.accelerator, amount(job, opt)) == 0
    hourly = st.attributed(ps, gang, units) if units is not None else \
        ps.unit_hourly_usd * gang.accelerators / ps.pool.unit_accelerators * max(1, gang.whole_units) * job.job.replicas
    return units is not None, quota_ok, hourly <= st.budget_room(job.team)


def _helps(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState, lv: Live,
           lacks: tuple[bool, bool, bool]) -> bool:
    """Whether evicting `lv` could remedy one of what the job lacks now (room on `ps`, quota, budget)."""
    room, quota_ok, budget_ok = lacks
    if not room and lv.pool is ps:
        return True
    if not quota_ok and lv.option.accelerator == opt.accelerator and (
            lv.info.team == job.team or st.quota.domain.get(lv.info.team) == st.quota.domain.get(job.team)):
        return True
    return not budget_ok and lv.info.team == job.team


def _victims_for(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState,
                 allowed_here: list[tuple[float, int, str, str]]) -> list[tuple[str, str, float]] | None:
    """The victims that make room for the job on `ps` (with the quota and budget it needs), or None: evict
    in order (least work lost, lowest priority, id) each one that remedies something still lacking, until
    the job fits; then put back every victim, most work lost first, that the job does not need after all.
    The state is as before on return."""
    evicted: list[tuple[str, str, float, Live]] = []
    fits = False
    for lost, _, job_id, why in allowed_here:
        lacks = _fits(st, job, opt, ps)
        if all(lacks):
            fits = True
            break
        if _helps(st, job, opt, ps, st.live[job_id], lacks):
            evicted.append((job_id, why, lost, st.evict(job_id)))
    fits = fits or (bool(evicted) and all(_fits(st, job, opt, ps)))
    chosen: list[tuple[str, str, float]] | None = None
    if fits:
        needed = []
        for job_id, why, lost, lv in sorted(evicted, key=lambda e: (-e[2], e[0])):
            st.put_back(lv)
            if all(_fits(st, job, opt, ps)):
                continue    # not needed: it stays back for now
            st.evict(job_id)
            needed.append((job_id, why, lost, lv))
        chosen = sorted(((j, w, lost) for j, w, lost, _ in needed), key=lambda e: e[0])
        evicted = needed
    for _, _, _, lv in reversed(evicted):
        st.put_back(lv)
    return chosen


def try_preempt(st: PlanState, job: JobInfo) -> bool:
    """Make room for `job` by preempting kept work (module docstring); True if it was placed."""
    best: tuple[tuple[object, ...], list[tuple[str, str, float]]] | None = None
    kept = sorted(j for ids in st.kept_by_pool.values() for j in ids)
    if not kept:
        return False  # nothing is running: nothing to preempt
    for opt in job.options:
        need = amount(job, opt)
        allowed_here = sorted((st.live[j].info.job.checkpoint_minutes or 0.0, st.live[j].info.priority, j, why)
                              for j in kept if (why := allowed(st, st.live[j], job, opt.accelerator, need)) is not None)
        if not allowed_here:
            continue
        largest = sorted(allowed_here, key=lambda a: (-amount(st.live[a[2]].info, st.live[a[2]].option), a))
        for ps in st.candidates(job, opt):
            for order in (allowed_here, largest):
                victims = _victims_for(st, job, opt, ps, order)
                if victims:
                    key = (len(victims), sum(v[2] for v in victims), opt.index, ps.pool.key)
                    if best is None or key < best[0]:
                        best = (key, victims)
    if best is None:
        return False
    removed = [st.evict(job_id) for job_id, _, _ in best[1]]
    if not try_place(st, job, allow_borrow=True):  # pragma: no cover - the simulation made room
        for lv in removed:
            st.put_back(lv)
        return False
    for job_id, why, _ in best[1]:
        st.outcome.preemptions.append(
            Preemption(job_id, job.id, f"preempted by {job.id} (priority {job.priority}): {why}"))
        st.failed.add(job_id)
    return True
