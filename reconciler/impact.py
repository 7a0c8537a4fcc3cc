"""What a change does to running work and to money, in the order a reviewer should read it. Pure.

The diff (stage 6) lists every job change; this module reads it as a reviewer would:

1. Disruption. Running work is the base plan's placements. A change stops a running job (it waits in the head,
   another job preempts it, or its file is removed) or moves it (it restarts elsewhere). Each such job
   loses the work done since its last checkpoint: at most `checkpoint_minutes` of its accelerators, so the work
   lost is bounded by accelerators x checkpoint_minutes / 60 accelerator-hours (the assumption: the job
   checkpoints every `checkpoint_minutes` and is stopped just before the next checkpoint). A job that names no
   `checkpoint_minutes` has an unknown loss, counted apart, never as zero. A service (`kind: inference`)
   with `checkpoint_minutes: 0` loses no work, but while stopped it serves nothing. Jobs are grouped by
   priority class, highest first.
2. Commitment. What the change commits is the run cost of the jobs it starts: hourly x `duration_hours` (on
   the option it starts on: / its `relative_speed`, `resolve.run_hours`)
   (not x 730: a 48-hour job does not run all month). A started job without `duration_hours` runs until
   someone stops it; its hourly rate is given apart. Beside it, the change in run-rate: $/h after minus
   before, and what that would be over a whole month (x 730).
3. Budgets: each team's spend against its `budget_monthly_usd`, forecast to the end of the month of `as_of`:
   spent so far = the base plan's hourly rate for the team (what ran before the change; the head's without a
   base) x the hours of the month before `as_of`, an estimate assuming that rate held since the month began;
   forecast = spent so far + the head plan's hourly rate x the hours left in the month.
4. Price changes: every pool on both sides whose unit price changed (an edit of `fleet/prices.yaml`, a pool's
   `hourly_usd`, the catalog), with the old and new price and where each comes from.
5. Exposure: a new pool (or one whose `max` grows) can scale to `max` units: max x unit price x 730 a month.
"""

from __future__ import annotations

import calendar
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from .checkpoint import work_at_risk
from .cost.model import HOURS_PER_MONTH, JobCost, JobMeta, Priced
from .diff import PlanDiff, from_git_alone
from .plan.units import units_gone

STOPPING = {"wait": "stops", "preempt": "preempted", "stop": "stops", "move": "moves"}


def lost_accelerator_hours(accelerators: int, checkpoint_minutes: float | None) -> float | None:
    """The most work a disruption destroys: the job's accelerators for one checkpoint interval (None: unknown),
    `checkpoint.work_at_risk` with the running time not known (before the change, nothing has run yet)."""
    return work_at_risk(None, checkpoint_minutes, accelerators)[1]


def month_hours(as_of: datetime) -> tuple[float, float]:
    """(hours of the calendar month of `as_of` already past, hours left), in UTC."""
    t = as_of.astimezone(UTC) if as_of.tzinfo else as_of.replace(tzinfo=UTC)
    start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    days = calendar.monthrange(t.year, t.month)[1]
    past = (t - start).total_seconds() / 3600
    return past, days * 24 - past


@dataclass(frozen=True, slots=True)
class Disrupted:
    job: str
    change: str                     # stops | preempted | moves
    priority: str
    priority_value: int
    kind: str
    before: str                     # cluster/pool it ran on
    after: str                      # cluster/pool, "pending", or "" (its file removed)
    accelerators: int
    checkpoint_minutes: float | None
    why: str

    @property
    def lost_accelerator_hours(self) -> float | None:
        return lost_accelerator_hours(self.accelerators, self.checkpoint_minutes)


@dataclass(frozen=True, slots=True)
class Started:
    job: str
    priority: str
    where: str
    hourly_usd: float
    duration_hours: float | None    # the file's: its run on its first option
    run_hours: float | None         # how long it runs where it starts (`resolve.run_hours`: on its option)

    @property
    def run_usd(self) -> float | None:
        return None if self.run_hours is None else self.hourly_usd * self.run_hours


@dataclass(frozen=True, slots=True)
class ClassImpact:
    priority: str
    stopped: tuple[str, ...]
    moved: tuple[str, ...]
    lost_accelerator_hours: float
    unknown: int                    # of those, jobs without checkpoint_minutes


