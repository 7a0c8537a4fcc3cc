"""Stage 6, diff: what a change does to the fleet, base plan against head plan. Pure.

The unit of review is a job: each job present on either side gets at most one change, decided in this order
(so every job lands in exactly one bucket):
- `stop`: its file is gone from the head and the base placed it: running work (impact.py: the base plan's
  placements) that the change stops (`fleet apply` deletes its JobSet), a disruption, never read as a job
  that finished. With `--observed` the base is planned from what runs, so it runs (a job whose run ended is
  planned on neither side and is in neither list); planned from git alone, the reason says it may have
  finished already (a `fleet gc` pull request removes such files);
- `withdraw`: its file is gone from the head and the base left it waiting: the change withdraws it (nothing
  of it runs in the base, so nothing is stopped; it read `finish` before, untrue of a job that never ran);
  planned from git alone, the reason says the base plan's waiting is all that is known; one that runs and the
  base plan preempts (from what runs) is withdrawn too, the reason saying it runs and stops either way;
- `start`: placed in the head, not placed in the base (new, or waiting before);
- `move`: placed on both sides, not in the same place (`plan.units.stays`: another cluster or pool, another
  option or shape, another TPU slice; a GPU job on other, renumbered nodes of its pool has not moved);
- `preempt`: placed in the base, pending in the head because another job took its place (a higher class, or a
  lender reclaiming its nominal quota);
- `wait`: pending in the head and not already pending in the base (new and waiting, or stopped waiting
  for quota, budget or capacity). Jobs pending on both sides are counted, not listed.
Pools change when their target or their hourly cost changes (price edits show here too); quotas change per
team (policies/teams.yaml) and per cluster (the ClusterQueue nominal quotas the plan derives). Cost deltas
are given per team (with idle capacity as its own line), per cluster and per accelerator, largest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from .cost.model import HOURS_PER_MONTH, Priced
from .plan.types import Placement
from .plan.units import stays, units_gone

CHANGE_ORDER = ("start", "move", "preempt", "stop", "wait", "withdraw")
IDLE = "(idle capacity)"


@dataclass(frozen=True, slots=True)
class JobChange:
    job: str
    change: str                     # one of CHANGE_ORDER
    before: str                     # cluster/pool, "pending" or "" (absent)
    after: str
    hourly_delta_usd: float
    detail: str


@dataclass(frozen=True, slots=True)
class PoolChange:
    cluster: str
    pool: str
    accelerator: str
    target_before: int | None       # None: the pool does not exist on that side
    target_after: int | None
    hourly_before_usd: float
    hourly_after_usd: float

    @property
    def hourly_delta_usd(self) -> float:
        return self.hourly_after_usd - self.hourly_before_usd


Limits = tuple[int, int | None, int | None, int]   # nominal, borrowing_limit, lending_limit (None: unlimited/all),
                                                 # and the `spot:` quota for spot-only work (0: none)


@dataclass(frozen=True, slots=True)
class QuotaChange:
    team: str
    accelerator: str
    cluster: str                    # "" for the team's quota in policies/teams.yaml
    before: Limits | None           # None: no quota on that side
    after: Limits | None


@dataclass(frozen=True, slots=True)
class Delta:
    name: str
    before_hourly_usd: float
    after_hourly_usd: float

    @property
    def hourly_usd(self) -> float:
        return self.after_hourly_usd - self.before_hourly_usd

    @property
    def monthly_usd(self) -> float:
        return self.hourly_usd * HOURS_PER_MONTH


@dataclass(frozen=True)
class PlanDiff:
    jobs: tuple[JobChange, ...]
    still_pending: int
    pools: tuple[PoolChange, ...]
    quotas: tuple[QuotaChange, ...]
    total: Delta
    by_team: tuple[Delta, ...]
    by_cluster: tuple[Delta, ...]
    by_accelerator: tuple[Delta, ...]

    def count(self, change: str) -> int:
        return sum(1 for j in self.jobs if j.change == change)

    def headline(self) -> str:
        """"Monthly cost increases by $12,400 (+3.1%)": dollars rounded to whole, percent of the base."""
        before, delta = self.total.before_hourly_usd * HOURS_PER_MONTH, self.total.monthly_usd
        if round(delta) == 0:
            return f"Monthly cost is unchanged (${before:,.0f})"
        pct = f"{delta / before:+.1%}" if before > 0 else "from $0"
        return f"Monthly cost {'increases' if delta > 0 else 'decreases'} by ${abs(delta):,.0f} ({pct})"


def from_git_alone(side: Priced) -> bool:
    """Whether a side was planned from git alone (no `--observed`): what runs is not known, only planned. The one
    place the diff's reasons and the review's hedges (impact.py `may_have_finished`) decide it."""
    return side.plan.live is None


def diff_plans(base: Priced, head: Priced) -> PlanDiff:
    """Everything that differs between the base and the head, each list in a stable, documented order."""
    return PlanDiff(_jobs(base, head), _still_pending(base, head), _pools(base, head), _quotas(base, head),
                    Delta("total", base.cost.hourly_usd, head.cost.hourly_usd),
                    _deltas({**base.cost.by_team, IDLE: base.cost.idle_hourly_usd},
                            {**head.cost.by_team, IDLE: head.cost.idle_hourly_usd}),
                    _deltas(base.cost.by_cluster, head.cost.by_cluster),
                    _deltas(base.cost.by_accelerator, head.cost.by_accelerator))


def _where(side: Priced) -> dict[str, tuple[str, float]]:
    """job -> (cluster/pool, or "pending"; attributed $/h) for every job the side knows."""
    out: dict[str, tuple[str, float]] = {p.job: ("pending", 0.0) for p in side.plan.pending}
    for p in side.plan.placements:   # a spread job: every pool it runs on, in the plan's order
        where, usd = out.get(p.job, ("pending", 0.0))
        out[p.job] = (p.pool_key, p.hourly_usd) if where == "pending" else \
            (f"{where}, {p.pool_key}", usd + p.hourly_usd)
    return out


def _by_job(side: Priced) -> dict[str, dict[str, Placement]]:
    """job -> pool key -> its placement there (a spread job has one per pool)."""
    out: dict[str, dict[str, Placement]] = {}
    for p in side.plan.placements:
        out.setdefault(p.job, {})[p.pool_key] = p
    return out


def _stays(before: Mapping[str, Placement], after: Mapping[str, Placement], base: Priced, head: Priced) -> bool:
    """Whether the head places a job (`after`, by pool) where the base did (`before`): on the same pools, each
    the same place by `plan.units.stays` (a GPU pool's nodes are interchangeable, so other unit numbers there
    are no move; a TPU slice is a place). A `kept` placement's option index is the head's numbering of the gang
    it keeps (plan/sticky.py `_option_kept`: an option added before it shifts it), not another option."""
    def same(b: Placement, a: Placement, key: str) -> bool:
        a = replace(a, option=b.option) if a.status == "kept" else a
        return stays(b, a, key in base.interchangeable and key in head.interchangeable)

    return before.keys() == after.keys() and all(same(b, after[key], key) for key, b in before.items())


def _head_placed(head: Priced) -> dict[str, Placement]:
    """job -> its head placement (a spread job: its placement that moved, if one did)."""
    placed: dict[str, Placement] = {}
    for p in head.plan.placements:
        if p.job not in placed or p.status == "moved":
            placed[p.job] = p
    return placed


def _moved(job: str, hp: Placement | None, places_before: Mapping[str, Mapping[str, Placement]],
           places_after: Mapping[str, Mapping[str, Placement]], base: Priced, head: Priced) -> bool:
    """Whether a job placed on both sides moved: the planner says so, or it is not where it was (`_stays`)."""
    return hp is not None and (hp.status == "moved"
                               or not _stays(places_before.get(job, {}), places_after[job], base, head))


def _within(b: Placement, a: Placement, key: str, base: Priced, head: Priced, *, grew: bool) -> bool:
    """Whether the base's placement `b` and the head's `a` of a job on one pool are one group, the head's larger
    (`grew`) or smaller: the same gang, and as many units at least (at most) where the pool's nodes are
    interchangeable, else the same units and more (fewer): a TPU slice is a place. A `kept` head placement's
    option index is the head's numbering of the gang it keeps (as in `_stays`)."""
    a = replace(a, option=b.option) if a.status == "kept" else a
    if (b.cluster, b.pool, b.option, b.accelerators_per_unit) != (a.cluster, a.pool, a.option, a.accelerators_per_unit):
        return False
    small, large = (b, a) if grew else (a, b)
    return not units_gone(small.units, large.units, key in base.interchangeable and key in head.interchangeable)


