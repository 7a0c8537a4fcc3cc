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

from typing import TYPE_CHECKING

from .capacity import gang_for
from .types import Preemption

if TYPE_CHECKING:
    from .planner import JobInfo, Live, Planner


def _allowed(pl: Planner, victim: Live, job: JobInfo, acc: str, amount: int) -> str | None:
    """Why `job` may preempt `victim` (the rule), or None."""
    rules = pl.prio.preemption
    v = victim.info
    if not v.preemptible or v.priority > job.priority:
        return None
    if v.team == job.team:
        if rules.within_team != "never" and v.priority < job.priority:
            return f"lower priority in team {job.team}"
        return None
    if pl.quota.domain.get(v.team) is None or pl.quota.domain.get(v.team) != pl.quota.domain.get(job.team):
        return None
    within_nominal = pl.quota.shortfall(job.team, acc, amount, allow_borrow=False) == 0
    if within_nominal and pl.quota.is_borrowing(v.team, victim.option.accelerator):
        if rules.reclaim_within_cohort == "any" or (
                rules.reclaim_within_cohort == "lower_priority" and v.priority < job.priority):
            return f"reclaiming {acc} quota that team {v.team} borrowed"
        return None
    bw = rules.borrow_within_cohort
    if bw.policy == "lower_priority" and v.priority < job.priority and (
            bw.max_priority_threshold is None or v.priority <= bw.max_priority_threshold):
        return "borrowing within the cohort from lower-priority work"
    return None


def try_preempt(pl: Planner, job: JobInfo) -> bool:
    best: tuple[tuple[object, ...], list[tuple[str, str]]] | None = None
    if not any(pl.kept_by_pool.values()):
        return False  # nothing is running: nothing to preempt
    for opt in job.options:
        amount = opt.count * job.job.replicas
        for ps in pl.candidates(job, opt):
            kept = pl.kept_by_pool.get(ps.pool.key)
            if not kept:
                continue
            victims = sorted(((pl.live[job_id].info.job.checkpoint_minutes or 0.0, pl.live[job_id].info.priority,
                               job_id, why)
                              for job_id in sorted(kept)
                              if (why := _allowed(pl, pl.live[job_id], job, opt.accelerator, amount)) is not None),
                             key=lambda t: (t[0], t[1], t[2]))
            if not victims:
                continue
            evicted = []
            chosen = None
            for _lost, _, job_id, why in victims:
                evicted.append((job_id, why, pl.evict(job_id)))
                gang = gang_for(opt, ps.pool)
                units = ps.find(gang, job.job.replicas)
                if units is not None and pl.quota.shortfall(job.team, opt.accelerator, amount) == 0 and \
                        pl.attributed(ps, gang, units) <= pl.budget_left(job.team) + 1e-9:
                    lost_total = sum(e[2].info.job.checkpoint_minutes or 0.0 for e in evicted)
                    chosen = ((len(evicted), lost_total, opt.index, ps.pool.key), [(j, w) for j, w, _ in evicted])
                    break
            for _, _, back in reversed(evicted):  # restore; the winner is applied below
                back.pool.take(back.units, back.gang)
                pl.commit(back.info, back.pool, back.option, back.units, kept=True)
            if chosen and (best is None or chosen[0] < best[0]):
                best = chosen
    if best is None:
        return False
    removed = [pl.evict(job_id) for job_id, _ in best[1]]
    if not pl.try_place(job, allow_borrow=True):  # cannot happen: the simulation made room; stay safe
        for lv in removed:
            lv.pool.take(lv.units, lv.gang)
            pl.commit(lv.info, lv.pool, lv.option, lv.units, kept=True)
        return False
    for job_id, why in best[1]:
        pl.preemptions.append(Preemption(job_id, job.id, f"preempted by {job.id} (priority {job.priority}): {why}"))
        pl.failed[job_id] = []
    return True
