"""Step 7 of the planner: the frozen `Plan` of a state: placements, why the rest waits, pool targets,
per-cluster quotas and cost."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .reasons import pending_reasons
from .state import PlanState, amount
from .types import HOURS_PER_MONTH, Cost, Pending, Placement, Plan, PoolPlan, QuotaPlan


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


def fill(total: int, order: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Give `total` to keys in the given order, each up to its cap; what is left over is not given."""
    out: dict[str, int] = {}
    for key, cap in order:
        take = max(0, min(cap, total))
        out[key] = out.get(key, 0) + take
        total -= take
    return out


def cluster_quotas(st: PlanState) -> list[QuotaPlan]:
    """Each team's quota split over the clusters that have its accelerator, so that the parts sum to the
    team's quota and Kueue, which borrows only inside one cluster, admits what the plan placed there.

    1. Teams using at least their nominal (borrowers): nominal split in proportion to use; what they use
       above it in a cluster is that cluster's borrowing demand in their cohort tree.
    2. Every other team (lenders, in name order): each cluster first gets what the team uses there; the
       rest of its nominal goes first to clusters where cohort-mates borrow, at most what the team may lend
       (min(lending_limit, unused nominal)), then in proportion to each cluster's capacity (pool max).
       The ledger never lets a domain borrow more than its members may lend fleet-wide, so step 2 covers
       every cluster's demand.
    3. Lending limits go first where the team's steered quota is lent, then to other unused nominal, then to
       the rest of its nominal (never above a cluster's nominal); borrowing limits are what the plan borrows
       in the cluster (at most the team's limit)."""
    used: dict[tuple[str, str, str], int] = defaultdict(int)
    for lv in st.live.values():
        used[(lv.info.team, lv.option.accelerator, lv.pool.pool.cluster)] += amount(lv.info, lv.option)
    capacity: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for ps in st.pools.values():
        if ps.pool.status != "down":
            capacity[ps.pool.accelerator][ps.pool.cluster] += ps.pool.max * ps.pool.unit_accelerators
    domain = st.quota.domain
    entries = [(name, acc) for name in sorted(st.teams) for acc in sorted(st.teams[name].quota)
               if capacity.get(acc)]
    # 1. borrowers
    nominal_of: dict[tuple[str, str], dict[str, int]] = {}
    demand: dict[tuple[str | None, str, str], int] = defaultdict(int)      # (domain, acc, cluster) -> borrowed
    for name, acc in entries:
        clusters = sorted(capacity[acc])
        use = {c: used.get((name, acc, c), 0) for c in clusters}
        q = st.teams[name].quota[acc]
        if sum(use.values()) >= q.nominal and sum(use.values()) > 0:
            nominal_of[(name, acc)] = split(q.nominal, {c: float(u) for c, u in use.items()})
            for c in clusters:
                demand[(domain.get(name), acc, c)] += use[c] - nominal_of[(name, acc)][c]
    # 2. lenders
    steered: dict[tuple[str, str], dict[str, int]] = {}
    for name, acc in entries:
        if (name, acc) in nominal_of:
            continue
        clusters = sorted(capacity[acc])
        use = {c: used.get((name, acc, c), 0) for c in clusters}
        q = st.teams[name].quota[acc]
        rest = q.nominal - sum(use.values())
        d = domain.get(name)
        lendable = min(rest, q.nominal if q.lending_limit is None else q.lending_limit)
        steer = fill(lendable, [(c, demand[(d, acc, c)]) for c in clusters]) if d is not None else {}
        for c, n in steer.items():
            demand[(d, acc, c)] -= n
        spread = split(rest - sum(steer.values()), dict(capacity[acc]))
        nominal_of[(name, acc)] = {c: use[c] + steer.get(c, 0) + spread.get(c, 0) for c in clusters}
        steered[(name, acc)] = steer
    # 3. limits
    out = []
    for name, acc in entries:
        clusters = sorted(capacity[acc])
        q = st.teams[name].quota[acc]
        nominal = nominal_of[(name, acc)]
        use = {c: used.get((name, acc, c), 0) for c in clusters}
        lend: dict[str, int | None] = dict.fromkeys(clusters)
        if q.lending_limit is not None:
            first = steered.get((name, acc), {})
            free = {c: max(0, nominal[c] - use[c]) - first.get(c, 0) for c in clusters}
            left = q.lending_limit - sum(first.values())
            then = fill(left, [(c, free[c]) for c in clusters])
            left -= sum(then.values())
            more = fill(left, [(c, nominal[c] - first.get(c, 0) - then[c]) for c in clusters])
            lend = {c: first.get(c, 0) + then[c] + more[c] for c in clusters}
        for c in clusters:
            borrow = None if q.borrowing_limit is None else min(q.borrowing_limit, max(0, use[c] - nominal[c]))
            out.append(QuotaPlan(c, name, acc, nominal[c], borrow, lend[c]))
    return sorted(out, key=lambda q: (q.cluster, q.team, q.accelerator))


def summarize(st: PlanState, placements: list[Placement], pending: list[Pending]) -> Plan:
    pools = []
    by_cluster: dict[str, float] = defaultdict(float)
    total = 0.0
    for key in sorted(st.pools, key=lambda k: (st.pools[k].pool.cluster, st.pools[k].pool.name)):
        ps = st.pools[key]
        target = ps.final_target()
        hourly = target * ps.unit_hourly_usd
        pools.append(PoolPlan(ps.pool.cluster, ps.pool.name, ps.pool.min, ps.pool.max, target, ps.used_units(),
                              ps.pool.unit_accelerators, ps.unit_hourly_usd, hourly))
        by_cluster[ps.pool.cluster] += hourly
        total += hourly
    by_team: dict[str, float] = {t: 0.0 for t in st.teams}
    for p in placements:
        by_team[p.job.split("/")[0]] += p.hourly_usd
    attributed = sum(p.hourly_usd for p in placements)
    cost = Cost(total, total * HOURS_PER_MONTH, max(0.0, total - attributed), by_team, dict(by_cluster))
    preemptions = sorted(st.outcome.preemptions, key=lambda p: (p.job, p.by))
    return Plan(tuple(placements), tuple(pending), tuple(preemptions), tuple(pools), tuple(cluster_quotas(st)), cost)


def freeze(st: PlanState) -> Plan:
    """The plan of the state as it stands (the state is not changed)."""
    placements = []
    base = {p.job: p for p in st.base.placements} if st.base else {}
    stay = st.outcome.stay_reason
    for job_id, lv in st.live.items():
        before = base.get(job_id)
        same = before is not None and (before.cluster, before.pool, before.units) == (
            lv.pool.pool.cluster, lv.pool.pool.name, lv.units)
        status = "kept" if lv.kept or same else ("moved" if before is not None else "new")
        reason = lv.reason if status == "moved" else stay.get(job_id, "") if lv.kept else ""
        placements.append(Placement(job_id, lv.pool.pool.cluster, lv.pool.pool.name, lv.option.index, lv.units,
                                    lv.gang.accelerators, status, lv.hourly_usd, reason))
    return summarize(st, sorted(placements, key=lambda p: p.job), pending_reasons(st))