@dataclass(frozen=True, slots=True)
class BudgetBurn:
    team: str
    budget_monthly_usd: float
    hourly_before_usd: float
    hourly_after_usd: float
    spent_usd: float                # estimated, this month before as_of
    forecast_usd: float             # spent + the head's rate for the rest of the month

    @property
    def left_usd(self) -> float:
        return self.budget_monthly_usd - self.forecast_usd

    @property
    def spent_share(self) -> float:
        return self.spent_usd / self.budget_monthly_usd if self.budget_monthly_usd > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PriceChange:
    pool: str
    accelerator: str
    capacity: str
    before_usd: float               # unit $/h
    after_usd: float
    source_before: str
    source_after: str
    units: int                      # units paid for in the head

    @property
    def monthly_delta_usd(self) -> float:
        return (self.after_usd - self.before_usd) * self.units * HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class Exposure:
    pool: str
    accelerator: str
    capacity: str
    max_before: int | None          # None: a new pool
    max_after: int
    unit_hourly_usd: float

    @property
    def max_monthly_usd(self) -> float:
        return self.max_after * self.unit_hourly_usd * HOURS_PER_MONTH


@dataclass(frozen=True)
class Impact:
    disrupted: tuple[Disrupted, ...]        # highest class first, then the most work lost
    by_class: tuple[ClassImpact, ...]       # classes with a disrupted job, highest first
    started: tuple[Started, ...]
    hourly_before_usd: float
    hourly_after_usd: float
    budgets: tuple[BudgetBurn, ...]
    as_of: datetime | None
    price_changes: tuple[PriceChange, ...]
    exposures: tuple[Exposure, ...]
    new_waiting: tuple[str, ...] = ()       # jobs that wait in the head and neither ran nor waited in the base
    may_have_finished: tuple[str, ...] = ()  # stopped by their file's removal, the base planned from git alone

    @property
    def lost_accelerator_hours(self) -> float:
        return sum(c.lost_accelerator_hours for c in self.by_class)

    @property
    def unknown_loss(self) -> int:
        return sum(c.unknown for c in self.by_class)

    @property
    def committed_usd(self) -> float:
        return sum(s.run_usd or 0.0 for s in self.started)

    @property
    def open_ended(self) -> tuple[Started, ...]:
        return tuple(s for s in self.started if s.run_usd is None)

    @property
    def hourly_delta_usd(self) -> float:
        return self.hourly_after_usd - self.hourly_before_usd


def impact(head: Priced, base: Priced | None = None, diff: PlanDiff | None = None,
           as_of: datetime | None = None) -> Impact:
    """The change read for review (module docstring); without a base, only budgets (nothing is disrupted)."""
    meta: Mapping[str, JobMeta] = {**(base.jobs_meta if base else {}), **head.jobs_meta}
    disrupted, started = _disrupted(base, head, diff, meta), _started(head, diff, meta)
    classes = []
    for prio in dict.fromkeys(d.priority for d in disrupted):
        ds = [d for d in disrupted if d.priority == prio]
        classes.append(ClassImpact(prio, tuple(d.job for d in ds if d.change != "moves"),
                                   tuple(d.job for d in ds if d.change == "moves"),
                                   sum(d.lost_accelerator_hours or 0.0 for d in ds),
                                   sum(d.lost_accelerator_hours is None for d in ds)))
    return Impact(disrupted, tuple(classes), started, base.cost.hourly_usd if base else head.cost.hourly_usd,
                  head.cost.hourly_usd, _budgets(head, base, as_of), as_of, _price_changes(head, base),
                  _exposures(head, base),
                  tuple(c.job for c in diff.jobs if c.change == "wait" and c.before == "") if diff else (),
                  tuple(d.job for d in disrupted if d.after == "" and base is not None and from_git_alone(base)))


def _accelerators(side: Priced) -> dict[str, int]:
    """job -> its accelerators (a spread service has one placement per pool: their sum)."""
    out: dict[str, int] = defaultdict(int)
    for j in side.cost.jobs:
        out[j.job] += j.accelerators
    return out


def _leaving(base: Priced, head: Priced, job: str) -> int:
    """The accelerators of a service's replicas that leave their place: per pool of the base, the units the head
    no longer places there (as many fewer where the pool's nodes are interchangeable, else the units themselves:
    a TPU slice is a place) times what each holds; all of a pool's where the replica's gang changed there. The
    loop scales a service pool by pool, so a drained cluster's replicas move and the others stay (before
    2026-12-07 the comment counted every accelerator of the service as moving)."""
    after = {p.pool_key: p for p in head.plan.placements_of(job)}
    out = 0
    for b in base.plan.placements_of(job):
        a = after.get(b.pool_key)
        if a is None or a.accelerators_per_unit != b.accelerators_per_unit:
            out += len(b.units) * b.accelerators_per_unit
        else:
            same = b.pool_key in base.interchangeable and b.pool_key in head.interchangeable
            out += units_gone(b.units, a.units, same) * b.accelerators_per_unit
    return out


