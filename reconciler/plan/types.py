"""The plan: what `fleet plan --format json` prints (DESIGN.md section 4, the contract). Frozen values.

Every list is sorted (placements by job id, then cluster and pool: a job whose replicas spread over
failure domains has one placement per pool, plan/spread.py; pending by job id, preemptions by job then
preemptor, pools and quotas by cluster then pool/team/accelerator) so equal inputs give byte-identical JSON.

Money, and how the written numbers add up: a unit price is whole cents (`pricing.unit_price` rounds it once,
and the planner uses that very number), so a pool's cost (unit price x target), the total and the cluster
sums are whole cents too, and the JSON states them exactly: `unit_hourly_usd x target == hourly_usd` for
every pool, the pools and `by_cluster` each sum to `cost.hourly_usd`, and `cost.monthly_usd` is the written
`cost.hourly_usd` x 730 (DESIGN.md section 4). A job's share of a unit (unit price x accelerators taken /
unit accelerators) need not be whole cents: placements, `by_team` and `idle_hourly_usd` are computed from
the exact shares (budgets are checked on them) and rounded to cents only when written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..jsontext import dumps_indented, indented_chunks

HOURS_PER_MONTH = 730.0
EPS_USD = 1e-6   # hourly costs closer than a micro-dollar are equal (comparisons of plans and of moves)


NANO = 1e9


def nano(usd: float) -> int:
    """Dollars as whole nano-dollars, for running totals that must come back exactly to where they were."""
    return round(usd * NANO)


def micro_usd(x: float) -> float:
    """Dollars rounded to micro-dollars, for comparing computed costs (float noise below that is not a
    difference); `money` is for output."""
    return round(x, 6)


def money(x: float) -> float:
    """Dollars rounded to cents for output (never while computing); +0.0 turns -0.0 into 0.0."""
    return round(x + 0.0, 2)


def monthly_money(hourly_usd: float) -> float:
    """The monthly figure written beside an hourly one: the written (cent) hourly x 730, so a reader who
    multiplies the two printed numbers gets the printed monthly one exactly."""
    return money(money(hourly_usd) * HOURS_PER_MONTH)



RESIZE_RESTART = "a restart at the new size from the last checkpoint (JobSet has no in-place resize in Kueue)"
WAS_RUNNING = "was running, but "
"""How a pending job's reason begins where the plan could not keep it where it ran (plan/sticky.py's `forced`)."""


def _by_file(why: str) -> bool:
    """Whether a reason plan/sticky.py gives for not keeping a running job where it runs is one its file can cause
    (another shape, an option that no longer runs on its pool, a data region its pool is outside of); a cluster
    down or lost, a pool gone or shrunk, a failed unit or units held by other work are not: a job whose file also
    changed some other field is not stopped for them (the loop keeps it, as any running job left pending)."""
    return why.startswith(("the job's shape changed", "its option ")) or "outside the job's data_region" in why


def changed_away(job: str, ran: str | None, now: str | None, reasons: tuple[str, ...]) -> str | None:
    """Why a running copy of `job` stops although nothing preempts it (None: it does not): it runs an earlier spec
    (digest `ran`) of its file (digest `now`), and the plan, which places the job nowhere, could not keep it where it
    runs (`reasons` has the plan's "was running, but ...", for a reason its file can cause: `_by_file`): its file
    changed so that it may no longer run there (a data region, an option, a shape) and nowhere has room for it.
    The reconcile loop stops it and `fleet apply` deletes it, as a JobSet whose spec changed is re-created and
    queued; the PR comment says it stops."""
    why = next((r for r in reasons if r.startswith(WAS_RUNNING)), None)
    if why is None or ran is None or now is None or ran == now or not _by_file(why.removeprefix(WAS_RUNNING)):
        return None
    return (f"jobs/{job}.yaml changed (spec digest {ran}, now {now}) and the plan cannot run it where it runs: "
            f"{why.removeprefix(WAS_RUNNING)}; it waits as its file is now")
"""What every `resize` that changes a running elastic job's size ends with (plan/workloads.py), and what the
reconcile loop reads as "restart it at its new size" where it cannot count the units it runs on."""


@dataclass(frozen=True, slots=True)
class Placement:
    job: str
    cluster: str
    pool: str
    option: int
    units: tuple[int, ...]
    accelerators_per_unit: int
    status: str                     # new | kept | moved
    hourly_usd: float
    reason: str = ""                # why a job moved (only for status moved)
    outside_data_region: bool = False   # runs outside its job's data_region (JSON key only when true)
    not_spread: str = ""            # why every replica of a spread job is in one failure domain (plan/spread.py)
    resize: str = ""                # an elastic job's size and why it changed (plan/workloads.py; key only when set)
    group: str = ""                 # the job's group (plan/workloads.py; key only when set)

    @property
    def pool_key(self) -> str:
        return f"{self.cluster}/{self.pool}"


@dataclass(frozen=True, slots=True)
class Pending:
    job: str
    reasons: tuple[str, ...]
    group: str = ""                 # the job's group (plan/workloads.py; JSON key only when set)
    # issue 22 item 3 (plan/reserve.py): hours from the plan's moment until it is expected to start (None: cannot
    # tell), and the units held for it (cluster, pool, units; JSON key `reservation` only when it holds some)
    expected_start: float | None = None
    reservation: tuple[str, str, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """Units held for the first blocked job of a class from `start_hours` (plan/reserve.py) until `end_hours`
    (None: the job has no duration_hours)."""

    job: str
    cluster: str
    pool: str
    units: tuple[int, ...]
    start_hours: float
    end_hours: float | None
    priority: int
    team: str = ""                  # a quota hold (no units): the team's `accelerator` quota is held for the job:
    accelerator: str = ""           # the team's usage of it then may be at most `quota_limit` (plan/reserve.py)
    quota_limit: int | None = None
    cohort: str = ""                # ... and its cohort's lending of it: other teams of the lending domain may not
                                    # start borrowing it for work of its class or lower that would still run then

    @property
    def pool_key(self) -> str:
        return f"{self.cluster}/{self.pool}"


@dataclass(frozen=True, slots=True)
class Preemption:
    job: str
    by: str
    reason: str
    after_minutes: float | None = None   # stopped at its next checkpoint, this many minutes on (JSON key when set)


@dataclass(frozen=True, slots=True)
class PoolPlan:
    cluster: str
    pool: str
    min: int
    max: int
    target: int
    used: int
    unit_accelerators: int
    unit_hourly_usd: float
    hourly_usd: float
    provisioning: str = "fixed"     # queued: its target is requested through a ProvisioningRequest (issue 26)


@dataclass(frozen=True, slots=True)
class QuotaPlan:
    cluster: str
    team: str
    accelerator: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    spot: int = 0      # the cluster's part of the team's `spot:` quota, for its spot-only work (JSON: only if > 0)


@dataclass(frozen=True, slots=True)
class Cost:
    hourly_usd: float
    monthly_usd: float
    idle_hourly_usd: float
    by_team: dict[str, float] = field(default_factory=dict)
    by_cluster: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LostWork:
    job: str
    minutes: float | None           # since the last checkpoint (checkpoint.work_at_risk; None: unknown)
    accelerator_hours: float | None


@dataclass(frozen=True, slots=True)
class LiveSummary:
    """What the plan's Markdown/text says about the live state (not in the plan JSON: its keys are fixed)."""

    finished: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    lost_clusters: tuple[str, ...] = ()
    lost_work: tuple[LostWork, ...] = ()

    def lines(self) -> list[str]:
        out = []
        if self.finished:
            out.append(f"finished: {len(self.finished)} ({', '.join(self.finished)}): capacity released")
        if self.failed:
            out.append(f"failed: {len(self.failed)} ({', '.join(self.failed)}): not run again until the file changes")
        if self.lost_clusters:
            out.append(f"lost clusters: {', '.join(self.lost_clusters)}")
        if self.lost_work:
            hours = sum(w.accelerator_hours or 0.0 for w in self.lost_work)
            unknown = sum(w.minutes is None for w in self.lost_work)
            jobs = ", ".join(f"{w.job} ({w.minutes:g} min)" if w.minutes is not None else
                             f"{w.job} (unknown: no checkpoint_minutes, running time not observed)"
                             for w in self.lost_work)
            more = f" + {unknown} job(s) unknown" if unknown else ""
            out.append(f"work lost since the last checkpoint: {hours:.1f} accelerator-hours{more} ({jobs})")
        return out


@dataclass(frozen=True, slots=True)
class JobCounts:
    """The one definition of "jobs" that every command's summary line uses (`fleet plan`, `fleet cost`, the
    reconcile cycle's header, `cost --history`, the plan metrics): a job is a job file; a spread service whose
    replicas run in several pools is one job with several placements. `preempted` counts distinct jobs too."""

    placed: int
    placements: int
    pending: int
    preempted: int

    def line(self) -> str:
        """`47 jobs placed (55 placements), 3 pending, 0 preempted` (the placements only when they differ)."""
        extra = f" ({self.placements} placements)" if self.placements != self.placed else ""
        return (f"{self.placed} job{'' if self.placed == 1 else 's'} placed{extra}, {self.pending} pending, "
                f"{self.preempted} preempted")


@dataclass(frozen=True, slots=True)
class Review:
    """What a saved plan was made for (the plan JSON's `review` object): the base commit it was planned
    against, the head commit it plans (a pull request's head, not the merge commit CI checks out), and the
    pull request's number; each None when unknown (no git, no `--base` or one that does not validate, since
    then no base plan was used, no `--pr`). `fleet apply --reviewed`
    refuses a plan whose head is not the commit it applies."""

    base: str | None = None
    head: str | None = None
    pr: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base, "head": self.head, "pr": self.pr}