def _grew(before: Mapping[str, Placement], after: Mapping[str, Placement], base: Priced, head: Priced) -> bool:
    """Whether the head only adds to a spread service (its `replicas` raised): every group of the base still
    stands where it was, within the head's group there, and the head places more. Before 2026-12-07 the diff
    called that a move, and the PR comment a disruption, though nothing that runs stops."""
    return before.keys() <= after.keys() \
        and all(_within(b, after[k], k, base, head, grew=True) for k, b in before.items()) \
        and sum(len(p.units) for p in after.values()) > sum(len(p.units) for p in before.values())


def _shrank(before: Mapping[str, Placement], after: Mapping[str, Placement], base: Priced, head: Priced) -> bool:
    """Whether the head only takes replicas from a spread service (its `replicas` lowered): each of its groups is
    part of the base's group there, and it places fewer. A stop of those replicas, not a move of the job."""
    return after.keys() <= before.keys() \
        and all(_within(before[k], a, k, base, head, grew=False) for k, a in after.items()) \
        and sum(len(p.units) for p in after.values()) < sum(len(p.units) for p in before.values())


def _service(job: str, head: Priced) -> bool:
    """Whether the job is a service (`kind: inference`), which the loop scales by replica count: only a service's
    groups grow or shrink in place (an elastic gang that resizes restarts whole from its checkpoint)."""
    meta = head.jobs_meta.get(job)
    return meta is not None and meta.kind == "inference"


