"""Step 5 of the planner: preemption of kept (running) work for a job that does not fit otherwise.

Victims are kept placements of preemptible classes that `policies/priorities.yaml` lets the job preempt:
its own team's lower-priority jobs (`within_team`), borrowers in its cohort when the job is within its
nominal quota (`reclaim_within_cohort`), or lower-priority jobs at or below `max_priority_threshold` when the
job must borrow (`borrow_within_cohort`). In each candidate pool victims are taken in order of least work
lost (`checkpoint_minutes`), then lowest priority, then id, until the job fits; the pool needing the fewest
victims wins (then least work lost, option index, pool). Smallest set in that order, not a global optimum.
Victims go back to the queue and may land elsewhere in the final pass.
"""

from __future__ import annotations

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


def try_preempt(st: PlanState, job: JobInfo) -> bool:
    best: tuple[tuple[object, ...], list[tuple[str, str]]] | None = None
    if not any(st.kept_by_pool.values()):
        return False  # nothing is running: nothing to preempt
    for opt in job.options:
        need = amount(job, opt)
        for ps in st.candidates(job, opt):
            kept = st.kept_by_pool.get(ps.pool.key)
            if not kept:
                continue
            victims = sorted(((st.live[job_id].info.job.checkpoint_minutes or 0.0, st.live[job_id].info.priority,
                               job_id, why)
                              for job_id in sorted(kept)
                              if (why := allowed(st, st.live[job_id], job, opt.accelerator, need)) is not None),
                             key=lambda t: (t[0], t[1], t[2]))
            if not victims:
                continue
            evicted: list[tuple[str, str, Live]] = []
            chosen = None
            for _lost, _, job_id, why in victims:
                evicted.append((job_id, why, st.evict(job_id)))
                gang = st.gang(opt, ps)
                units = ps.find(gang, job.job.replicas)
                if units is not None and st.quota.shortfall(job.team, opt.accelerator, need) == 0 and \
                        st.attributed(ps, gang, units) <= st.budget_room(job.team):
                    lost_total = sum(e[2].info.job.checkpoint_minutes or 0.0 for e in evicted)
                    chosen = ((len(evicted), lost_total, opt.index, ps.pool.key), [(j, w) for j, w, _ in evicted])
                    break
            for _, _, back in reversed(evicted):  # restore; the winner is applied below
                st.put_back(back)
            if chosen and (best is None or chosen[0] < best[0]):
                best = chosen
    if best is None:
        return False
    removed = [st.evict(job_id) for job_id, _ in best[1]]
    if not try_place(st, job, allow_borrow=True):  # pragma: no cover - the simulation made room
        for lv in removed:
            st.put_back(lv)
        return False
    for job_id, why in best[1]:
        st.outcome.preemptions.append(
            Preemption(job_id, job.id, f"preempted by {job.id} (priority {job.priority}): {why}"))
        st.failed.add(job_id)
    return True
