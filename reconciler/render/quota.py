"""Per-flavor quotas: each team's per-cluster quota of the plan, split over the pools (flavors) of that
accelerator in the cluster. Pure.

The plan (`plan.quotas`, see `plan/summary.py::cluster_quotas`) already splits every team's quota over the
clusters so that the parts add up to `policies/teams.yaml`; here each part is split once more, with whole
numbers that add up exactly (so the sum over clusters and flavors of `nominalQuota` is the team's quota):

1. usage: what the plan placed for the team on each pool (units x accelerators per unit);
2. nominal: if usage in the cluster reaches the cluster's nominal, the nominal is split in proportion to
   usage (never above a flavor's usage; the rest is borrowed there). Otherwise every flavor first gets its
   usage, and the remainder goes first, up to what the team may lend, to flavors where cohort-mates of the
   team borrow (so Kueue finds the lendable quota in the flavor the borrower needs), then in proportion to
   pool capacity (max units);
3. borrowingLimit: each flavor exactly what the plan borrows there, any remainder of the cluster's limit by
   capacity; None (unlimited) stays None;
4. lendingLimit: the cluster's limit goes first to the quota steered to cohort-mates' demand in step 2
   (step 2 steers at most what the team may lend), then to other unused nominal, then to the rest of the
   nominal; never above a flavor's nominal. None stays None.
Ties break by pool name everywhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

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


def usage(plan: Plan) -> dict[tuple[str, str, str], int]:
    """(cluster, pool, team) -> accelerators the plan placed there."""
    used: dict[tuple[str, str, str], int] = defaultdict(int)
    for p in plan.placements:
        used[(p.cluster, p.pool, p.job.split("/")[0])] += len(p.units) * p.accelerators_per_unit
    return used


def flavor_quotas(plan: Plan, pools: Mapping[tuple[str, str], list[tuple[str, int]]],
                  domain: Mapping[str, str | None]) -> list[FlavorQuota]:
    """Split every `plan.quotas` entry over the pools of its accelerator in its cluster.

    `pools[(cluster, accelerator)]` lists (pool, capacity in accelerators at max), sorted by pool name;
    `domain[team]` is the root of the team's cohort tree (None: no cohort, never lends or borrows)."""
    used = usage(plan)
    entries = sorted(plan.quotas, key=lambda q: (q.cluster, q.accelerator, q.team))
    # Pass 1: teams at or over their cluster nominal; their borrowing per flavor is the demand lenders serve.
    demand: dict[tuple[str | None, str, str], int] = defaultdict(int)   # (domain, cluster, pool) -> borrowed
    nominal_of: dict[tuple[str, str, str], dict[str, int]] = {}
    for q in entries:
        flav = pools.get((q.cluster, q.accelerator), [])
        use = {f: used.get((q.cluster, f, q.team), 0) for f, _ in flav}
        if flav and sum(use.values()) >= q.nominal:
            nominal = split(q.nominal, {f: float(u) for f, u in use.items()})
            nominal_of[(q.cluster, q.team, q.accelerator)] = nominal
            for f, u in use.items():
                demand[(domain.get(q.team), q.cluster, f)] += u - nominal[f]
    # Pass 2: everyone else fills its flavors with usage, then steers what it may lend to the demand.
    steered: dict[tuple[str, str, str], dict[str, int]] = {}
    for q in entries:
        flav = pools.get((q.cluster, q.accelerator), [])
        key = (q.cluster, q.team, q.accelerator)
        if not flav or key in nominal_of:
            continue
        use = {f: used.get((q.cluster, f, q.team), 0) for f, _ in flav}
        rest = q.nominal - sum(use.values())
        d = domain.get(q.team)
        lendable = rest if q.lending_limit is None else min(rest, q.lending_limit)
        steer = fill(lendable, [(f, demand[(d, q.cluster, f)]) for f, _ in flav]) if d is not None else {}
        steered[key] = steer
        for f, n in steer.items():
            demand[(d, q.cluster, f)] -= n
        left = rest - sum(steer.values())
        spread = split(left, {f: float(cap) for f, cap in flav})
        nominal_of[key] = {f: use[f] + steer.get(f, 0) + spread.get(f, 0) for f, _ in flav}
    out: list[FlavorQuota] = []
    for q in entries:
        flav = pools.get((q.cluster, q.accelerator), [])
        if not flav:
            continue
        key = (q.cluster, q.team, q.accelerator)
        out.extend(_limits(q, flav, nominal_of[key], used, steered.get(key, {})))
    return sorted(out, key=lambda f: (f.cluster, f.team, f.accelerator, f.flavor))


def _limits(q: QuotaPlan, flav: list[tuple[str, int]], nominal: dict[str, int],
            used: Mapping[tuple[str, str, str], int], steered: Mapping[str, int]) -> list[FlavorQuota]:
    use = {f: used.get((q.cluster, f, q.team), 0) for f, _ in flav}
    borrow: dict[str, int | None] = dict.fromkeys(nominal)
    if q.borrowing_limit is not None:
        need = {f: max(0, use[f] - nominal[f]) for f, _ in flav}
        if sum(need.values()) > q.borrowing_limit:   # the plan never does this; keep the sum exact anyway
            need = split(q.borrowing_limit, {f: float(n) for f, n in need.items()})
        extra = split(q.borrowing_limit - sum(need.values()), {f: float(cap) for f, cap in flav})
        borrow = {f: need[f] + extra.get(f, 0) for f, _ in flav}
    lend: dict[str, int | None] = dict.fromkeys(nominal)
    if q.lending_limit is not None:
        first = {f: steered.get(f, 0) for f, _ in flav}      # lent where cohort-mates borrow (<= the limit)
        free = {f: max(0, nominal[f] - use[f]) - first[f] for f, _ in flav}
        left = q.lending_limit - sum(first.values())
        then = fill(left, [(f, free[f]) for f, _ in flav])
        left -= sum(then.values())
        rest = fill(left, [(f, nominal[f] - first[f] - then[f]) for f, _ in flav])
        lend = {f: first[f] + then[f] + rest[f] for f, _ in flav}
    return [FlavorQuota(q.cluster, q.team, q.accelerator, f, nominal[f], borrow[f], lend[f], use[f])
            for f, _ in flav]
