"""Steps 6-7 of the planner: pool targets, per-cluster quotas and cost, from the final placements."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from .types import HOURS_PER_MONTH, Cost, Pending, Placement, Plan, PoolPlan, QuotaPlan

if TYPE_CHECKING:
    from .planner import Planner


def split(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Split `total` into whole numbers proportional to `weights` (largest remainder, ties by name), so the
    parts always add up to `total`."""
    keys = sorted(weights)
    if not keys:
        return {}
    wsum = sum(weights.values())
    if wsum <= 0:
        weights, wsum = {k: 1.0 for k in keys}, float(len(keys))
    exact = {k: total * weights[k] / wsum for k in keys}
    parts = {k: int(exact[k]) for k in keys}
    for k in sorted(keys, key=lambda k: (-(exact[k] - parts[k]), k))[: total - sum(parts.values())]:
        parts[k] += 1
    return parts


def cluster_quotas(pl: Planner) -> list[QuotaPlan]:
    """Each team's quota split over the clusters that have its accelerator: first what the plan uses there,
    the rest in proportion to each cluster's capacity of that accelerator. Parts sum to the team's quota."""
    used: dict[tuple[str, str, str], int] = defaultdict(int)
    for lv in pl.live.values():
        used[(lv.info.team, lv.option.accelerator, lv.pool.pool.cluster)] += lv.option.count * lv.info.job.replicas
    capacity: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for ps in pl.pools.values():
        if ps.pool.status != "down":
            capacity[ps.pool.accelerator][ps.pool.cluster] += ps.pool.max * ps.pool.unit_accelerators
    out = []
    for team_name in sorted(pl.teams):
        team = pl.teams[team_name]
        for acc in sorted(team.quota):
            q = team.quota[acc]
            clusters = capacity.get(acc, {})
            if not clusters:
                continue
            use = {c: used.get((team_name, acc, c), 0) for c in clusters}
            if sum(use.values()) >= q.nominal:
                nominal = split(q.nominal, {c: float(u) for c, u in use.items()})
            else:
                rest = split(q.nominal - sum(use.values()), dict(clusters))
                nominal = {c: use[c] + rest[c] for c in clusters}
            lend_total = q.nominal if q.lending_limit is None else q.lending_limit
            lend = split(lend_total, {c: float(n) for c, n in nominal.items()})
            for c in sorted(clusters):
                borrow = None if q.borrowing_limit is None else min(q.borrowing_limit, max(0, use[c] - nominal[c]))
                lending = None if q.lending_limit is None else min(lend[c], nominal[c])
                out.append(QuotaPlan(c, team_name, acc, nominal[c], borrow, lending))
    return sorted(out, key=lambda q: (q.cluster, q.team, q.accelerator))


def summarize(pl: Planner, placements: list[Placement], pending: list[Pending]) -> Plan:
    pools = []
    by_cluster: dict[str, float] = defaultdict(float)
    total = 0.0
    for key in sorted(pl.pools, key=lambda k: (pl.pools[k].pool.cluster, pl.pools[k].pool.name)):
        ps = pl.pools[key]
        target = ps.final_target()
        hourly = target * ps.unit_hourly_usd
        pools.append(PoolPlan(ps.pool.cluster, ps.pool.name, ps.pool.min, ps.pool.max, target, ps.used_units(),
                              ps.pool.unit_accelerators, ps.unit_hourly_usd, hourly))
        by_cluster[ps.pool.cluster] += hourly
        total += hourly
    by_team: dict[str, float] = {t: 0.0 for t in pl.teams}
    for p in placements:
        by_team[p.job.split("/")[0]] += p.hourly_usd
    attributed = sum(p.hourly_usd for p in placements)
    cost = Cost(total, total * HOURS_PER_MONTH, max(0.0, total - attributed), by_team, dict(by_cluster))
    preemptions = sorted(pl.preemptions, key=lambda p: (p.job, p.by))
    return Plan(tuple(placements), tuple(pending), tuple(preemptions), tuple(pools), tuple(cluster_quotas(pl)), cost)
