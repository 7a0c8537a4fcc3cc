"""Step 7 of the planner: the frozen `Plan` of a state: placements, why the rest waits, pool targets,
per-cluster quotas and cost."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace

from .quotasplit import Hold, Part, Share, split_all
from .reasons import pending_reasons
from .spread import domain
from .state import Live, PlanState, outside
from .types import HOURS_PER_MONTH, Cost, Pending, Placement, Plan, PoolPlan, Preemption, QuotaPlan
from .units import interchangeable, stays


def cluster_quotas(st: PlanState, placements: list[Placement]) -> list[QuotaPlan]:
    """Each team's quota split over the clusters that have its accelerator, so that the parts sum to the
    team's quota and Kueue, which borrows only inside one cluster, admits what the plan placed there: the
    rules of quotasplit.py (within nominal highest priority first; a stable split by capacity, raised only
    where a cluster needs more; cohort-mates' borrowing covered by lenders' unused quota). Spot-only work charged
    to its team's `spot:` quota (`qkey`) holds none of the nominal: render gives the spot flavors that quota."""
    holds: dict[tuple[str, str], list[Hold]] = defaultdict(list)
    spot_holds: dict[tuple[str, str], list[Hold]] = defaultdict(list)
    for p in placements:
        info = st.fleet.by_job[p.job]
        acc = st.pools[p.pool_key].pool.accelerator
        (spot_holds if acc in info.spot_quota else holds)[(info.team, acc)].append(Hold.of(p, info.priority, p.cluster))
    capacity: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    spot_capacity: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for ps in st.pools.values():
        if ps.pool.status != "down":
            capacity[ps.pool.accelerator][ps.pool.cluster] += ps.pool.max * ps.pool.unit_accelerators
            if ps.pool.capacity == "spot":
                spot_capacity[ps.pool.accelerator][ps.pool.cluster] += ps.pool.max * ps.pool.unit_accelerators
    out: list[QuotaPlan] = []
    for acc in sorted(capacity):
        parts = [Part(c, w) for c, w in sorted(capacity[acc].items())]
        shares = [Share(name, st.quota.domain.get(name), q.nominal, q.borrowing_limit, q.lending_limit,
                        tuple(holds.get((name, acc), ())))
                  for name in sorted(st.teams) if (q := st.teams[name].quota.get(acc)) is not None]
        spot = spot_split(st, acc, [Part(c, w) for c, w in sorted(spot_capacity[acc].items())], spot_holds)
        for team, by_cluster in split_all(shares, parts).items():
            out.extend(QuotaPlan(c, team, acc, x.nominal, x.borrowing_limit, x.lending_limit, spot.get((team, c), 0))
                       for c, x in by_cluster.items())
    return sorted(out, key=lambda q: (q.cluster, q.team, q.accelerator))


def spot_split(st: PlanState, acc: str, parts: list[Part], holds: Mapping[tuple[str, str], list[Hold]]
               ) -> dict[tuple[str, str], int]:
    """(team, cluster) -> the cluster's part of the team's `spot:` quota of `acc`: split over the clusters with
    spot pools of it (`parts`, by capacity) by the rules of a team that neither lends nor borrows (quotasplit.py:
    a stable split, raised where its spot-only work runs), since Kueue charges a workload to the flavor it runs
    on and borrows only inside one cluster. Render puts each part in the cluster's spot flavors."""
    out: dict[tuple[str, str], int] = {}
    if not parts:
        return out
    for name in sorted(st.teams):
        q = st.teams[name].quota.get(acc)
        if q is None or not q.spot:
            continue
        share = Share(name, None, q.spot, None, None, tuple(holds.get((name, acc), ())))
        out.update(((name, c), x.nominal) for c, x in split_all([share], parts)[name].items() if x.nominal)
    return out


