"""The quota split shared by the plan and render. Pure.

The plan splits each team's quota of an accelerator over the clusters that have it (`split_all`, called by
`summary.cluster_quotas`); render splits each cluster's part over the flavors (pools) of that accelerator
there (render/flavor_quota.py). A *part* is a cluster, or a flavor of one cluster; the rules are the same:

1. Within nominal, highest priority first (`inside`). The team's nominal covers its placed work in order of
   priority (highest class first, then work kept running from the base plan, then job id); what is left
   above nominal is borrowed, in the part that runs it. So work the plan keeps within nominal is within
   nominal in its ClusterQueue (and flavor), and what a queue borrows is its lowest-priority work, the work
   Kueue reclaims first.
2. Stable (`settle`). A team that borrows nowhere gets a reference split that depends only on its own
   nominal and the parts' capacities (whole units where a part has them: TPU slices), raised only where a
   part needs more (its work there, plus what it lends there to cohort-mates), the raise taken from the
   parts with the most room above their need, largest first. A change then moves quota only in the parts
   whose need crosses their reference, and in as few others as it can.
3. Lending (`steer`). Per cohort tree and part, what members borrow there is covered first by unused
   nominal that lenders already hold in that part (lenders in name order, each within what it may lend
   fleet-wide), and only the rest is lent by raising a lender's nominal there (rule 2 takes it from the
   lender's other parts). So a borrower moves no other team's quota unless what it borrows needs it.
4. Limits. Borrowing limits are what the part borrows (None stays None). Lending limits are split like
   rule 2: in proportion to each part's nominal, raised where the team lends (rule 3), the raise taken from
   the parts with the most room (None stays None).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from math import gcd
from typing import NamedTuple

from .types import Placement


@dataclass(frozen=True, slots=True)
class Part:
    """A cluster or a flavor: `weight` its capacity (accelerators at max), `unit` what a workload takes at a
    time (TPU flavor: chips per slice; else 1)."""
    name: str
    weight: float
    unit: int = 1


@dataclass(frozen=True, slots=True)
class Hold:
    """Quota a placement uses: `amount` accelerators in `part`, of a job of class value `priority`; `kept`:
    running since the base plan."""
    part: str
    amount: int
    priority: int
    job: str
    kept: bool = False

    @classmethod
    def of(cls, p: Placement, priority: int, part: str) -> Hold:
        return cls(part, len(p.units) * p.accelerators_per_unit, priority, p.job, p.status == "kept")


@dataclass(frozen=True, slots=True)
class Share:
    """One team's quota of one accelerator, and its placed work."""
    team: str
    domain: str | None           # root of its cohort tree; None: no cohort (never lends or borrows)
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None    # None: all of the nominal may be lent
    holds: tuple[Hold, ...]


class PartQuota(NamedTuple):
    """One team's quota in one part (a tuple: a split builds one per team and part, tens of thousands a
    reconcile cycle, and a frozen dataclass is several times slower to build)."""
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    used: int
    lent: int                    # of the nominal, what cohort-mates borrow here in the plan


def inside(nominal: int, holds: Iterable[Hold]) -> dict[str, int]:
    """Rule 1: per part, the placed work within `nominal`, highest priority first, then running (kept) work
    before new work, then by job id."""
    out: dict[str, int] = defaultdict(int)
    left = nominal
    for h in sorted(holds, key=lambda h: (-h.priority, not h.kept, h.job, h.part)):
        take = max(0, min(left, h.amount))
        out[h.part] += take
        left -= take
    return dict(out)


