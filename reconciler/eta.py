"""When a job is expected to start, as `fleet status TEAM/JOB` and `fleet submit` say it. Pure.

One answer, the plan's: a running job started when the snapshot says; a job that finished with the spec its file
has now (planned from what runs: `Plan.live`) starts no more, so none; a job the plan places starts at the next
`fleet apply` or reconcile cycle; a pending job at the plan's `expected_start` (hours from the plan's moment,
plan/reserve.py): its reservation's start for the first blocked job of a class, else the earliest moment its
gang fits once the work on the pools it can use ends after its `duration_hours` (and its team's own work gives
back the quota, and its spend the budget, it lacks); only a reservation holds anything for it. Every answer says it
is an estimate and what it rests on: higher-class work,
preemption and jobs that outrun their duration_hours move it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from .plan.explain import UNKNOWN
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
    if plan.live is not None and job_id in plan.live.finished + plan.live.failed:
        how = "succeeded" if job_id in plan.live.finished else "failed"
        return Eta(None, False, f"it {how} with the spec its file has now: it is not planned again until its "
                   "file changes")
    if any(p.job == job_id for p in plan.placements):
        held = [p for p in plan.preemptions if p.by == job_id and p.after_minutes is not None]
        if held:      # its victims run to their checkpoints first (reconcile/ckptwait.py; apply leaves it too)
            last = max(held, key=lambda p: (p.after_minutes, p.job))
            return Eta(now + timedelta(minutes=last.after_minutes or 0.0), True,
                       f"the plan places it once {last.job} reached its next checkpoint, in {last.after_minutes:.0f} "
                       "min (its units are reserved for it): the first reconcile cycle after that starts it")
        return Eta(now, True, "the plan places it now: it starts at the next `fleet apply` or reconcile cycle")
    job = v.job_by_id.get(job_id)
    options = v.options.get(job_id, ())
    if job is None or not options:
        return Eta(None, False, "the job is not in the repository or has no valid option")
    pending = next((p for p in plan.pending if p.job == job_id), None)
    if pending is None or pending.expected_start is None:
        return Eta(None, False, UNKNOWN)
    at = now + timedelta(hours=pending.expected_start)
    if pending.reservation is not None:
        cluster, pool, units = pending.reservation
        return Eta(at, False, f"the plan reserves units {', '.join(map(str, units))} of {cluster}/{pool} for it from "
                   "then, when the work there ends after its duration_hours at its option's speed; higher-class work "
                   "and preemption may move it")
    return Eta(at, False, "the plan's: when the work on the pools it can use ends after its duration_hours at its "
               "option's speed (and its team's own work gives back the quota, and its spend the budget, it lacks); "
               "nothing is held for it: jobs ahead of it, and later ones that find the room or the lending first, may "
               "delay it")
