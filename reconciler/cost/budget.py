"""Budgets: a team whose planned monthly cost exceeds its `budget_monthly_usd` is a violation. Pure.

A team's planned cost is what its placed jobs occupy (cost.model attribution; idle capacity is nobody's).
The planner admits no new job past a budget, but running jobs are kept whatever a policy edit says, so a
lowered budget or a price rise shows up here. Each violation lists the team's placed jobs, dearest first
(ties by id), and marks the ones this change starts or moves: those are what a reviewer can push back on.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..diff import started_or_moved
from .model import HOURS_PER_MONTH, JobCost, Priced


@dataclass(frozen=True, slots=True)
class BudgetViolation:
    team: str
    budget_monthly_usd: float
    planned_monthly_usd: float
    jobs: tuple[JobCost, ...]        # the team's placed jobs, dearest first
    changed: frozenset[str]          # of those, the jobs this change starts or moves

    @property
    def over_monthly_usd(self) -> float:
        return self.planned_monthly_usd - self.budget_monthly_usd

    def message(self) -> str:
        return (f"team {self.team} is planned at ${self.planned_monthly_usd:,.0f}/month, "
                f"${self.over_monthly_usd:,.0f} over its budget of ${self.budget_monthly_usd:,.0f}")


def budget_violations(head: Priced, base: Priced | None = None) -> tuple[BudgetViolation, ...]:
    """Teams over budget in `head`, by team name. A cent of tolerance absorbs float rounding. The jobs this
    change starts or moves are the diff's (`diff.started_or_moved`): a job kept where it ran is not the change's,
    even on other node numbers of its GPU pool (before, any other unit number blamed it)."""
    placed = started_or_moved(base, head) if base is not None else frozenset()
    out = []
    for team, budget in sorted(head.budgets_monthly_usd.items()):
        planned = head.cost.by_team.get(team, 0.0) * HOURS_PER_MONTH
        if planned <= budget + 0.01:
            continue
        jobs = tuple(sorted((j for j in head.cost.jobs if j.team == team), key=lambda j: (-j.hourly_usd, j.job)))
        changed = frozenset(j.job for j in jobs if j.job in placed)
        out.append(BudgetViolation(team, budget, planned, jobs, changed))
    return tuple(out)

