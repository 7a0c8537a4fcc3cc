"""Per-flavor quotas: each team's per-cluster quota of the plan, split over the pools (flavors) of that
accelerator in the cluster, in whole slices where possible. Pure.

The plan (`plan.quotas`, see `plan/summary.py::cluster_quotas`) already splits every team's quota over the
clusters so that the parts add up to `policies/teams.yaml`; here each part is split once more, with whole
numbers that add up exactly (so the sum over clusters and flavors of `nominalQuota` is the team's quota).

Units. A TPU workload takes whole slices of one flavor, so a TPU flavor's quota is only usable in multiples
of its slice (`unit_accelerators`: 256 chips for v6e 16x16, 4 for v6e 2x2): 20 chips of a 16x16 flavor can
never admit anything there. GPU (and Trainium) flavors use a unit of 1: GPU pods request any number of a
node's GPUs and small jobs share nodes (the planner packs them), so 3 of an 8-GPU node is usable quota;
asking for multiples of 8 would only push remainders elsewhere for no gain.

1. usage: what the plan placed for the team on each pool (slices x chips, or GPUs);
2. nominal, for a team that borrows in the cluster (usage >= the cluster's nominal): at most its usage in
   each flavor (the rest is borrowed there), in whole slices split in proportion to usage;
   for any other team: each flavor first gets its usage, then, up to what the team may lend, what
   cohort-mates borrow in that flavor (so Kueue finds the lendable quota in the flavor the borrower needs),
   rounded up to whole slices while the quota lasts (smallest top-up first); the rest in whole slices in
   proportion to pool capacity (max units);
   in both cases whole units are handed out largest shortfall first, and if that leaves a part no whole
   units can hold, a bounded knapsack (bitset) looks for any whole-unit split before giving up;
3. the remainder, the part of the cluster's quota that no whole-slice split within those bounds can hold
   (say a quota of 23 chips over 4-, 16- and 256-chip slices): a borrowing team puts it on its flavors
   with the smallest slice that have room under their usage (so its own placed jobs use it); any other team
   on the flavor whose lent quota could not be rounded up, else on the flavor with the smallest slice.
   So a TPU flavor's nominal is not whole slices only where (a) it is all used by the team's placed jobs
   or lent to cohort-mates' planned borrowing (`lent`), or (b) it holds that remainder, on one flavor per
   team and cluster; and (b) happens only when no whole-slice split exists (tests/test_render.py checks it);
4. borrowingLimit: each flavor exactly what the plan borrows there, any remainder of the cluster's limit by
   capacity; None (unlimited) stays None;
5. lendingLimit: the cluster's limit goes first to the quota lent to cohort-mates' demand in step 2
   (step 2 lends at most what the team may lend), then to other unused nominal, then to the rest of the
   nominal; never above a flavor's nominal. None stays None.
Ties break by pool name everywhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from math import gcd

from ..plan.summary import fill, split
from ..plan.types import Plan, QuotaPlan


@dataclass(frozen=True, slots=True)
class FlavorQuota:
    cluster: str
    team: str
    accelerator: str
    flavor: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    used: int
    lent: int = 0           # of the nominal, what cohort-mates borrow here in the plan (lent first)


@dataclass(frozen=True, slots=True)
class FlavorPool:
    """A pool as a flavor: `capacity` in accelerators at max, `unit` the accelerators a workload takes at
    a time (TPU: chips per slice; GPU, Trainium: 1)."""
    name: str
    capacity: int
    unit: int


def usage(plan: Plan) -> dict[tuple[str, str, str], int]:
    """(cluster, pool, team) -> accelerators the plan placed there."""
    used: dict[tuple[str, str, str], int] = defaultdict(int)
    for p in plan.placements:
        used[(p.cluster, p.pool, p.job.split("/")[0])] += len(p.units) * p.accelerators_per_unit
    return used


def flavor_quotas(plan: Plan, pools: Mapping[tuple[str, str], list[FlavorPool]],
                  domain: Mapping[str, str | None]) -> list[FlavorQuota]:
    """Split every `plan.quotas` entry over the pools of its accelerator in its cluster (module docstring).

    `pools[(cluster, accelerator)]` lists the flavors sorted by pool name; `domain[team]` is the root of the
    team's cohort tree (None: no cohort, never lends or borrows)."""
    used = usage(plan)
    entries = sorted(plan.quotas, key=lambda q: (q.cluster, q.accelerator, q.team))
    # Pass 1: teams at or over their cluster nominal; their borrowing per flavor is the demand lenders serve.
    demand: dict[tuple[str | None, str, str], int] = defaultdict(int)   # (domain, cluster, pool) -> borrowed
    nominal_of: dict[tuple[str, str, str], dict[str, int]] = {}
    for q in entries:
        flav = pools.get((q.cluster, q.accelerator), [])
        use = {f.name: used.get((q.cluster, f.name, q.team), 0) for f in flav}
        if flav and sum(use.values()) >= q.nominal:
            nominal, rest = whole_split(q.nominal, {f.name: float(use[f.name]) for f in flav},
                                        {f.name: f.unit for f in flav}, dict(use))
            by_unit = sorted(flav, key=lambda f: (f.unit, f.name))
            for name, n in fill(rest, [(f.name, use[f.name] - nominal[f.name]) for f in by_unit]).items():
                nominal[name] += n
            nominal_of[(q.cluster, q.team, q.accelerator)] = nominal
            for f in flav:
                demand[(domain.get(q.team), q.cluster, f.name)] += use[f.name] - nominal[f.name]
    # Pass 2: everyone else fills its flavors with usage, then lends what it may where cohort-mates borrow.
    steered: dict[tuple[str, str, str], dict[str, int]] = {}
    for q in entries:
        flav = pools.get((q.cluster, q.accelerator), [])
        key = (q.cluster, q.team, q.accelerator)
        if not flav or key in nominal_of:
            continue
        d = domain.get(q.team)
        use = {f.name: used.get((q.cluster, f.name, q.team), 0) for f in flav}
        rest = q.nominal - sum(use.values())
        lendable = rest if q.lending_limit is None else min(rest, q.lending_limit)
        steer = fill(lendable, [(f.name, demand[(d, q.cluster, f.name)]) for f in flav]) if d is not None else {}
        for name, n in steer.items():
            demand[(d, q.cluster, name)] -= n
        steered[key] = steer
        nominal_of[key] = _lender_nominal(flav, use, steer, rest)
    out: list[FlavorQuota] = []
    for q in entries:
        flav = pools.get((q.cluster, q.accelerator), [])
        if not flav:
            continue
        key = (q.cluster, q.team, q.accelerator)
        out.extend(_limits(q, flav, nominal_of[key], used, steered.get(key, {})))
    return sorted(out, key=lambda f: (f.cluster, f.team, f.accelerator, f.flavor))


