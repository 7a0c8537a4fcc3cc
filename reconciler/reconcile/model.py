"""The reconciler's values: actions, the loop's memory, its knobs, and what a decision returns. Pure.

`decide.py` computes them (and re-exports them: `fleet simulate` imports everything from there); they live
here so each module stays readable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_serializer, field_validator

from ..models import spec_digest
from ..observe.model import Completion, JobSet, Phase
from ..resolve import run_hours
from ..suggest import unit_list

ActionKind = Literal["resize", "kueue", "stop", "move", "start"]
ORDER: tuple[str, ...] = ("resize-up", "kueue", "stop", "move", "start", "resize-down")
"""Pools grow before anything needs them and Kueue quotas follow them; stops free capacity and quota before
moves and starts take it; released units go last, after the jobs that left them."""
ACTIVE: frozenset[str] = frozenset({"queued", "admitted", "running", "evicted", "unknown"})


KEPT = {"namespace", "name", "uid", "team", "job", "pool", "units", "kind", "spec_digest"}
"""The fields of a JobSet the memory keeps (`LoopMemory.last_running`)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Action(_Frozen):
    """One thing the reconciler does to a cluster, with why. `move` is one action of two steps (stop the old
    copy, start the new; for an inference service the new copy first), so no actuator starts the new copy
    after failing to stop the old one."""

    kind: ActionKind = Field(description="resize | kueue | stop | move | start")
    cluster: str = Field(description="the cluster acted on (a move: the destination)")
    pool: str | None = Field(None, description="the pool (resize; the pool a job starts or moves to)")
    job: str | None = Field(None, description="team/job for stop, move and start")
    reason: str = Field(description="why, in words a reviewer can check")
    from_cluster: str | None = Field(None, description="move and stop: where the copy runs now")
    from_pool: str | None = Field(None, description="move and stop: the pool it runs in now")
    from_namespace: str | None = Field(None, description="a JobSet's move and stop: the namespace of the copy "
                                       "observed (the object deleted is the one observed, never a guessed path)")
    from_name: str | None = Field(None, description="a JobSet's move and stop: the name of the copy observed")
    from_uid: str | None = Field(None, description="a JobSet's move and stop: the uid of the copy observed (the "
                                 "delete's precondition: a JobSet made since under that name is not deleted)")
    from_kind: str = Field("JobSet", description="a gang's move and stop: the kind of the copy observed (JobSet, "
                           "or a Ray job's RayJob / RayService)")
    units: tuple[int, ...] = Field((), description="start and move: the units the plan gives the job")
    target: int | None = Field(None, description="resize: the units the pool will have")
    current: int | None = Field(None, description="resize: the units it has now")
    lost_accelerator_hours: float = Field(0.0, ge=0, description="stop and move: work lost since the last checkpoint")
    lost_minutes: float = Field(0.0, ge=0, description="stop and move: minutes of the job's run lost")
    service: bool = Field(False, description="an inference job (Deployment or LeaderWorkerSet, not a JobSet)")
    force: bool = Field(False, description="move: failover, never deferred by the migration limit")
    keep: tuple[str, ...] = Field((), description="an inference service's start or stop: the names of the job's "
                                  "objects in the cluster it leaves alone (a stop: the plan's; a start: the old "
                                  "ones that serve until the new replicas are ready)")

    @property
    def stage(self) -> str:
        if self.kind == "resize":
            return "resize-up" if (self.target or 0) > (self.current or 0) else "resize-down"
        return self.kind

    def describe(self) -> str:
        """One line for people (`--dry-run`, the log)."""
        where = f"{self.cluster}/{self.pool}" if self.pool else self.cluster
        if self.kind == "resize":
            head = f"resize {where}: {self.current} -> {self.target} units"
        elif self.kind == "kueue":
            head = f"kueue {self.cluster}: update its Kueue objects"
        elif self.kind == "move":
            head = f"move {self.job}: {self.from_cluster}/{self.from_pool} -> {where}"
        elif self.kind == "stop":
            head = f"stop {self.job} on {self.from_cluster}/{self.from_pool}"
        else:
            head = f"start {self.job} on {where}" + (f" units {unit_list(self.units)}" if self.units else "")
        lost = (f" (lost work {self.lost_accelerator_hours:g} accelerator-hours, {self.lost_minutes:g} min)"
                if self.lost_minutes else "")
        return f"{head}{lost}: {self.reason}"


class Fence(_Frozen):
    """Where a job's moved copy runs: every other copy of it is stale and stopped once reachable."""

    cluster: str
    pool: str
    units: tuple[int, ...] = ()
    since: datetime = Field(description="when the move was decided")


class Asked(_Frozen):
    """A pool size the loop asked for and has not yet seen: a resize is done when the observed pool has the
    size, not when it was asked (nodes take minutes to come; a failed slice, a Pulumi error or a change lost on
    the way leaves the pool as it was). While the observed size differs, the same size is asked again after a
    backoff (`decide.ask_again_at`)."""

    units: int = Field(description="the unit count asked for")
    first: datetime | None = Field(None, description="when this size was first asked (None: memory written by an "
                                                     "older version, which kept no time)")
    last: datetime | None = Field(None, description="when it was last asked")
    attempts: int = Field(1, ge=1, description="how many times it was asked")
    failed: str = Field("", description="why the last attempt failed, when the actuator said it failed")