def _disrupted(base: Priced | None, head: Priced, diff: PlanDiff | None,
               meta: Mapping[str, JobMeta]) -> tuple[Disrupted, ...]:
    if base is None or diff is None:
        return ()
    ran, runs = _accelerators(base), _accelerators(head)
    out = []
    for c in diff.jobs:
        if c.change not in STOPPING or c.job not in ran:
            continue
        m = meta.get(c.job)
        # all its accelerators stop or move; a service's replicas removed (a stop that leaves it placed): theirs;
        # a service's move: those of its replicas that leave their place (the loop scales it pool by pool)
        stopping = ran[c.job] - runs.get(c.job, 0) if c.change == "stop" and c.after not in ("", "pending") \
            else _leaving(base, head, c.job) if c.change == "move" and m is not None and m.kind == "inference" \
            else ran[c.job]
        out.append(Disrupted(c.job, STOPPING[c.change], m.priority if m else "?", m.priority_value if m else 0,
                             m.kind if m else "?", c.before, c.after, stopping,
                             m.checkpoint_minutes if m else None, c.detail))
    return tuple(sorted(out, key=lambda d: (-d.priority_value, d.change == "moves", -(d.lost_accelerator_hours or 0),
                                            d.job)))


def _started(head: Priced, diff: PlanDiff | None, meta: Mapping[str, JobMeta]) -> tuple[Started, ...]:
    costs: dict[str, list[JobCost]] = {}
    for j in head.cost.jobs:   # a spread service has one per pool: it starts on all of them, at their sum
        costs.setdefault(j.job, []).append(j)
    starts = [c for c in diff.jobs if c.change == "start"] if diff is not None else []
    out = []
    for c in starts:   # replicas added to a placed service (diff._grew): what they add, not the whole run-rate
        js, m = costs[c.job], meta.get(c.job)
        grew = c.before not in ("", "pending")
        out.append(Started(c.job, m.priority if m else "?", ", ".join(f"{j.cluster}/{j.pool}" for j in js),
                           c.hourly_delta_usd if grew else sum(j.hourly_usd for j in js), js[0].duration_hours,
                           js[0].run_hours))
    return tuple(sorted(out, key=lambda s: (-(s.run_usd or 0), -s.hourly_usd, s.job)))


def _budgets(head: Priced, base: Priced | None, as_of: datetime | None) -> tuple[BudgetBurn, ...]:
    past, left = month_hours(as_of) if as_of is not None else (0.0, HOURS_PER_MONTH)
    before = (base or head).cost.by_team
    out = []
    for team, budget in sorted(head.budgets_monthly_usd.items()):
        b, a = before.get(team, 0.0), head.cost.by_team.get(team, 0.0)
        out.append(BudgetBurn(team, budget, b, a, b * past, b * past + a * left))
    return tuple(out)


def _price_changes(head: Priced, base: Priced | None) -> tuple[PriceChange, ...]:
    if base is None:
        return ()
    before = {p.key: p for p in base.cost.pools}
    out = []
    for p in head.cost.pools:
        b = before.get(p.key)
        if b is not None and round(b.unit_hourly_usd, 4) != round(p.unit_hourly_usd, 4):
            out.append(PriceChange(p.key, p.accelerator, p.capacity, b.unit_hourly_usd, p.unit_hourly_usd,
                                   b.price_source, p.price_source, p.paid_units))
    return tuple(out)


def _exposures(head: Priced, base: Priced | None) -> tuple[Exposure, ...]:
    if base is None:
        return ()
    before = {(p.cluster, p.pool): p.max for p in base.plan.pools}
    capacity = {p.key: (p.accelerator, p.capacity) for p in head.cost.pools}
    out = []
    for p in head.plan.pools:
        was = before.get((p.cluster, p.pool))
        if was is None or p.max > was:
            acc, cap = capacity.get(f"{p.cluster}/{p.pool}", ("?", "?"))
            out.append(Exposure(f"{p.cluster}/{p.pool}", acc, cap, was, p.max, p.unit_hourly_usd))
    return tuple(sorted(out, key=lambda e: (-e.max_monthly_usd, e.pool)))