@dataclass(frozen=True, slots=True)
class Plan:
    placements: tuple[Placement, ...]
    pending: tuple[Pending, ...]
    preemptions: tuple[Preemption, ...]
    pools: tuple[PoolPlan, ...]
    quotas: tuple[QuotaPlan, ...]
    cost: Cost
    live: LiveSummary | None = None   # plan/live.py LiveSummary with `--observed` (Markdown only: not a JSON key)

    def placement_of(self, job: str) -> Placement | None:
        """The job's first placement (a spread job has one per pool its replicas run on: `placements_of`)."""
        return next((p for p in self.placements if p.job == job), None)

    def placements_of(self, job: str) -> tuple[Placement, ...]:
        """Every placement of the job: one per pool its replicas run on, by cluster then pool."""
        return tuple(p for p in self.placements if p.job == job)

    def counts(self) -> JobCounts:
        """How many jobs are placed, pending and preempted, and how many placements (`JobCounts`)."""
        return JobCounts(len({p.job for p in self.placements}), len(self.placements),
                         len({p.job for p in self.pending}), len({p.job for p in self.preemptions}))

    def to_dict(self, review: Review | None = None) -> dict[str, Any]:
        """The JSON document (DESIGN.md section 4); with `review`, also its `review` object (last)."""
        def placement(p: Placement) -> dict[str, Any]:
            d: dict[str, Any] = {"job": p.job, "cluster": p.cluster, "pool": p.pool, "option": p.option,
                                 "units": list(p.units), "accelerators_per_unit": p.accelerators_per_unit,
                                 "status": p.status, "hourly_usd": money(p.hourly_usd)}
            if p.reason:
                d["reason"] = p.reason
            if p.outside_data_region:
                d["outside_data_region"] = True
            if p.not_spread:
                d["not_spread"] = p.not_spread
            if p.resize:
                d["resize"] = p.resize
            if p.group:
                d["group"] = p.group
            return d

        def pool(p: PoolPlan) -> dict[str, Any]:
            d: dict[str, Any] = {"cluster": p.cluster, "pool": p.pool, "min": p.min, "max": p.max, "target": p.target,
                                 "used": p.used, "unit_accelerators": p.unit_accelerators,
                                 "unit_hourly_usd": money(p.unit_hourly_usd), "hourly_usd": money(p.hourly_usd)}
            if p.provisioning == "queued":      # its target is asked for, not set: capacity "requested"
                d["provisioning"] = "queued"
                d["requested"] = p.target
            return d

        def pending(p: Pending) -> dict[str, Any]:
            d: dict[str, Any] = {"job": p.job, "reasons": list(p.reasons)}
            if p.group:
                d["group"] = p.group
            d["expected_start"] = p.expected_start
            if p.reservation is not None:
                d["reservation"] = {"cluster": p.reservation[0], "pool": p.reservation[1],
                                    "units": list(p.reservation[2])}
            return d

        doc: dict[str, Any] = {
            "version": 1,
            "placements": [placement(p) for p in self.placements],
            "pending": [pending(p) for p in self.pending],
            "preemptions": [{"job": p.job, "by": p.by, "reason": p.reason,
                             **({"after_minutes": p.after_minutes} if p.after_minutes is not None else {})}
                            for p in self.preemptions],
            "pools": [pool(p) for p in self.pools],
            "quotas": [{"cluster": q.cluster, "team": q.team, "accelerator": q.accelerator, "nominal": q.nominal,
                        "borrowing_limit": q.borrowing_limit, "lending_limit": q.lending_limit,
                        **({"spot": q.spot} if q.spot else {})}
                       for q in self.quotas],
            "cost": {"hourly_usd": money(self.cost.hourly_usd), "monthly_usd": monthly_money(self.cost.hourly_usd),
                     "idle_hourly_usd": money(self.cost.idle_hourly_usd),
                     "by_team": {k: money(v) for k, v in sorted(self.cost.by_team.items())},
                     "by_cluster": {k: money(v) for k, v in sorted(self.cost.by_cluster.items())}},
        }
        if review is not None:
            doc["review"] = review.to_dict()
        return doc

    def to_json(self, review: Review | None = None) -> str:
        return dumps_indented(self.to_dict(review), "\n")   # = json.dumps(..., indent=2) + "\n", faster

    def json_chunks(self, review: Review | None = None) -> Iterator[str]:
        """`to_json(review)` in consecutive chunks (`jsontext.indented_chunks`), to print."""
        return indented_chunks(self.to_dict(review), "\n")