def _lender_nominal(flav: list[FlavorPool], use: Mapping[str, int], steer: Mapping[str, int],
                    rest: int) -> dict[str, int]:
    """Usage + lent quota, topped up to whole slices smallest top-up first while `rest` lasts, then the rest
    in whole slices by capacity; a remainder goes on a flavor left short of a whole slice, else on the
    flavor with the smallest slice."""
    nominal = {f.name: use[f.name] + steer.get(f.name, 0) for f in flav}
    budget = rest - sum(steer.values())
    short: list[str] = []
    for f in sorted(flav, key=lambda f: (-nominal[f.name] % f.unit, f.unit, f.name)):
        top = -nominal[f.name] % f.unit
        if top and top <= budget:
            nominal[f.name] += top
            budget -= top
        elif top:
            short.append(f.name)
    spread, left = whole_split(budget, {f.name: float(f.capacity) for f in flav}, {f.name: f.unit for f in flav},
                               dict.fromkeys(nominal))
    for f in flav:
        nominal[f.name] += spread[f.name]
    if left:
        nominal[short[0] if short else min(flav, key=lambda f: (f.unit, f.name)).name] += left
    return nominal


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


def _limits(q: QuotaPlan, flav: list[FlavorPool], nominal: dict[str, int],
            used: Mapping[tuple[str, str, str], int], steered: Mapping[str, int]) -> list[FlavorQuota]:
    names = [f.name for f in flav]
    use = {f: used.get((q.cluster, f, q.team), 0) for f in names}
    capacity = {f.name: float(f.capacity) for f in flav}
    borrow: dict[str, int | None] = dict.fromkeys(nominal)
    if q.borrowing_limit is not None:
        need = {f: max(0, use[f] - nominal[f]) for f in names}
        if sum(need.values()) > q.borrowing_limit:   # the plan never does this; keep the sum exact anyway
            need = split(q.borrowing_limit, {f: float(n) for f, n in need.items()})
        extra = split(q.borrowing_limit - sum(need.values()), capacity)
        borrow = {f: need[f] + extra.get(f, 0) for f in names}
    lend: dict[str, int | None] = dict.fromkeys(nominal)
    first = {f: steered.get(f, 0) for f in names}      # lent where cohort-mates borrow (<= the limit)
    if q.lending_limit is not None:
        free = {f: max(0, nominal[f] - use[f]) - first[f] for f in names}
        left = q.lending_limit - sum(first.values())
        then = fill(left, [(f, free[f]) for f in names])
        left -= sum(then.values())
        rest = fill(left, [(f, nominal[f] - first[f] - then[f]) for f in names])
        lend = {f: first[f] + then[f] + rest[f] for f in names}
    return [FlavorQuota(q.cluster, q.team, q.accelerator, f, nominal[f], borrow[f], lend[f], use[f], first[f])
            for f in names]
