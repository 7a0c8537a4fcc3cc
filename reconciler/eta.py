"""When a job is expected to start: an estimate from the plan and the `duration_hours` of what runs. Pure.

Until reservations exist (the scheduling work of issue 22), Fleet cannot promise a start time; it can say
when, if every job holding the accelerators a waiting job asks for ends after its `duration_hours`, enough
of them is free. That is what this computes, and every answer says it is an estimate and what it rests on.

The rule, per option of the waiting job (its accelerator and its gang of `count` x `replicas`):
1. The holders are the plan's placements of other jobs on pools of that accelerator, each freeing its
   `accelerators_per_unit x units` when it ends: at `start + duration_hours`, where `start` is when it began
   running (from the snapshot) or `now` for a job the plan starts now.
2. Holders are taken in order of their end (ties by job id); the option's start is the end at which the
   accelerators freed reach the gang. A holder with no `duration_hours` never ends in this estimate.
3. The earliest option wins (ties: the lower option index). None reaches: no estimate, and why.
4. A job the plan holds back for its team's quota (`quota for team T` in its reasons) waits for its own
   team's jobs: only they give the quota back, so only they count as holders.
Quotas, priorities and preemption are not modelled: a job ahead in the queue may take the freed capacity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .plan.types import Plan
from .validate import Validated


@dataclass(frozen=True, slots=True)
class Eta:
    """The expected start: `at` (None: cannot tell), whether it is `placed` now, and what it rests on."""

    at: datetime | None
    placed: bool
    basis: str
    option: int | None = None
    waits_for: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {"at": self.at.isoformat() if self.at else None, "estimate": True, "placed": self.placed,
                "option": self.option, "waits_for": list(self.waits_for), "basis": self.basis}

    def text(self) -> str:
        if self.at is None:
            return f"unknown (estimate): {self.basis}"
        return f"{self.at.strftime('%Y-%m-%d %H:%M UTC')} (estimate): {self.basis}"


def expected_start(v: Validated, plan: Plan, job_id: str, now: datetime,
                   running_since: Mapping[str, datetime] | None = None) -> Eta:
    """The estimate of when `job_id` starts (module docstring). `running_since`: when each running job began."""
    since = running_since or {}
    if job_id in since:
        return Eta(since[job_id], True, "it runs already")
    if any(p.job == job_id for p in plan.placements):
        return Eta(now, True, "the plan places it now: it starts at the next `fleet apply` or reconcile cycle")
    job = v.job_by_id.get(job_id)
    options = v.options.get(job_id, ())
    if job is None or not options:
        return Eta(None, False, "the job is not in the repository or has no valid option")
    reasons = next((p.reasons for p in plan.pending if p.job == job_id), ())
    own_quota = any(f"quota for team {job.team}" in r for r in reasons)
    best: Eta | None = None
    for opt in options:
        need = opt.count * job.replicas
        holders: list[tuple[datetime, str, int]] = []
        for p in plan.placements:
            pool = v.pool_by_key.get((p.cluster, p.pool))
            other = v.job_by_id.get(p.job)
            if p.job == job_id or pool is None or pool.accelerator != opt.accelerator or other is None:
                continue
            if other.duration_hours is None or (own_quota and other.team != job.team):
                continue
            end = since.get(p.job, now) + timedelta(hours=other.duration_hours)
            holders.append((max(end, now), p.job, p.accelerators_per_unit * len(p.units)))
        freed, names = 0, []
        for end, name, amount in sorted(holders):
            freed += amount
            names.append(name)
            if freed >= need:
                if best is None or end < (best.at or end):
                    best = Eta(end, False, f"when {_names(names)} "
                               + ("ends after its" if len(names) == 1 else "end after their") + " duration_hours, "
                               f"{freed} {opt.accelerator} are free for option {opt.index} "
                               f"({need} needed); quotas and jobs ahead of it may delay it", opt.index, tuple(names))
                break
    if best is None:
        return Eta(None, False, "the jobs holding the accelerators it asks for never free enough of them in this "
                   "estimate (some have no duration_hours, or the fleet has too few)")
    return best


def _names(names: list[str]) -> str:
    if len(names) <= 3:
        return " and ".join(names) if len(names) <= 2 else f"{names[0]}, {names[1]} and {names[2]}"
    return f"{', '.join(names[:3])} and {len(names) - 3} more"