def summarize(st: PlanState, placements: list[Placement], pending: list[Pending],
              withdrawn: frozenset[str] = frozenset()) -> Plan:
    """The plan of these placements; `withdrawn`: victims the run placed again where they run (`freeze`), whose
    preemptions are not made."""
    pools = []
    by_cluster: dict[str, float] = defaultdict(float)
    total = idle = 0.0
    used_usd: dict[str, float] = defaultdict(float)
    for p in placements:   # by job id, summed per pool as cost/model.py does, so both idle figures agree
        used_usd[p.pool_key] += p.hourly_usd
    for key in sorted(st.pools, key=lambda k: (st.pools[k].pool.cluster, st.pools[k].pool.name)):
        ps = st.pools[key]
        target = ps.final_target()
        hourly = target * ps.unit_hourly_usd
        pools.append(PoolPlan(ps.pool.cluster, ps.pool.name, ps.pool.min, ps.pool.max, target, ps.used_units(),
                              ps.pool.unit_accelerators, ps.unit_hourly_usd, hourly,
                              "queued" if ps.pool.queued else "fixed"))
        by_cluster[ps.pool.cluster] += hourly
        total += hourly
        idle += max(0.0, hourly - used_usd[key])
    by_team: dict[str, float] = {t: 0.0 for t in st.teams}
    for p in placements:
        by_team[p.job.split("/")[0]] += p.hourly_usd
    cost = Cost(total, total * HOURS_PER_MONTH, idle, by_team, dict(by_cluster))
    preemptions = sorted({Preemption(st.jobs[p.job].parent, st.jobs[p.by].parent, p.reason, p.after_minutes)
                          for p in st.outcome.preemptions if p.job not in withdrawn},
                         key=lambda p: (p.job, p.by, p.reason))
    quotas = cluster_quotas(st, placements)
    return Plan(tuple(placements), tuple(pending), tuple(preemptions), tuple(pools), tuple(quotas), cost)


def node_numbers(st: PlanState) -> dict[str, dict[int, int]]:
    """Per pool of interchangeable units (`units.interchangeable`: GPU and Trainium nodes), each used unit's index
    in the plan: the used units renumbered 0..k-1 in order. Nodes of one node group are interchangeable, so
    this is bookkeeping only (no job moves: `units.stays`) and keeps every
    written unit below the pool's target (`PoolState.paid`). TPU slices keep their indices: slice `i` is the
    node pool `p-s<i>` (DESIGN.md 4b), so a freed slice below a used one is released, not renumbered."""
    out: dict[str, dict[int, int]] = {}
    for key, ps in st.pools.items():
        if interchangeable(ps.pool):
            full = ps.pool.unit_accelerators
            used = [i for i, f in enumerate(ps.free_acc) if f < full and i not in ps.blocked]
            if used and used[-1] >= len(used):
                out[key] = {u: i for i, u in enumerate(used)}
    return out


def freeze(st: PlanState) -> Plan:
    """The plan of the state as it stands (the state is not changed). The replicas of a spread job that
    share a pool are one placement (spread.py)."""
    placements = []
    base_jobs = {p.job for p in st.base.placements} if st.base else set()
    base = {(p.job, p.pool_key): p for p in st.base.placements} if st.base else {}
    stay = st.outcome.stay_reason
    preempted = {p.job: p.reason for p in st.outcome.preemptions}
    renumber = node_numbers(st)
    groups = group_lives(st)
    left = _left(st, groups)
    for (job_id, key), lives in groups.items():
        lv = lives[0]
        numbers = renumber.get(key)
        units = tuple(sorted(u if numbers is None else numbers[u] for x in lives for u in x.units))
        here = Placement(job_id, lv.pool.pool.cluster, lv.pool.pool.name, lv.option.index, units,
                         lv.gang.accelerators, "", sum(x.hourly_usd for x in lives))
        status, restart = _status(st, lives, here, base.get((job_id, key)), base_jobs, left)
        reasons = [x.reason if status == "moved" else stay.get(x.info.id, "") if x.kept else "" for x in lives]
        reason = restart or next((r for r in reasons if r), "")
        if status == "moved" and not reason and (why := next((preempted[x.info.id] for x in lives
                                                             if x.info.id in preempted), None)):
            reason = f"{why}; placed again on {here.cluster}/{here.pool}"   # a victim with room elsewhere
        placements.append(replace(here, status=status, reason=reason,
                                  outside_data_region=any(outside(x.info, x.pool) for x in lives)))
    placements = not_spread(st, placements)
    return summarize(st, sorted(placements, key=lambda p: (p.job, p.cluster, p.pool)), pending_reasons(st),
                     withdrawn_victims(st))


