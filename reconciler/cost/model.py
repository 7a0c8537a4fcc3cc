"""The cost model: what a plan costs per hour, per month and per job, and who it is attributed to. Pure.

Why a model beside the plan's `cost` block: the block is the contract summary (totals, by team, by cluster);
reviewers also need each pool's price and where it came from, idle capacity per pool, cost per accelerator
and per job over its `duration_hours`. Both attribute jobs the same way and agree on every pool: the plan
block prices the target (its property tests pin `pool hourly = target x unit price`), this model charges
committed capacity (reserved, owned) in full, because it is billed whether used or not, and validate
rejects a reserved or owned pool unless `min == max`, so a committed pool's target is always its whole size
(tests/test_cost.py checks the agreement on the example).

Rules:
- A pool's unit price is `pricing.unit_price` (pool `hourly_usd` for owned hardware at its amortized price,
  `fleet/prices.yaml` overrides and negotiated discounts, the catalog's on-demand, spot or 1-year committed
  price by the pool's `capacity`); the validator computed it once (`Validated.unit_prices`).
- A pool pays for `paid_units`: the plan's target, but never less than what is committed. Reserved
  (committed-use) and owned capacity is paid for whether used or not; both are fixed-size (`min == max`,
  validate's rule), so such a pool pays for its whole size, which is also its target.
- A job is attributed what it occupies: unit price x its share of each unit it uses
  (`accelerators_per_unit / unit_accelerators`) x units; that is the plan's `Placement.hourly_usd`.
- Idle capacity is what pools pay for beyond what jobs occupy (pool minimums, committed units, the unused
  accelerators of shared nodes). It is its own line, not spread over teams, so a team's cost is what its own
  jobs occupy and the total is teams + idle.
- Monthly = hourly x 730 (`HOURS_PER_MONTH`); a job's run cost = hourly x `duration_hours` when known.
- Money follows the plan's rule (`plan/types.py`): unit prices are whole cents, so pool costs and every sum
  of them (total, by cluster, accelerator and capacity) are whole cents, and the written monthly figure of
  each is the written hourly x 730 exactly, the same numbers as the plan JSON. Job shares, team sums and idle
  are exact and rounded once when written; their monthly figure is the exact hourly x 730 rounded, so the
  teams and idle add up to the total month (a budget is a monthly figure, compared on exact values).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..plan.types import HOURS_PER_MONTH, money, monthly_money
from ..plan.units import interchangeable
from ..resolve import run_hours

__all__ = ["HOURS_PER_MONTH", "CostBreakdown", "JobCost", "JobMeta", "PoolCost", "Priced", "money", "monthly_money",
           "paid_units", "price"]

if TYPE_CHECKING:
    from ..models import Job
    from ..plan.types import Plan
    from ..resolve import ResolvedPool
    from ..validate import Validated

COMMITTED = frozenset({"reserved", "owned"})


def paid_units(capacity: str, target: int, max_units: int) -> int:
    """Units a pool pays for: committed capacity (reserved, owned) in full, otherwise the planned target."""
    return max(target, max_units) if capacity in COMMITTED else target


@dataclass(frozen=True, slots=True)
class PoolCost:
    cluster: str
    pool: str
    accelerator: str
    capacity: str
    target: int
    paid_units: int
    unit_accelerators: int
    unit_hourly_usd: float
    price_source: str
    uncertain: bool
    used_accelerators: int          # accelerators that placed jobs occupy
    used_hourly_usd: float          # attributed to those jobs
    queued: bool = False            # `provisioning: queued`: units requested (flex-start), priced at its rate

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.pool}"

    @property
    def hourly_usd(self) -> float:
        return self.paid_units * self.unit_hourly_usd

    @property
    def idle_hourly_usd(self) -> float:
        return max(0.0, self.hourly_usd - self.used_hourly_usd)

    @property
    def paid_accelerators(self) -> int:
        return self.paid_units * self.unit_accelerators

    @property
    def utilization(self) -> float:
        """Occupied accelerators / paid-for accelerators (0 for a pool scaled to zero)."""
        return self.used_accelerators / self.paid_accelerators if self.paid_accelerators else 0.0


@dataclass(frozen=True, slots=True)
class JobCost:
    job: str
    team: str
    cluster: str
    pool: str
    accelerator: str
    accelerators: int
    hourly_usd: float
    duration_hours: float | None
    outside_data_region: bool = False     # the plan's flag: runs outside the job's data_region
    data_region: str | None = None
    relative_speed: float = 1.0           # of the option it runs: its run takes duration_hours / relative_speed

    @property
    def monthly_usd(self) -> float:
        return self.hourly_usd * HOURS_PER_MONTH

    @property
    def run_hours(self) -> float | None:
        """How long it runs on its option (`resolve.run_hours`), None when the job does not say."""
        return run_hours(self.duration_hours, self.relative_speed)

    @property
    def run_usd(self) -> float | None:
        """Cost of the whole run (hourly x `run_hours`), or None when the job does not say how long it runs."""
        hours = self.run_hours
        return None if hours is None else self.hourly_usd * hours


@dataclass(frozen=True)
class CostBreakdown:
    """The plan priced. Dicts are keyed by name and every view sums to `hourly_usd`: by team plus idle, by
    cluster, by accelerator, by capacity type."""

    pools: tuple[PoolCost, ...]
    jobs: tuple[JobCost, ...]
    by_team: Mapping[str, float]
    by_cluster: Mapping[str, float]
    by_accelerator: Mapping[str, float]
    by_capacity: Mapping[str, float]
    hourly_usd: float
    idle_hourly_usd: float

    @property
    def monthly_usd(self) -> float:
        return self.hourly_usd * HOURS_PER_MONTH

    def to_dict(self) -> dict[str, Any]:
        def per(d: Mapping[str, float]) -> dict[str, dict[str, float]]:
            return {k: {"hourly_usd": money(v), "monthly_usd": money(v * HOURS_PER_MONTH)}
                    for k, v in sorted(d.items())}

        return {
            "hourly_usd": money(self.hourly_usd), "monthly_usd": monthly_money(self.hourly_usd),
            "idle_hourly_usd": money(self.idle_hourly_usd),
            "idle_monthly_usd": money(self.idle_hourly_usd * HOURS_PER_MONTH),
            "by_team": per(self.by_team), "by_cluster": per(self.by_cluster),
            "by_accelerator": per(self.by_accelerator), "by_capacity": per(self.by_capacity),
            "pools": [{"cluster": p.cluster, "pool": p.pool, "accelerator": p.accelerator, "capacity": p.capacity,
                       "target": p.target, "paid_units": p.paid_units, "unit_accelerators": p.unit_accelerators,
                       "used_accelerators": p.used_accelerators, "unit_hourly_usd": money(p.unit_hourly_usd),
                       "hourly_usd": money(p.hourly_usd), "idle_hourly_usd": money(p.idle_hourly_usd),
                       "price_source": p.price_source, "uncertain": p.uncertain} for p in self.pools],
            "jobs": [{"job": j.job, "team": j.team, "cluster": j.cluster, "pool": j.pool,
                      "accelerator": j.accelerator, "accelerators": j.accelerators, "hourly_usd": money(j.hourly_usd),
                      "monthly_usd": money(j.monthly_usd), "duration_hours": j.duration_hours, "run_hours": j.run_hours,
                      "run_usd": None if j.run_usd is None else money(j.run_usd),
                      **({"outside_data_region": True} if j.outside_data_region else {})} for j in self.jobs],
        }


@dataclass(frozen=True, slots=True)
class JobMeta:
    """What the reports need to know of a job of `jobs/` beyond its cost: its priority class (resolved to
    the default when it names none), kind, checkpoint interval and data region."""

    priority: str
    priority_value: int
    kind: str
    checkpoint_minutes: float | None
    duration_hours: float | None
    data_region: str | None


@dataclass(frozen=True)
class Priced:
    """One side of a comparison: the plan, its cost, and the policy numbers the diff and budgets need."""

    plan: Plan
    cost: CostBreakdown
    team_quotas: Mapping[tuple[str, str], tuple[int, int | None, int | None, int]] = field(default_factory=dict)
    budgets_monthly_usd: Mapping[str, float] = field(default_factory=dict)
    jobs_meta: Mapping[str, JobMeta] = field(default_factory=dict)     # every job of jobs/, by id
    interchangeable: frozenset[str] = frozenset()   # pool keys whose units are nodes, not slices (plan/units.py)


def price(plan: Plan, v: Validated) -> Priced:
    """Price `plan` (made from `v`): every pool, every placed job, the views by team, cluster, accelerator."""
    pools: dict[str, ResolvedPool] = {p.key: p for p in v.pools}
    jobs = {j.id: j for j in v.loaded.jobs}
    teams = v.loaded.teams.teams if v.loaded.teams else ()
    used_acc: dict[str, int] = defaultdict(int)
    used_usd: dict[str, float] = defaultdict(float)
    job_costs = []
    for pl in plan.placements:                      # sorted by job id in the plan
        rp = pools[pl.pool_key]
        accelerators = pl.accelerators_per_unit * len(pl.units)
        used_acc[pl.pool_key] += accelerators
        used_usd[pl.pool_key] += pl.hourly_usd
        job = jobs.get(pl.job)
        job_costs.append(JobCost(pl.job, pl.job.split("/")[0], pl.cluster, pl.pool, rp.accelerator, accelerators,
                                 pl.hourly_usd, job.duration_hours if job else None, pl.outside_data_region,
                                 job.data_region if job else None,
                                 job.options[pl.option].relative_speed if job and pl.option < len(job.options)
                                 else 1.0))
    pool_costs = []
    for pp in plan.pools:                           # sorted by cluster, pool in the plan
        rp = pools[f"{pp.cluster}/{pp.pool}"]
        up = v.unit_prices[rp.key]
        pool_costs.append(PoolCost(pp.cluster, pp.pool, rp.accelerator, rp.capacity, pp.target,
                                   paid_units(rp.capacity, pp.target, rp.max), pp.unit_accelerators,
                                   pp.unit_hourly_usd, up.source, up.uncertain, used_acc[rp.key], used_usd[rp.key],
                                   rp.queued))
    by_team: dict[str, float] = {t.name: 0.0 for t in teams}
    for jc in job_costs:
        by_team[jc.team] = by_team.get(jc.team, 0.0) + jc.hourly_usd
    by_cluster: dict[str, float] = defaultdict(float)
    by_accelerator: dict[str, float] = defaultdict(float)
    by_capacity: dict[str, float] = defaultdict(float)
    for pc in pool_costs:
        by_cluster[pc.cluster] += pc.hourly_usd
        by_accelerator[pc.accelerator] += pc.hourly_usd
        by_capacity[pc.capacity] += pc.hourly_usd
    total = sum(pc.hourly_usd for pc in pool_costs)
    idle = sum(pc.idle_hourly_usd for pc in pool_costs)
    cost = CostBreakdown(tuple(pool_costs), tuple(job_costs), by_team, dict(by_cluster), dict(by_accelerator),
                         dict(by_capacity), total, idle)
    quotas = {(t.name, acc): (q.nominal, q.borrowing_limit, q.lending_limit, q.spot or 0)
              for t in teams for acc, q in t.quota.items()}
    budgets = {t.name: t.budget_monthly_usd for t in teams if t.budget_monthly_usd is not None}
    return Priced(plan, cost, quotas, budgets, _jobs_meta(v, jobs),
                  frozenset(key for key, rp in pools.items() if interchangeable(rp)))


def _jobs_meta(v: Validated, jobs: dict[str, Job]) -> dict[str, JobMeta]:
    """Each job's facts, by id; `jobs`: `v`'s jobs by id, in their order."""
    prio = v.loaded.priorities
    values = {c.name: c.value for c in prio.classes} if prio else {}
    default = prio.default if prio else ""
    out = {}
    for job_id, j in jobs.items():
        cls = j.priority or default
        out[job_id] = JobMeta(cls, values.get(cls, 0), j.kind, j.checkpoint_minutes, j.duration_hours, j.data_region)
    return out