def started_or_moved(base: Priced, head: Priced) -> frozenset[str]:
    """The jobs the diff lists as `start` or `move`: what the change itself places (budgets blame these)."""
    placed, before, after = _head_placed(head), _by_job(base), _by_job(head)
    return frozenset(job for job in after if job not in before
                     or (_service(job, head) and _grew(before[job], after[job], base, head))
                     or _moved(job, placed[job], before, after, base, head))


def _jobs(base: Priced, head: Priced) -> tuple[JobChange, ...]:
    pending = {p.job: p for p in head.plan.pending}
    preempted = {p.job: p for p in head.plan.preemptions}
    placed = _head_placed(head)
    before, after = _where(base), _where(head)
    places_before, places_after = _by_job(base), _by_job(head)
    alone = from_git_alone(base)
    removed_running = (" while it runs: the change stops it" if not alone else
                       ": the change stops it unless it already finished (planned from git alone: `--observed` "
                       "tells)")
    removed_waiting = (" while it waited: the change withdraws it (it does not run)" if not alone else
                       " while the base plan left it waiting: the change withdraws it (planned from git alone: "
                       "`--observed` tells whether it runs)")
    removed_preempted = " while it runs, which the base plan preempts: the change withdraws it (it stops either way)"
    preempted_before = {p.job for p in base.plan.preemptions}
    out = []
    for job in sorted(before.keys() | after.keys()):
        b, b_usd = before.get(job, ("", 0.0))
        a, a_usd = after.get(job, ("", 0.0))
        placed_before, placed_after = b not in ("", "pending"), a not in ("", "pending")
        hp = placed.get(job)
        if a == "" and placed_before:
            change, detail = "stop", f"its file jobs/{job}.yaml was removed{removed_running}"
        elif a == "":
            change, detail = "withdraw", f"its file jobs/{job}.yaml was removed" + (
                removed_preempted if job in preempted_before else removed_waiting)
        elif placed_after and not placed_before:
            change, detail = "start", "new job" if b == "" else "was waiting"
        elif placed_before and hp is not None and hp.status != "moved" and _service(job, head) \
                and _grew(places_before[job], places_after[job], base, head):
            change, detail = "start", "replicas added; those placed before stay where they are"
        elif placed_before and hp is not None and hp.status != "moved" and _service(job, head) \
                and _shrank(places_before[job], places_after[job], base, head):
            change, detail = "stop", "replicas removed; those left stay where they are"
        elif hp is not None and _moved(job, hp, places_before, places_after, base, head):
            change, detail = "move", hp.reason or "re-placed"
        elif placed_after:
            continue                                        # kept, or placed the same way on both sides
        elif job in preempted and placed_before:
            change, detail = "preempt", f"by {preempted[job].by}: {preempted[job].reason}"
        elif b != "pending":
            change, detail = "wait", "; ".join(pending[job].reasons)
        else:
            continue                                        # waiting on both sides
        out.append(JobChange(job, change, b, a, a_usd - b_usd, detail))
    return tuple(sorted(out, key=lambda c: (CHANGE_ORDER.index(c.change), c.job)))