def _status(st: PlanState, lives: list[Live], here: Placement, before: Placement | None, base_jobs: set[str],
            left: set[str]) -> tuple[str, str]:
    """(status, restart reason) of one placement of the plan: the job's lives on one pool (`freeze`)."""
    lv, job_id = lives[0], here.job
    same = before is not None and stays(before, here, interchangeable(lv.pool.pool))
    kept = all(x.kept for x in lives)
    status = "kept" if kept or same else ("moved" if job_id in base_jobs else "new")
    restart = next((why for x in lives if (why := st.outcome.restarts.get(x.info.id))
                    and (kept or x.reason == why)), "")
    if restart:     # kept on its units, re-created there (sticky.py `restart_reason`), or where its pods fit
        status = "moved"
    if status == "moved" and lv.info.job.kind == "inference" and not any(x.reason for x in lives):
        if before is not None:         # a service where the base had it: it runs on with more or fewer replicas
            status = "kept"
        elif lv.info.siblings and job_id not in left:   # replicas added, none left a place: it grows here
            status = "kept" if any(x.kept for x in lives) else "new"
    return status, restart


def withdrawn_victims(st: PlanState) -> frozenset[str]:
    """The victims of the run's preemptions that it placed again where they run (the moves' eject-and-insert):
    `kept`, so not preempted, and left out of the plan's preemptions (`summarize`) and of the improvement phase's
    count of them (improve.state_key). Not a spread replica: a service's group where the base had it is `kept`
    whatever its replica count, with a replica that came from another pool (a move, whose preemption stands)."""
    out = []
    base_jobs = {p.job for p in st.base.placements} if st.base else set()
    for p in st.outcome.preemptions:
        lv = st.live.get(p.job)
        if lv is None or lv.info.siblings:
            continue
        before = next((b for b in st.base.placements if b.job == lv.info.parent and b.pool_key == lv.pool.pool.key),
                      None) if st.base else None
        here = Placement(lv.info.parent, lv.pool.pool.cluster, lv.pool.pool.name, lv.option.index, lv.units,
                         lv.gang.accelerators, "", lv.hourly_usd)
        if _status(st, [lv], here, before, base_jobs, set())[0] == "kept":
            out.append(p.job)
    return frozenset(out)


def _left(st: PlanState, groups: dict[tuple[str, str], list[Live]]) -> set[str]:
    """The spread jobs some replica of which left a place the base gave it: a pool of the base holds fewer of
    its units now. Of a service (`freeze`), only groups on pools the base did not give it are `moved` (and a
    group a replica was forced out of, with its reason); a group where the base had it runs on there, with more
    or fewer replicas (the loop compares services by replica count), and one elsewhere of a spread job none of
    whose replicas left a place holds replicas added (its `replicas` raised). Before 2026-12-07 every group of
    a service whose count changed was `moved`, with no reason, and notified as a move."""
    if st.base is None:
        return set()
    now: dict[tuple[str, str], int] = {}
    for (job_id, key), lives in groups.items():
        if lives[0].info.siblings:
            now[(job_id, key)] = sum(len(x.units) for x in lives)
    spread = {job_id for job_id, _ in now}
    return {p.job for p in st.base.placements if p.job in spread and now.get((p.job, p.pool_key), 0) < len(p.units)}


def group_lives(st: PlanState) -> dict[tuple[str, str], list[Live]]:
    """The live placements by (job id, pool key): a spread job's replicas in one pool are one placement."""
    groups: dict[tuple[str, str], list[Live]] = defaultdict(list)
    for lv in st.live.values():
        groups[(lv.info.parent, lv.pool.pool.key)].append(lv)
    return groups


def not_spread(st: PlanState, placements: list[Placement]) -> list[Placement]:
    """Flag the placements of a spread job whose replicas (two or more placed) all run in one domain."""
    where: dict[str, set[str]] = defaultdict(set)
    count: dict[str, int] = defaultdict(int)
    away: set[str] = set()
    for lv in st.live.values():
        if lv.info.siblings:
            where[lv.info.parent].add(domain(lv.pool.pool, lv.info.spread))
            count[lv.info.parent] += 1
            if outside(lv.info, lv.pool):
                away.add(lv.info.parent)
    out = []
    for p in placements:
        doms = where.get(p.job)
        if doms is not None and len(doms) == 1 and count[p.job] >= 2:
            info = st.fleet.by_job[p.job]
            how, region = info.spread, info.job.data_region
            home = f" in the job's data_region {region}" if region is not None and p.job not in away else ""
            kept = " and never takes a replica out of its data region" if home else ""
            p = replace(p, not_spread=f"all {count[p.job]} placed replicas run in {next(iter(doms))}: no pool "
                                      f"outside it{home} could take one (spread: {how} is best effort{kept}; "
                                      f"`spread: {how}` in the job file makes it a rule)")
        out.append(p)
    return out