def used_by_part(holds: Iterable[Hold]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for h in holds:
        out[h.part] += h.amount
    return dict(out)


def split_all(shares: list[Share], parts: list[Part]) -> dict[str, dict[str, PartQuota]]:
    """Every team's share of one accelerator split over `parts` (rules 1-4): team -> part -> quota. A function
    of its arguments alone (frozen values), so a split whose shares and parts did not change since an earlier
    call is that call's answer (`_split`): a reconcile cycle renders every cluster's flavor quotas, and most of
    its (cluster, accelerator) splits are the last cycle's (bench/bench_reconcile.py)."""
    return {team: dict(by_part) for team, by_part in _split(tuple(shares), tuple(parts)).items()}


@lru_cache(maxsize=512)
def _split(shares: tuple[Share, ...], parts_key: tuple[Part, ...]) -> dict[str, dict[str, PartQuota]]:
    parts = list(parts_key)
    names = [p.name for p in parts]
    use = {s.team: used_by_part(s.holds) for s in shares}
    nominal: dict[str, dict[str, int]] = {}
    lend: dict[str, dict[str, int | None]] = {}
    demand: dict[tuple[str | None, str], int] = defaultdict(int)
    lenders: list[Share] = []
    alike: dict[tuple[int, int | None, frozenset[tuple[str, int]]], tuple[dict[str, int], dict[str, int | None]]] = {}
    for s in shares:
        u = use[s.team]
        if sum(u.values()) >= s.nominal and sum(u.values()) > 0:   # borrows (or uses exactly all): rule 1
            nominal[s.team] = _borrower_split(s.nominal, parts, inside(s.nominal, s.holds), u)
            for p in names:
                demand[(s.domain, p)] += u.get(p, 0) - nominal[s.team][p]
            lend[s.team] = lending_limits(s, parts, nominal[s.team], {})
            continue
        lenders.append(s)
        # a lender's first split and limits are a function of its nominal, lending limit and use alone: teams
        # alike in those (most teams of a part use nothing there) share one computation (read, never changed)
        key = (s.nominal, s.lending_limit, frozenset(u.items()))
        if key not in alike:
            first = settle(s.nominal, parts, u)
            alike[key] = first, lending_limits(s, parts, first, {})
        nominal[s.team], lend[s.team] = alike[key]
    lent = steer(names, demand, lenders, use, nominal, lend)
    for s in lenders:
        mine = lent[s.team]
        if any(use[s.team].get(p, 0) + n > nominal[s.team][p] for p, n in mine.items()):
            nominal[s.team] = settle(s.nominal, parts, {p: use[s.team].get(p, 0) + mine.get(p, 0) for p in names})
            lend[s.team] = lending_limits(s, parts, nominal[s.team], mine)
        elif any(limit is not None and mine.get(p, 0) > limit for p, limit in lend[s.team].items()):
            lend[s.team] = lending_limits(s, parts, nominal[s.team], mine)
    out: dict[str, dict[str, PartQuota]] = {}
    for s in shares:
        n, u, limits, given = nominal[s.team], use[s.team], lend[s.team], lent.get(s.team, {})
        borrow: dict[str, int | None] = dict.fromkeys(names)
        if s.borrowing_limit is not None:
            borrow = {p: min(s.borrowing_limit, max(0, u.get(p, 0) - n[p])) for p in names}
        out[s.team] = {p: PartQuota(n[p], borrow[p], limits[p], u.get(p, 0), given.get(p, 0)) for p in names}
    return out


def lending_limits(s: Share, parts: list[Part], nominal: Mapping[str, int],
                   lent: Mapping[str, int]) -> dict[str, int | None]:
    """Rule 4: the team's lending limit in proportion to each part's nominal, raised where it lends more."""
    if s.lending_limit is None:
        return dict.fromkeys(nominal)
    total = min(s.lending_limit, sum(nominal.values()))
    split = settle(total, [Part(p.name, float(nominal[p.name])) for p in parts],
                   {p: min(n, nominal[p]) for p, n in lent.items()})
    return {p: n for p, n in split.items()}


def _borrower_split(total: int, parts: list[Part], within: Mapping[str, int], use: Mapping[str, int]) -> dict[str, int]:
    """A borrowing team's nominal: its work within nominal, part by part (rule 1). Where a part's units are
    more than 1 (TPU slices), the jobs wholly within nominal keep theirs and the straddling rest goes in whole
    units where they fit under the part's usage, else on the parts with the smallest unit."""
    out = {p.name: within.get(p.name, 0) for p in parts}
    if all(p.unit == 1 for p in parts):
        return out
    unit = {p.name: p.unit for p in parts}
    fixed = {k: n - n % unit[k] for k, n in out.items()}
    rest = total - sum(fixed.values())
    room: dict[str, int | None] = {k: max(0, use.get(k, 0) - fixed[k]) for k in out}
    extra, left = whole_split(rest, {k: float(r or 0) for k, r in room.items()}, unit, room)
    out = {k: fixed[k] + extra[k] for k in out}
    for p in sorted(parts, key=lambda p: (p.unit, p.name)):
        take = min(left, max(0, use.get(p.name, 0) - out[p.name]))
        out[p.name] += take
        left -= take
    if left:   # pragma: no cover - usage covers the nominal of a borrowing team
        out[min(parts, key=lambda p: (p.unit, p.name)).name] += left
    return out


def settle(total: int, parts: list[Part], need: Mapping[str, int]) -> dict[str, int]:
    """Rule 2: `total` over `parts`, each at least `need` (whose sum is at most `total`), as near to the
    reference split by capacity as whole units allow. Parts below their need are raised to it (rounded up to
    whole units); the raise comes from the parts with the most room above their need, in whole units. If
    whole units cannot make the sum exact, the need (rounded up while the quota lasts) plus the rest in whole
    units by capacity (`spread`)."""
    unit = {p.name: p.unit for p in parts}
    ref = _reference(total, tuple(parts))
    lo = {k: need.get(k, 0) for k in unit}
    out = {k: ref[k] if ref[k] >= lo[k] else lo[k] + -lo[k] % unit[k] for k in unit}
    excess = sum(out.values()) - total
    for k in sorted(unit, key=lambda k: (-(out[k] - lo[k]), k)):
        if excess <= 0:
            break
        n = min(excess, out[k] - lo[k]) // unit[k] * unit[k]
        out[k] -= n
        excess -= n
    if excess == 0:
        return out
    return spread(total, parts, lo)


@lru_cache(maxsize=4096)
def _reference(total: int, parts: tuple[Part, ...]) -> dict[str, int]:
    """Rule 2's reference split of `total` by the parts' capacities, in whole units: a function of the two alone,
    the same for every team with that quota and every cycle while capacities stay (read, never changed)."""
    unit = {p.name: p.unit for p in parts}
    ref, rem = whole_split(total, {p.name: p.weight for p in parts}, unit, dict.fromkeys(unit))
    if rem:
        ref[min(parts, key=lambda p: (p.unit, p.name)).name] += rem
    return ref


def spread(total: int, parts: list[Part], need: Mapping[str, int]) -> dict[str, int]:
    """`need`, topped up to whole units smallest top-up first while the quota lasts, then the rest in whole
    units by capacity; a remainder that no whole split holds goes on a part left short of a whole unit, else
    on the part with the smallest unit."""
    nominal = {p.name: need.get(p.name, 0) for p in parts}
    budget = total - sum(nominal.values())
    short: list[str] = []
    for p in sorted(parts, key=lambda p: (-nominal[p.name] % p.unit, p.unit, p.name)):
        top = -nominal[p.name] % p.unit
        if top and top <= budget:
            nominal[p.name] += top
            budget -= top
        elif top:
            short.append(p.name)
    more, left = whole_split(budget, {p.name: p.weight for p in parts}, {p.name: p.unit for p in parts},
                             dict.fromkeys(nominal))
    for p in parts:
        nominal[p.name] += more[p.name]
    if left:
        nominal[short[0] if short else min(parts, key=lambda p: (p.unit, p.name)).name] += left
    return nominal


def steer(names: list[str], demand: Mapping[tuple[str | None, str], int], lenders: list[Share],
          use: Mapping[str, Mapping[str, int]], nominal: Mapping[str, Mapping[str, int]],
          lend: Mapping[str, Mapping[str, int | None]]) -> dict[str, dict[str, int]]:
    """Rule 3: per lender and part, what it lends there. First what the lenders can already lend in the part
    (unused nominal there, within its lending limit there: the limits of all parts add up to the team's, so
    this never lends more than the team may), lenders in name order; then the rest of the demand, lender by
    lender, each within what it may still lend fleet-wide (those get their quota raised there)."""
    lent: dict[str, dict[str, int]] = {s.team: defaultdict(int) for s in lenders}
    left: dict[str, int] = {}
    for s in lenders:
        unused = s.nominal - sum(use[s.team].values())
        left[s.team] = max(0, min(unused, s.nominal if s.lending_limit is None else s.lending_limit))
    ordered = sorted(lenders, key=lambda s: s.team)
    short: list[tuple[str, str, int]] = []
    roots: dict[str, list[str]] = defaultdict(list)
    for d, q in sorted(demand, key=lambda k: (k[1], k[0] or "")):
        if d is not None and demand[(d, q)] > 0:
            roots[q].append(d)
    for p in names:
        for d in roots.get(p, ()):
            want = demand[(d, p)]
            for s in (s for s in ordered if s.domain == d):
                free = nominal[s.team][p] - use[s.team].get(p, 0)
                limit = lend[s.team][p]
                take = max(0, min(want, free if limit is None else min(free, limit)))
                lent[s.team][p] += take
                left[s.team] -= take
                want -= take
            if want > 0:
                short.append((d, p, want))
    for root, p, want in short:
        for s in (s for s in ordered if s.domain == root):
            take = max(0, min(want, left[s.team]))
            lent[s.team][p] += take
            left[s.team] -= take
            want -= take
    return {t: dict(v) for t, v in lent.items()}


def whole_split(total: int, weights: Mapping[str, float], unit: Mapping[str, int],
                room: Mapping[str, int | None]) -> tuple[dict[str, int], int]:
    """Split `total` into multiples of `unit[k]`, at most `room[k]` (None: no bound), as near to the
    proportions of `weights` as whole units allow. Returns (parts, remainder): the remainder is what no
    whole-unit split within the bounds can hold (0 whenever one exists).

    1. each key gets its exact share rounded down to whole units (and to its room);
    2. whole units go, one key at a time, to the key furthest below its share that still has room and whose
       unit fits what is left (ties by name); with every unit 1 this is `split`'s largest remainder;
    3. if something is left, a bounded knapsack over whole units (bitset, O(keys x log(count)) shifts) finds
       a split of `total` if any exists, ignoring the proportions."""
    keys = sorted(weights)
    if not keys:
        return {}, total
    wsum = sum(weights.values())
    w = dict(weights) if wsum > 0 else dict.fromkeys(keys, 1.0)
    wsum = sum(w.values())
    exact = {k: total * w[k] / wsum for k in keys}

    def cap(k: str) -> int:
        r = room[k]
        return total if r is None else min(total, r)

    parts = {k: min(cap(k) // unit[k], int(exact[k] // unit[k])) * unit[k] for k in keys}
    left = total - sum(parts.values())
    if all(unit[k] == 1 for k in keys):   # the loop below one key at a time, in one sort per round
        while left > 0:
            open_ = sorted((k for k in keys if parts[k] < cap(k)), key=lambda k: (-(exact[k] - parts[k]), k))
            if not open_:
                break
            for k in open_[:left]:
                parts[k] += 1
            left -= min(left, len(open_))
        return parts, left
    while left > 0:
        fits = [k for k in keys if unit[k] <= left and parts[k] + unit[k] <= cap(k)]
        if not fits:
            break
        k = min(fits, key=lambda k: (-(exact[k] - parts[k]), k))
        n = max(1, min(left // unit[k], (cap(k) - parts[k]) // unit[k], -(-(exact[k] - parts[k]) // unit[k])))
        parts[k] += int(n) * unit[k]
        left -= int(n) * unit[k]
    if left > 0:
        found = _knapsack(total, [(k, unit[k], cap(k) // unit[k]) for k in keys])
        if found is not None:
            return found, 0
    return parts, left


def _knapsack(total: int, items: list[tuple[str, int, int]]) -> dict[str, int] | None:
    """Counts c_k <= max_k with sum c_k * unit_k == total, as {key: c_k * unit_k}, or None if there are none.
    Binary splitting of each bound; the reachable sums are the set bits of an int."""
    g = 0
    for _, u, _ in items:
        g = gcd(g, u)
    if g == 0 or total % g:
        return None
    target, full = total // g, (1 << (total // g + 1)) - 1
    steps: list[tuple[str, int, int]] = []         # (key, accelerators this step adds, reachable before it)
    reach = 1
    for key, u, most in items:
        chunk, left = 1, most
        while left > 0:
            take = min(chunk, left)
            steps.append((key, take * u, reach))
            reach = (reach | (reach << (take * u // g))) & full
            left -= take
            chunk *= 2
    if not reach >> target & 1:
        return None
    out = {key: 0 for key, _, _ in items}
    t = target
    for key, add, before in reversed(steps):
        if not before >> t & 1:
            out[key] += add
            t -= add // g
    return out