class GroupTry(_Frozen):
    """A job group that ran in part (groups.py): since when, and the members the loop stopped for it."""

    since: datetime | None = Field(None, description="the first cycle it was seen in part (None: not in part now)")
    stopped: tuple[str, ...] = Field((), description="members stopped after the bound, not started again until "
                                                     "the rest is admitted or `retry_at`")
    attempts: int = Field(0, ge=0, description="how many times its admitted members were stopped (the backoff)")
    retry_at: datetime | None = Field(None, description="when the stopped members start again in any case")
    specs: str | None = Field(None, description="its members' specs when the loop last stopped them (a digest; "
                                                "a member's file edited since: its tries start over)")


class LoopMemory(_Frozen):
    """What the loop remembers between cycles; everything else is observed again."""

    idle_since: dict[str, datetime] = Field(default_factory=dict,
                                            description="`cluster/pool/unit` -> first cycle it was seen idle")
    unreachable_since: dict[str, datetime] = Field(default_factory=dict,
                                                   description="cluster -> first cycle it could not be read")
    moved: dict[str, Fence] = Field(default_factory=dict, description="job -> where its moved copy runs")
    cordoned_since: dict[str, datetime] = Field(default_factory=dict,
                                                description="`cluster/node` -> first cycle it was seen cordoned "
                                                            "(a cordon carries no time of its own)")
    services: dict[str, str] = Field(default_factory=dict,
                                     description="inference job -> the `cluster/pool`s its objects were applied to, "
                                                 "joined by commas (a spread service runs in several)")
    quotas: dict[str, list[str]] = Field(default_factory=dict,
                                         description="cluster -> quotas last applied: each team's part, and a "
                                                     "digest of its split over the cluster's flavors")
    kueue: dict[str, list[str]] = Field(default_factory=dict,
                                        description="cluster -> its other Kueue objects last applied (git's: "
                                                    "`render.kueue_config`), `<Kind> <name> <digest>` each")
    last_running: dict[str, list[JobSet]] = Field(
        default_factory=dict, description="cluster -> the jobs' JobSets admitted or running when it was last read "
                                          "(kept without their status): what the loop keeps there while the cluster "
                                          "cannot be read, after a restart too")
    last_completions: dict[str, list[Completion]] = Field(
        default_factory=dict, description="cluster -> the completion records of jobs in git when it was last read: "
                                          "a job that finished there is not started again while it cannot be read")
    read: list[str] = Field(default_factory=list, description="clusters this memory has read, whole, at least once")
    targets: dict[str, Asked] = Field(default_factory=dict,
                                      description="`cluster/pool` -> the size asked for and not yet observed, when "
                                                  "and how often (asked again after a backoff while it differs)")

    last_cycle: datetime | None = Field(None, description="when the last cycle decided (what a memory file of "
                                                          "2026-12-07 reads its `held` list at)")
    held: dict[str, datetime] = Field(default_factory=dict,
                                      description="victim -> the last cycle that left it running for its checkpoint, "
                                                  "kept while every plan since still preempts it (ckptwait.py)")
    groups: dict[str, GroupTry] = Field(default_factory=dict,
                                        description="`team/group` -> a group that runs in part, or whose members "
                                                    "were stopped for it (groups.py)")

    @field_serializer("last_running")
    def _bare(self, value: dict[str, list[JobSet]]) -> dict[str, list[dict[str, Any]]]:
        """What keeps a job where it ran (plan/live.py, decide.py): its name, owner and units, not its status."""
        return {c: [js.model_dump(mode="json", include=KEPT) for js in sets] for c, sets in value.items()}

    @field_validator("held", mode="before")
    @classmethod
    def _older_held(cls, value: Any, info: ValidationInfo) -> Any:
        """Memory files of 2026-12-07 listed the jobs the last cycle held: each held at `last_cycle`."""
        if isinstance(value, list):
            at = info.data.get("last_cycle")
            return {job: at for job in value} if at is not None else {}
        return value

    @field_validator("targets", mode="before")
    @classmethod
    def _older_targets(cls, value: Any) -> Any:
        """Memory files of older versions kept a bare unit count per pool: an ask of unknown time (asked again
        in the next cycle unless the pool already has it)."""
        if isinstance(value, dict):
            return {k: {"units": v} if isinstance(v, int) and not isinstance(v, bool) else v for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Knobs:
    """`policies/placement.yaml` `reconcile:` (DESIGN 2), plus the per-cycle limits."""

    interval_seconds: float = 60
    cluster_lost_after_minutes: float = 15
    node_failed_after_minutes: float = 10
    scale_down_after_minutes: float = 30
    paused: bool = False
    lease_cluster: str | None = None
    max_migrations_per_cycle: int = 5           # placement.yaml max_migrations_per_plan
    max_released_units_per_cycle: int = 16
    group_whole_minutes: float = 10             # a group in part longer stops its admitted members (groups.py)
    group_retry_limit: int | None = 5           # restarts after a backoff of a group's stopped members (None: no limit)

    @classmethod
    def of(cls, placement: Any) -> Knobs:
        """From a `PlacementDoc` (or None): its `reconcile:` section where it has one, the defaults otherwise."""
        if placement is None:
            return cls()
        section = getattr(placement, "reconcile", None)
        values: dict[str, Any] = {"max_migrations_per_cycle": getattr(placement, "max_migrations_per_plan", 5)}
        for name in ("interval_seconds", "cluster_lost_after_minutes", "node_failed_after_minutes",
                     "scale_down_after_minutes", "paused", "lease_cluster", "max_released_units_per_cycle",
                     "group_whole_minutes"):
            value = getattr(section, name, None) if section is not None else None
            if value is not None:
                values[name] = value
        if section is not None and hasattr(section, "group_retry_limit"):
            values["group_retry_limit"] = section.group_retry_limit   # null in the file: no limit, as it states
        return cls(**values)


@dataclass(frozen=True)
class JobFacts:
    """What the decision needs of a job's file."""

    kind: str = "training"
    checkpoint_minutes: float | None = None
    duration_hours: float | None = None
    counts: tuple[int, ...] = ()        # accelerators per replica of each option, by index (a service's replicas)
    spec: Any = field(default=None, compare=False, repr=False)    # the Job: its digest, asked only when needed
    accelerators: frozenset[str] | None = None   # of its options (None: not known: it may run anywhere)
    speeds: tuple[tuple[str, float], ...] = ()   # accelerator -> its options' least relative_speed (any not 1)
    pool_accelerators: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)  # shared

    def digest(self) -> str | None:
        """The spec digest of the file as it is now (`models.spec_digest`; None: the facts carry no Job)."""
        return None if self.spec is None else spec_digest(self.spec)

    def run_hours(self, cluster: str, pool: str | None) -> float | None:
        """How long the job runs on `cluster/pool` (`resolve.run_hours` on its option there; a pool `speeds` does
        not list: `duration_hours` as is). None: it has no duration_hours."""
        acc = self.pool_accelerators.get(f"{cluster}/{pool}") if self.speeds else None
        return run_hours(self.duration_hours, dict(self.speeds).get(acc, 1.0) if acc else 1.0)


