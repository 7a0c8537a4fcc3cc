"""What the engine keeps per job, and what it counts: the state `fleet simulate` accounts with. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..checkpoint import minutes_at_risk
from ..models import Job
from ..resolve import ResolvedOption
from .cluster import SimPool


class Group(NamedTuple):
    """Units a job holds in one pool: a spread service holds one group per pool (plan/spread.py)."""

    pool: SimPool
    units: tuple[int, ...]
    per_unit: int
    accelerator: str


@dataclass(slots=True)
class SimJob:
    idx: int
    id: str
    team: str
    namespace: str
    cls: str
    value: int
    preemptible: bool
    submit_s: int
    work_h: float
    checkpoint_min: float | None
    options: tuple[ResolvedOption, ...]
    spot: str
    replicas: int
    data_region: str | None
    job: Job
    restart_h: float = 0.0       # restore and warm-up after each interruption (faults.py)
    state: str = "future"        # future | waiting | starting | running | done
    pool: SimPool | None = None
    cluster: str = ""
    option: int = 0
    units: tuple[int, ...] = ()
    per_unit: int = 0
    done_h: float = 0.0
    run_start_s: int = 0
    placed_s: int = 0
    first_start_s: int | None = None
    finish_s: int | None = None
    version: int = 0
    interruptions: int = 0
    requeue_at_s: int = 0
    pods_ready_evictions: int = 0   # interruptions Kueue sees as a PodsReady timeout (faults, reclaims, outages)
    evicted_s: int | None = None    # when such an eviction (or MultiKueue's AdmissionCheck one) requeued it last
    last_region: str | None = None
    overhead_h: float = 0.0      # restart time the current or next run spends before its work progresses
    extra: tuple[Group, ...] = ()   # a spread service's other replica groups (their pools, units, accelerators)

    @property
    def asked(self) -> int:
        """The accelerators the job asks for: its first option's count times its replicas (what completed
        accelerator-hours and the wait by accelerator weigh it by)."""
        return self.options[0].count * self.replicas if self.options else 0

    @property
    def accelerators(self) -> int:
        return self.per_unit * len(self.units) + sum(g.per_unit * len(g.units) for g in self.extra)

    def groups(self) -> list[Group]:
        """Every pool the job holds units in: the pool it was placed in, then a spread service's other replica
        groups (plan/spread.py: one placement per pool, each with its own option)."""
        if self.pool is None:
            return []
        return [Group(self.pool, self.units, self.per_unit, self.options[self.option].accelerator), *self.extra]


def kept_hours(j: SimJob, elapsed_h: float) -> float:
    """Hours of progress of the current run that a checkpoint kept (0 without checkpoints; all of it with
    continuous ones). Checkpoints come every `checkpoint_minutes` of running time counted from the start of
    the run (`checkpoint.minutes_at_risk`, the model the planner and the reconcile loop reckon with); the
    run's first `overhead_h` (restore and warm-up) makes no progress, so a checkpoint keeps the progress made
    between the end of that warm-up and it."""
    ran_min = elapsed_h * 60
    lost_min = minutes_at_risk(ran_min, j.checkpoint_min)
    saved_h = elapsed_h if lost_min == 0 else max(0.0, elapsed_h - lost_min / 60)
    return max(0.0, saved_h - j.overhead_h)


@dataclass(slots=True)
class Counters:
    paid_acc_h: float = 0.0
    busy_acc_h: float = 0.0
    good_acc_h: float = 0.0
    lost_acc_h: float = 0.0
    cost_usd: float = 0.0
    migrations: int = 0
    preemptions: int = 0
    faults: dict[str, int] = field(default_factory=lambda: {"node": 0, "slice": 0, "spot": 0, "cluster": 0})
    lost_by: dict[str, float] = field(default_factory=dict)     # why -> accelerator-hours lost
    completed_acc_h: float = 0.0        # accelerator-hours of work (first option) of the jobs completed
    over_quota_acc_h: float = 0.0       # rules.Watch.over_quota, integrated
    over_budget_h: float = 0.0          # rules.Watch.over_budget (teams over budget), integrated
    withheld_acc_h: float = 0.0         # rules.Watch.withheld (nominal quota withheld from its team), integrated
    inverted_acc_h: float = 0.0         # rules.Watch.inverted (a team's lower class holding what its higher needs)


@dataclass(frozen=True, slots=True)
class Sample:
    hour: int
    queued: dict[str, int]
    occupied: int
    paid: int
    cost_usd: float
    faults: int
