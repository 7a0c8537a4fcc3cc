"""Replica spread (issue 11, defect 6): the replicas of an inference service over failure domains.

The rule. An inference job with two or more replicas spreads them over zones by default (`spread: zone`),
or over clusters (`spread: cluster`); `spread: none` keeps the old behaviour (every replica in the one pool
that is best for the whole job). A zone is the cluster's `zone`; a cluster without one is its own zone
(its nodes may sit in several zones of its region, which Fleet does not choose). Losing one domain then
never takes every replica of the service while the fleet has room for a replica elsewhere.

How the planner does it. The job is placed replica by replica (`state.split`: one `JobInfo` per replica,
id `<job>#<i>`, kept together in the queue order): each replica takes the best pool, by the planner's usual
key, in a domain that holds none of its siblings yet; when there is no such pool:
- by default (no `spread:` in the job file: best effort) it takes the best pool anywhere, and the plan
  flags the job (`not_spread` on its placements) when every replica ended in one domain;
- with an explicit `spread: zone` or `spread: cluster` (a rule) it takes a pool in a domain of its
  siblings only if they already span two domains; otherwise it waits, with the reason in the plan.
The default yields to the job file (issue 20): for a job with a `data_region`, best effort means a pool
in the data region, in a new domain if one there has room, else in a sibling's domain, before any pool
outside the region (`place.try_place`); the default spread never takes a replica out of its data region.
A stated `spread:` is a rule and does not yield (with `data_residency: preferred` a replica may then run
outside the region; `fleet validate` warns when the region's pools cannot meet the rule, validate_jobs.py).
Moves of the improvement phase never put the replicas back in one domain (`PlanState.spread_blocks`), the
plans of the improvement phase and the exact mode are compared by the same count of services that could
spread and did not (`improve.plan_key`, exact.py), after work and work away from its data, before cost.
Replicas in one pool share one placement in the plan (one entry per job and pool group, sorted by job,
cluster, pool), each group a Deployment or LeaderWorkerSet of its own (render/service.py).
"""

from __future__ import annotations

# the rule itself lives with the other placement rules in resolve.py, where validate reads it too
from collections import defaultdict
from dataclasses import replace
from typing import Any

from ..resolve import domain, spread_of
from .types import Placement, Plan

__all__ = ["domain", "group_replicas", "replica_id", "split_base", "spread_of"]


def replica_id(job_id: str, index: int) -> str:
    return f"{job_id}#{index}"


def group_replicas(accelerators_per_unit: int, units: int, count: int) -> int:
    """How many replicas of an option of `count` accelerators a placement of `units` units taking
    `accelerators_per_unit` of each holds (a replica takes whole units, or part of one unit)."""
    return max(1, accelerators_per_unit * units // count) if count else 1


def split_base(fleet: Any, base: Plan | None) -> list[Placement]:
    """The base plan's placements as the planner places jobs: a spread job's groups cut into one
    placement per replica (its units in order, a replica's share of each), named by replica id; a job
    whose replicas spread in the base but not now keeps no placement (it is placed again)."""
    if base is None:
        return []
    groups: dict[str, list[Placement]] = defaultdict(list)
    for p in base.placements:
        groups[p.job].append(p)
    out: list[Placement] = []
    for job_id, mine in groups.items():
        first = fleet.by_job.get(job_id)
        if first is None or first.id == job_id:
            if len(mine) == 1 or first is None:
                out.extend(mine)
            continue
        seen = {(c, pool): n for c, pool, n, _ in fleet.live.serving.get(job_id, ())} if fleet.live else {}
        if len(mine) == 1 and not mine[0].units:   # a service running on one pool, units not known (live.py):
            share = mine[0].hourly_usd / max(1, len(first.siblings))   # each replica its object runs takes
            runs = seen.get((mine[0].cluster, mine[0].pool), len(first.siblings))   # free units there
            out.extend(replace(mine[0], job=rid, hourly_usd=share) for rid in first.siblings[:runs])
            continue
        if not any(p.units for p in mine):         # a service running on several pools, units not known: each
            ids = iter(first.siblings)             # group keeps as many replicas as its object runs
            for p in sorted(mine, key=lambda p: (p.cluster, p.pool)):
                for _ in range(seen.get((p.cluster, p.pool), 1)):
                    rid = next(ids, None)
                    if rid is not None:
                        out.append(replace(p, job=rid))
            continue
        ids = iter(first.siblings)
        for p in sorted(mine, key=lambda p: (p.cluster, p.pool, p.units)):
            opt = first.options[p.option] if p.option < len(first.options) else None
            n = group_replicas(p.accelerators_per_unit, len(p.units), opt.count) if opt else 1
            size = len(p.units) // n if len(p.units) % n == 0 else len(p.units)
            for k in range(0, len(p.units), size):
                rid = next(ids, None)
                if rid is not None:
                    out.append(replace(p, job=rid, units=p.units[k:k + size],
                                       hourly_usd=p.hourly_usd * size / len(p.units)))
    return out