def _still_pending(base: Priced, head: Priced) -> int:
    return len({p.job for p in base.plan.pending} & {p.job for p in head.plan.pending})


def _pools(base: Priced, head: Priced) -> tuple[PoolChange, ...]:
    before = {p.key: p for p in base.cost.pools}
    after = {p.key: p for p in head.cost.pools}
    out = []
    for key in sorted(before.keys() | after.keys()):
        b, a = before.get(key), after.get(key)
        t_b, t_a = (b.target if b else None), (a.target if a else None)
        h_b, h_a = (b.hourly_usd if b else 0.0), (a.hourly_usd if a else 0.0)
        if t_b == t_a and abs(h_a - h_b) < 0.005:
            continue
        some = a or b
        assert some is not None
        out.append(PoolChange(some.cluster, some.pool, some.accelerator, t_b, t_a, h_b, h_a))
    return tuple(out)


def _quotas(base: Priced, head: Priced) -> tuple[QuotaChange, ...]:
    out = []
    for key in sorted(base.team_quotas.keys() | head.team_quotas.keys()):
        b, a = base.team_quotas.get(key), head.team_quotas.get(key)
        if b != a:
            out.append(QuotaChange(key[0], key[1], "", b, a))
    per_cluster: list[Mapping[tuple[str, str, str], Limits]] = [
        {(q.team, q.accelerator, q.cluster): (q.nominal, q.borrowing_limit, q.lending_limit, q.spot)
         for q in side.plan.quotas}
        for side in (base, head)]
    for key3 in sorted(per_cluster[0].keys() | per_cluster[1].keys()):
        b, a = per_cluster[0].get(key3), per_cluster[1].get(key3)
        if b != a:
            out.append(QuotaChange(key3[0], key3[1], key3[2], b, a))
    return tuple(out)


def _deltas(before: Mapping[str, float], after: Mapping[str, float]) -> tuple[Delta, ...]:
    """Every name on either side, the largest absolute change first, ties by name."""
    rows = [Delta(k, before.get(k, 0.0), after.get(k, 0.0)) for k in before.keys() | after.keys()]
    return tuple(sorted(rows, key=lambda d: (-round(abs(d.hourly_usd), 6), d.name)))
