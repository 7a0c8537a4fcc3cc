"""Quota accounting with borrowing and lending in the cohort tree (Kueue's model, fleet-wide). Internal,
mutable simulation state of one `plan()` call; never shared.

Per team t and accelerator a: nominal N, borrowing_limit B (None: unlimited), lending_limit L (None: N).
Usage U splits into own = min(U, N) and borrowed = U - own. Teams whose cohorts share a root form one
lending domain. What t may lend right now is min(L, N - own); a domain's borrowers together never take more
than the sum of what its members may lend, and no team borrows more than its B. A team outside any cohort
neither lends nor borrows. Within nominal, usage is guaranteed: `shortfall` never refuses it.
"""

from __future__ import annotations

from collections import defaultdict

from ..models import TeamsDoc


class QuotaLedger:
    def __init__(self, teams: TeamsDoc) -> None:
        parent = {c.name: c.parent for c in teams.cohorts}

        def root(cohort: str) -> str:
            seen: set[str] = set()
            while parent.get(cohort) and cohort not in seen:
                seen.add(cohort)
                cohort = parent[cohort] or cohort
            return cohort

        self.domain = {t.name: (root(t.cohort) if t.cohort else None) for t in teams.teams}
        self.quota = {t.name: t.quota for t in teams.teams}
        self.usage: dict[tuple[str, str], int] = defaultdict(int)
        self.members: dict[str, list[str]] = defaultdict(list)
        for t in teams.teams:
            d = self.domain[t.name]
            if d is not None:
                self.members[d].append(t.name)

    def limits(self, team: str, acc: str) -> tuple[int, int | None, int]:
        q = self.quota.get(team, {}).get(acc)
        if q is None:
            return 0, None, 0
        return q.nominal, q.borrowing_limit, q.nominal if q.lending_limit is None else q.lending_limit

    def _lendable(self, team: str, acc: str) -> int:
        n, _, lend = self.limits(team, acc)
        own = min(self.usage[(team, acc)], n)
        return max(0, min(lend, n - own))

    def _borrowed(self, team: str, acc: str) -> int:
        n, _, _ = self.limits(team, acc)
        return max(0, self.usage[(team, acc)] - n)

    def available_to_borrow(self, team: str, acc: str) -> int:
        d = self.domain.get(team)
        if d is None:
            return 0
        members = self.members[d]
        pool = sum(self._lendable(m, acc) for m in members if m != team)
        taken = sum(self._borrowed(m, acc) for m in members if m != team)
        return max(0, pool - taken)

    def shortfall(self, team: str, acc: str, amount: int, *, allow_borrow: bool = True) -> int:
        """How many more chips/GPUs the team would need for `amount` more; 0 if it fits."""
        n, b, _ = self.limits(team, acc)
        used = self.usage[(team, acc)]
        if used + amount <= n:
            return 0
        if not allow_borrow or self.domain.get(team) is None:
            return used + amount - n
        extra = used + amount - n - self._borrowed(team, acc)   # new borrowing this would need
        room = self.available_to_borrow(team, acc)
        if b is not None:
            room = min(room, b - self._borrowed(team, acc))
        return max(0, extra - max(0, room))

    def borrows(self, team: str, acc: str, amount: int) -> bool:
        n, _, _ = self.limits(team, acc)
        return self.usage[(team, acc)] + amount > n

    def add(self, team: str, acc: str, amount: int) -> None:
        self.usage[(team, acc)] += amount

    def remove(self, team: str, acc: str, amount: int) -> None:
        self.usage[(team, acc)] -= amount

    def is_borrowing(self, team: str, acc: str) -> bool:
        return self._borrowed(team, acc) > 0
