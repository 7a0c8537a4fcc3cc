"""Quota accounting with borrowing and lending in the cohort tree (Kueue's model, fleet-wide). Internal,
mutable simulation state of one `plan()` call; never shared.

Per team t and accelerator a: nominal N, borrowing_limit B (None: unlimited), lending_limit L (None: N).
Usage U splits into own = min(U, N) and borrowed = U - own. Teams whose cohorts share a root form one
lending domain. What t may lend right now is min(L, N - own); a domain's borrowers together never take more
than the sum of what its members may lend, and no team borrows more than its B. A team outside any cohort
neither lends nor borrows. Within nominal, usage is guaranteed: `shortfall` never refuses it.

The domain sums of lendable and borrowed amounts are kept up to date on every add/remove, so a check is
O(1) however many teams share a cohort.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ..models import Job, PrioritiesDoc, Team, TeamsDoc
from ..resolve import spot_policy

_NO_QUOTA = (0, None, 0)   # nominal, borrowing limit, lending limit of a (team, accelerator) with no quota
SPOT = "@spot"          # the ledger key of spot-only work with its own quota: `<accelerator>@spot` (issue 22)


def spot_charged(team: Team, spot: str) -> frozenset[str]:
    """The accelerators whose `spot:` quota a job of `team` with spot policy `spot` is charged to: spot-only work
    (`required`, the job's or its class's) on every accelerator the team states a `spot:` quota of; nothing for
    other work (`QuotaLedger.charged`; render gives those quotas to the spot flavors)."""
    if spot != "required":
        return frozenset()
    return frozenset(a for a, q in team.quota.items() if q.spot is not None)


def spot_charges(teams: TeamsDoc | None, prio: PrioritiesDoc | None, jobs: Iterable[Job]) -> dict[str, frozenset[str]]:
    """job id -> the accelerators whose `spot:` quota it is charged to (`spot_charged`, with the spot policy of the
    job or its class), for the jobs charged to some: what render and `fleet status` read the planner's rule as."""
    if teams is None or not any(q.spot is not None for t in teams.teams for q in t.quota.values()):
        return {}
    team_of = {t.name: t for t in teams.teams}
    class_spot = {c.name: c.spot for c in prio.classes} if prio is not None else {}
    default = prio.default if prio is not None else ""
    out = {}
    for job in jobs:
        if job.team in team_of:
            accs = spot_charged(team_of[job.team], spot_policy(job, class_spot.get(job.priority or default)))
            if accs:
                out[job.id] = accs
    return out


