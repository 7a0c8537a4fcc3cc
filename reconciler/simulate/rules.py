"""The rules every policy of `fleet simulate` is measured against: the teams' quotas (with cohort borrowing)
and budgets, with the planner's own arithmetic. Pure.

- Quotas: `plan.quota.QuotaLedger`, the ledger `fleet plan` admits with (nominal, borrowing and lending
  limits, lending domains of the cohort tree), fed with what is placed (a job holds quota from the moment
  its units are reserved, as a Kueue Workload holds it from QuotaReserved). What is over quota at a moment,
  in accelerators: per team, what it borrows beyond its `borrowing_limit` (all of its usage beyond nominal
  when it is in no cohort); per lending domain, what its teams borrow within their limits beyond what its
  members lend now (the ledger's `borrowed_sum` over `lendable_sum`).
- Budgets: a team's placed jobs cost their exact share of their units' hourly price (the share
  `PlanState.attributed` charges: unit price x accelerators taken / accelerators of the unit, per unit);
  a team is over budget while that exceeds `budget_monthly_usd / HOURS_PER_MONTH` (the planner's check).

- Nominal quota as a guarantee: where policies/priorities.yaml states `reclaim_within_cohort: any`, what a
  team lends of its nominal quota comes back when its own work needs it (Kueue reclaims it by preempting the
  borrowers). `withheld`, in accelerators at a moment: per lending domain and accelerator, what its teams'
  waiting jobs want within their unused nominal quota (in the waiting list's order, each job on its first
  option that still fits), and of that, what the cohort borrows beyond what the domain would still lend once
  those teams took it back (the ledger's arithmetic, all the wanting teams at once; borrowing already over
  quota counts in `over_quota`, not here). Measured against the teams' fleet-wide quotas, the rule every
  policy is held to: it does not ask whether the job could run were the quota back (room, budget, a borrower
  that is not preemptible), the same for every policy; and `kueue` splits the quotas per cluster, so a job
  waiting in one cluster for quota a cohort-mate borrows in another counts as withheld though that
  cluster's own reclaim could not return it. A policy that never preempts keeps its borrowers' units to the
  end of their jobs; one that reclaims withholds mostly while its victims stop (`fleet`: until their
  checkpoint) or while it judges waiting cheaper.

- Priority within a team: where policies/priorities.yaml states `within_team: lower_priority` (or
  `lower_or_newer_equal_priority`, of which this measures the lower part), a team's waiting
  job preempts its own lower-class preemptible work when that gives it the quota it lacks (Kueue's
  `withinClusterQueue: LowerPriority`). `inverted`, in accelerators at a moment: of what each waiting job lacks
  of its team's quota (with borrowing) on an option, what the team's lower-class preemptible work on that
  accelerator holds, counted when that work holds all of it (preempting it alone would admit the job, by quota);
  higher classes first, each job on its first such option, the lowest classes' work taken first and not counted
  twice; an option counts only where preempting all of the team's lower-class work could start the job now,
  by room and budget (remedy.py: until 2026-12-06 it asked nothing of either, and counted waits no preemption
  could have ended). It is measured against the fleet-wide quotas (`kueue`'s ClusterQueue in one cluster
  cannot preempt the team's work in another). A policy that never
  preempts keeps the lower work to its end; `fleet` counts while its victims run to their checkpoint, or while
  it judges waiting cheaper.

`Watch` integrates the four over simulated time into `violations` (accelerator-hours over quota, team-hours
over budget, accelerator-hours of nominal quota withheld and of priority inverted within a team; the last two
measured once per loop interval, after the policy's step) for every policy, `fleet` included; `Watch.fits` is
the check the `fifo` and `cheapest` baselines admit with (they never go over quota or budget, so those stay 0
unless something else is wrong).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from ..models import TeamsDoc
from ..plan.quota import QuotaLedger
from ..plan.state import BUDGET_EPS_USD
from ..plan.types import HOURS_PER_MONTH
from ..resolve import ResolvedOption
from .cluster import SimPool
from .state import Counters, SimJob


def hourly_usd(p: SimPool, per_unit: int, units: int) -> float:
    """A placement's share of its units' hourly price (as `PlanState.attributed` charges a team's budget)."""
    return p.unit_hourly_usd * per_unit / p.rp.unit_accelerators * units


def over_quota(led: QuotaLedger, domain: str | None, teams: set[str], acc: str) -> int:
    """Accelerators of `acc` over quota now among `teams` (one lending domain, or one team in none)."""
    if domain is None:
        return sum(max(0, led.usage[(t, acc)] - led.limits(t, acc)[0]) for t in teams)
    beyond = within = 0
    for t in teams:
        n, b, _ = led.limits(t, acc)
        borrowed = max(0, led.usage[(t, acc)] - n)
        cap = borrowed if b is None else min(borrowed, b)
        beyond += borrowed - cap
        within += cap
    return beyond + max(0, within - led.lendable_sum[(domain, acc)])


Want = tuple[SimJob, str, str, int]      # a waiting job, the quota it is charged to, its lending domain, accelerators


def wanting(led: QuotaLedger, waiting: Iterable[SimJob]) -> list[Want]:
    """The waiting jobs that want their team's unused nominal quota now (module docstring), each on its first
    option that still fits, in the waiting list's order."""
    out: list[Want] = []
    taken: dict[tuple[str, str], int] = defaultdict(int)
    for j in waiting:
        if (d := led.domain.get(j.team)) is None:
            continue    # in no cohort: it lends nothing
        for opt in j.options:
            acc = led.charged(j.team, opt.accelerator, j.spot)
            n = opt.count * j.replicas
            if led.usage[(j.team, acc)] + taken[(j.team, acc)] + n <= led.limits(j.team, acc)[0]:
                taken[(j.team, acc)] += n
                out.append((j, acc, d, n))
                break
    return out


def held(led: QuotaLedger, wants: Iterable[Want]) -> int:
    """Of what `wants` want, the accelerators the cohorts' borrowing holds (module docstring)."""
    per_team: dict[tuple[str, str, str], int] = defaultdict(int)
    for j, acc, d, n in wants:
        per_team[(j.team, acc, d)] += n
    fall: dict[tuple[str, str], int] = defaultdict(int)      # (domain, acc) -> what its teams would lend less
    asked: dict[tuple[str, str], int] = defaultdict(int)
    for (team, acc, d), n in per_team.items():
        nominal, _, lend = led.limits(team, acc)
        used = led.usage[(team, acc)]
        fall[(d, acc)] += max(0, min(lend, nominal - used)) - max(0, min(lend, nominal - used - n))
        asked[(d, acc)] += n
    total = 0
    for dom, less in fall.items():     # borrowing beyond what the domain would still lend, not what was over before
        borrowed, lendable = led.borrowed_sum[dom], led.lendable_sum[dom]
        total += min(asked[dom], max(0, borrowed - (lendable - less)) - max(0, borrowed - lendable))
    return total


def withheld(led: QuotaLedger, waiting: Iterable[SimJob]) -> int:
    """Accelerators of the teams' nominal quota their cohort-mates' borrowing keeps from their waiting jobs now
    (module docstring)."""
    return held(led, wanting(led, waiting))


Could = Callable[[SimJob, ResolvedOption], bool]
"""Whether preempting the job's team's lower-class work could start it on an option now (remedy.py)."""


def inverted(led: QuotaLedger, low: dict[tuple[str, str], dict[int, int]], waiting: Iterable[SimJob],
             could: Could | None = None) -> int:
    """Accelerators of the teams' quota their own lower-class preemptible work holds from their waiting jobs now
    (module docstring); `low`: per (team, charged accelerator), accelerators placed per class value; `could`:
    an option counts only where it holds (None: wherever the quota is held)."""
    return sum(n for _, _, n in inverted_for(led, low, waiting, could))


def inverted_for(led: QuotaLedger, low: dict[tuple[str, str], dict[int, int]],
                 waiting: Iterable[SimJob], could: Could | None = None) -> list[tuple[SimJob, str, int]]:
    """`inverted`, job by job: (waiting job, charged accelerator, accelerators its team's lower work holds of it)."""
    claimed: dict[tuple[str, str, int], int] = defaultdict(int)
    out: list[tuple[SimJob, str, int]] = []
    for j in sorted(waiting, key=lambda j: -j.value):       # stable: the waiting list's order within a class
        for opt in j.options:
            acc = led.charged(j.team, opt.accelerator, j.spot)
            short = led.shortfall(j.team, acc, opt.count * j.replicas)
            free = {v: n - claimed[(j.team, acc, v)] for v, n in low.get((j.team, acc), {}).items() if v < j.value}
            if not short or sum(free.values()) < short or (could is not None and not could(j, opt)):
                continue
            out.append((j, acc, short))
            for v in sorted(free):                          # the lowest classes' work first
                take = min(short, free[v])
                claimed[(j.team, acc, v)] += take
                short -= take
            break
    return out


class Watch:
    """Quota and budget use of what is placed, and how far over the rules it is (a rate, integrated by the
    engine between events)."""

    def __init__(self, teams: TeamsDoc, reclaim: str = "any", within_team: str = "lower_priority") -> None:
        self.ledger = QuotaLedger(teams)
        self.guaranteed = reclaim == "any"      # nominal quota comes back to its team (module docstring)
        self.withheld = 0                       # accelerators of nominal quota withheld now
        self.ranked = within_team != "never"    # a team's higher class preempts its lower
        self.inverted = 0                       # accelerators of priority inverted within a team now
        self.low: dict[tuple[str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.budget = {t.name: (float("inf") if t.budget_monthly_usd is None
                                else t.budget_monthly_usd / HOURS_PER_MONTH + BUDGET_EPS_USD) for t in teams.teams}
        self.spend: dict[str, float] = defaultdict(float)
        self.seen: dict[tuple[str | None, str], set[str]] = defaultdict(set)     # (domain or team, acc) -> teams
        self.over: dict[tuple[str | None, str], int] = {}
        self.over_quota = 0                 # accelerators over quota now
        self.over_budget = 0                # teams over budget now

    def _key(self, team: str, acc: str) -> tuple[str | None, str]:
        d = self.ledger.domain.get(team)
        return (d, acc) if d is not None else (f"team:{team}", acc)

    def change(self, team: str, acc: str, accelerators: int, usd_h: float, spot: str = "",
               value: int | None = None) -> None:
        """`accelerators` (and `usd_h`) placed (> 0) or released (< 0) for the team; spot-only work (`spot`
        "required") is charged to its own spot quota where its team states one (`QuotaLedger.charged`), as the planner
        charges it. `value`: the work's class value when it is preemptible (`inverted`)."""
        acc = self.ledger.charged(team, acc, spot)
        if value is not None:
            self.low[(team, acc)][value] += accelerators
        before = self.spend[team] > self.budget.get(team, float("inf"))
        self.ledger.add(team, acc, accelerators)
        self.spend[team] += usd_h
        if abs(self.spend[team]) < 1e-9:
            self.spend[team] = 0.0
        after = self.spend[team] > self.budget.get(team, float("inf"))
        self.over_budget += int(after) - int(before)
        key = self._key(team, acc)
        self.seen[key].add(team)
        now = over_quota(self.ledger, self.ledger.domain.get(team), self.seen[key], acc)
        self.over_quota += now - self.over.get(key, 0)
        self.over[key] = now

    def look(self, waiting: Iterable[SimJob], could: Could | None = None) -> None:
        """Measure what is withheld now (`withheld`) and inverted (`inverted`, where `could`), the rates until the
        next look."""
        waiting = list(waiting)
        self.withheld = withheld(self.ledger, waiting) if self.guaranteed else 0
        self.inverted = inverted(self.ledger, self.low, waiting, could) if self.ranked else 0

    def accrue(self, c: Counters, dt_h: float) -> None:
        """Integrate the rates over `dt_h` hours into the run's counters."""
        c.over_quota_acc_h += self.over_quota * dt_h
        c.over_budget_h += self.over_budget * dt_h
        c.withheld_acc_h += self.withheld * dt_h
        c.inverted_acc_h += self.inverted * dt_h

    def fits(self, team: str, acc: str, accelerators: int, usd_h: float, spot: str = "") -> bool:
        """The rule `fifo` and `cheapest` admit by: the team's quota (with borrowing) and its budget both have
        room for the placement, by the planner's ledger and budget check."""
        return (self.ledger.shortfall(team, self.ledger.charged(team, acc, spot), accelerators) == 0
                and self.spend[team] + usd_h <= self.budget.get(team, float("inf")))
