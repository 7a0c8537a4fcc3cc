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
from ..resolve import domain, spread_of

__all__ = ["domain", "group_replicas", "replica_id", "spread_of"]


def replica_id(job_id: str, index: int) -> str:
    return f"{job_id}#{index}"


def group_replicas(accelerators_per_unit: int, units: int, count: int) -> int:
    """How many replicas of an option of `count` accelerators a placement of `units` units taking
    `accelerators_per_unit` of each holds (a replica takes whole units, or part of one unit)."""
    return max(1, accelerators_per_unit * units // count) if count else 1