class QuotaLedger:
    def __init__(self, teams: TeamsDoc) -> None:
        self.domain = teams.domains()
        self._limits: dict[tuple[str, str], tuple[int, int | None, int]] = {}
        for t in teams.teams:
            for acc, q in t.quota.items():
                lend = q.nominal if q.lending_limit is None else q.lending_limit
                self._limits[(t.name, acc)] = (q.nominal, q.borrowing_limit, lend)
                if q.spot is not None:      # its own, neither lent nor borrowed
                    self._limits[(t.name, acc + SPOT)] = (q.spot, 0, 0)
        self.teams_of: dict[str, list[str]] = defaultdict(list)              # domain -> its teams
        for t in teams.teams:
            if (d := self.domain.get(t.name)) is not None:
                self.teams_of[d].append(t.name)
        self.members: dict[tuple[str, str], list[str]] = defaultdict(list)   # (domain, acc) -> teams with a quota
        for (team, acc) in self._limits:
            if (d := self.domain.get(team)) is not None:
                self.members[(d, acc)].append(team)
        self.usage: dict[tuple[str, str], int] = defaultdict(int)
        self.lendable_sum: dict[tuple[str, str], int] = defaultdict(int)   # (domain, acc) -> sum of lendable
        self.borrowed_sum: dict[tuple[str, str], int] = defaultdict(int)   # (domain, acc) -> sum of borrowed
        for (team, acc), (n, _, lend) in self._limits.items():
            d = self.domain.get(team)
            if d is not None:
                self.lendable_sum[(d, acc)] += max(0, min(lend, n))

    def limits(self, team: str, acc: str) -> tuple[int, int | None, int]:
        return self._limits.get((team, acc), _NO_QUOTA)

    def charged(self, team: str, acc: str, spot: str) -> str:
        """The quota a job is charged to: spot-only work (`spot: required`) of a team that states a `spot:` quota
        of the accelerator to that (`<acc>@spot`), apart from nominal, so on-demand quota never needs to evict
        it (Kueue: spot is a separate flavor); all other work to the accelerator's quota."""
        key = acc + SPOT
        return key if spot == "required" and (team, key) in self._limits else acc

    def _lendable(self, team: str, acc: str) -> int:
        n, _, lend = self.limits(team, acc)
        return max(0, min(lend, n - min(self.usage[(team, acc)], n)))

    def _borrowed(self, team: str, acc: str) -> int:
        return max(0, self.usage[(team, acc)] - self.limits(team, acc)[0])

    def available_to_borrow(self, team: str, acc: str) -> int:
        """What the other members of the team's domain lend and nobody (this team included) borrowed yet."""
        d = self.domain.get(team)
        if d is None:
            return 0
        pool = self.lendable_sum[(d, acc)] - self._lendable(team, acc)
        return max(0, pool - self.borrowed_sum[(d, acc)])

    def needs_borrow(self, team: str, acc: str, amount: int) -> bool:
        return self.usage[(team, acc)] + amount > self.limits(team, acc)[0]

    def shortfall(self, team: str, acc: str, amount: int, *, allow_borrow: bool = True) -> int:
        """How many more chips/GPUs the team would need for `amount` more; 0 if it fits.

        Within nominal, usage is refused only where others already borrowed what this team lent: the plan
        never shows a cohort borrowing more than its members lend (reclaiming it is preemption's job). (The
        planner's most frequent question: `limits`, `_lendable`, `_borrowed` and `available_to_borrow` are
        written out here.)"""
        key = (team, acc)
        n, b, lend = self._limits.get(key, _NO_QUOTA)
        used = self.usage[key]
        d = self.domain.get(team)
        if used + amount <= n:
            if d is None:
                return 0
            borrowed_sum = self.borrowed_sum[(d, acc)]
            if not borrowed_sum:
                return 0    # nobody in the domain borrows: nothing this team lent is taken
            lend_now = max(0, min(lend, n - min(used, n)))
            after_lend = max(0, min(lend, n - (used + amount)))
            lent_now = self.lendable_sum[(d, acc)] - lend_now + after_lend
            return max(0, min(amount, borrowed_sum - lent_now))
        if not allow_borrow or d is None:
            return used + amount - n
        borrowed = max(0, used - n)
        extra = used + amount - n - borrowed   # new borrowing this would need
        lend_now = max(0, min(lend, n - min(used, n)))
        room = max(0, self.lendable_sum[(d, acc)] - lend_now - self.borrowed_sum[(d, acc)])
        if b is not None:
            room = min(room, b - borrowed)
        return max(0, extra - max(0, room))

    def _change(self, team: str, acc: str, delta: int) -> None:
        key = (team, acc)
        d = self.domain.get(team)
        u0 = self.usage[key]
        u1 = self.usage[key] = u0 + delta
        if d is None:
            return
        n, _, lend = self._limits.get(key, _NO_QUOTA)
        self.lendable_sum[(d, acc)] += max(0, min(lend, n - min(u1, n))) - max(0, min(lend, n - min(u0, n)))
        self.borrowed_sum[(d, acc)] += max(0, u1 - n) - max(0, u0 - n)

    def add(self, team: str, acc: str, amount: int) -> None:
        self._change(team, acc, amount)

    def remove(self, team: str, acc: str, amount: int) -> None:
        self._change(team, acc, -amount)

    def is_borrowing(self, team: str, acc: str) -> bool:
        return self._borrowed(team, acc) > 0

    def borrowers(self, team: str, acc: str) -> list[tuple[str, int]]:
        """The team's cohort-mates (same lending domain) that borrow `acc` now, most first, ties by name; a mate
        with no quota of `acc` borrows all it uses (before the forty-first session's review it was left out, as
        `members` lists only teams with a quota of it)."""
        d = self.domain.get(team)
        found = [(t, self._borrowed(t, acc)) for t in (self.teams_of.get(d, ()) if d is not None else ())
                 if t != team]
        return sorted(((t, b) for t, b in found if b > 0), key=lambda x: (-x[1], x[0]))

    def why_short(self, team: str, acc: str, amount: int, reclaim: bool = True) -> str:
        """What stands behind `shortfall(team, acc, amount)` (> 0), in numbers: the lent-out nominal quota and
        who borrows it, or the team's usage against its nominal, its borrowing limit and what the cohort has
        left to lend. Empty if nothing is short."""
        n, b, _ = self.limits(team, acc)
        used = self.usage[(team, acc)]
        if not self.shortfall(team, acc, amount):
            return ""
        if used + amount <= n:
            # Within nominal: refused only because cohort-mates borrow what this team lends. The others lend
            # `others`; whatever is borrowed beyond that comes out of this team's nominal quota.
            d = self.domain.get(team)
            assert d is not None   # outside a cohort, nominal usage is never refused
            others = self.lendable_sum[(d, acc)] - self._lendable(team, acc)
            lent = max(0, self.borrowed_sum[(d, acc)] - others)
            who = ", ".join(f"{t} borrows {x}" for t, x in self.borrowers(team, acc))
            then = "reclaiming them needs preemption" if reclaim else \
                "policies/priorities.yaml does not reclaim them (reclaim_within_cohort: never): they come back as " \
                "the borrowers' work ends"
            return f"{lent} of team {team}'s nominal {acc} quota ({n}) are lent to cohort-mates ({who}); {then}"
        parts = [f"team {team} uses {used} of its nominal {n} and asks {amount} more"]
        if self.domain.get(team) is None:
            return parts[0] + " and is in no cohort, so it cannot borrow"
        borrowed = self._borrowed(team, acc)
        if b is not None:
            parts.append(f"borrows {borrowed} of its borrowing limit {b}")
        parts.append(f"the cohort has {self.available_to_borrow(team, acc)} left to lend")
        return ", ".join(parts)