def review_from_dict(doc: dict[str, Any]) -> Review:
    """The `review` object of a plan document (an empty Review when it has none: a plan from before it
    existed names no commit); TypeError or ValueError when it is mistyped."""
    r = doc.get("review")
    if r is None:
        return Review()
    if not isinstance(r, dict):
        raise TypeError("`review` must be an object {base, head, pr}")
    for key in ("base", "head"):
        if r.get(key) is not None and not isinstance(r[key], str):
            raise TypeError(f"`review.{key}` must be a commit sha (a string) or null")
    pr = r.get("pr")
    if pr is not None and (isinstance(pr, bool) or not isinstance(pr, int)):
        raise TypeError("`review.pr` must be a pull request number or null")
    return Review(r.get("base"), r.get("head"), pr)


def plan_from_dict(doc: dict[str, Any]) -> Plan:
    """Read back a plan written by `to_json` (for `--base` from a saved plan, and round-trip tests)."""
    return Plan(
        placements=tuple(Placement(p["job"], p["cluster"], p["pool"], p["option"], tuple(p["units"]),
                                   p["accelerators_per_unit"], p["status"], p["hourly_usd"], p.get("reason", ""),
                                   bool(p.get("outside_data_region", False)), p.get("not_spread", ""),
                                   p.get("resize", ""), p.get("group", ""))
                         for p in doc["placements"]),
        pending=tuple(Pending(p["job"], tuple(p["reasons"]), p.get("group", ""), p.get("expected_start"),
                              _reservation(p.get("reservation"))) for p in doc["pending"]),
        preemptions=tuple(Preemption(p["job"], p["by"], p["reason"], p.get("after_minutes"))
                          for p in doc["preemptions"]),
        pools=tuple(PoolPlan(**{k: v for k, v in p.items() if k != "requested"}) for p in doc["pools"]),
        quotas=tuple(QuotaPlan(**q) for q in doc["quotas"]),
        cost=Cost(**doc["cost"]),
    )


def _reservation(r: dict[str, Any] | None) -> tuple[str, str, tuple[int, ...]] | None:
    return None if r is None else (r["cluster"], r["pool"], tuple(r["units"]))