def job_facts(validated: Any) -> dict[str, JobFacts]:
    """The facts `decide` reads, from a `Validated` repository (every job of `jobs/`). A job's speed on a pool is
    its options' of the pool's accelerator, the slowest where several are (the most work left, never less)."""
    options = validated.options
    pools = {f"{c.name}/{p.name}": p.accelerator for c in validated.loaded.clusters for p in c.pools}  # one, shared
    facts = {}
    for j in validated.loaded.jobs:
        mine = sorted(options.get(j.id, ()), key=lambda o: o.index)
        slow: dict[str, float] = {}
        for o in mine:
            slow[o.accelerator] = min(slow.get(o.accelerator, o.relative_speed), o.relative_speed)
        speeds = tuple(sorted(slow.items())) if any(s != 1.0 for s in slow.values()) else ()
        facts[j.id] = JobFacts(j.kind, j.checkpoint_minutes, j.duration_hours, tuple(o.count for o in mine), j,
                               frozenset(o.accelerator for o in mine), speeds, pools)
    return facts


@dataclass(frozen=True)
class Copy:
    """One JobSet of a job on one cluster, with its Workload's phase."""

    job: str
    cluster: str
    pool: str | None
    phase: Phase
    created_at: datetime | None
    running_since: datetime | None
    reachable: bool
    units: tuple[int, ...] | None = None     # the units it was started on (annotation fleet.dev/units)
    deleting: bool = False                   # being deleted (a move's old copy, waiting for its pods to go)
    namespace: str = ""                      # the JobSet observed: namespace, name and uid (what a stop deletes)
    name: str = ""
    uid: str | None = None
    kind: str = "JobSet"                     # JobSet, or a Ray job's RayJob / RayService (observe/ray.py)
    spec_digest: str | None = None           # the spec it runs or ran (annotation fleet.dev/spec-digest)

    def origin(self) -> dict[str, str | None]:
        """The `Action` fields of a stop or move of this copy: where it runs and which object it is."""
        return {"from_cluster": self.cluster, "from_pool": self.pool, "from_namespace": self.namespace,
                "from_name": self.name, "from_uid": self.uid, "from_kind": self.kind}


@dataclass(frozen=True)
class Progress:
    """Moves out of one cluster: done this cycle, still to do, and when they will be done at this pace."""

    cluster: str
    moved: int
    remaining: int
    eta_cycles: int
    eta_minutes: float


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...]
    memory: LoopMemory
    notes: tuple[str, ...] = ()
    progress: tuple[Progress, ...] = ()
    lost_clusters: tuple[str, ...] = field(default=())
    deferred: tuple[str, ...] = field(default=())   # jobs left as they are until a victim's checkpoint (ckptwait.py)
    held: tuple[str, ...] = field(default=())       # placed, not started: finished or running unseen (finished.py)
