"""The one object of a placed training or batch job, or of a Ray job of any kind: a JobSet (jobset.py) or a
KubeRay RayJob / RayService (ray.py), at the size the plan gave it (an elastic gang: plan/workloads.py), stamped
with what planning from what runs reads back. Pure. `fleet render` and the reconcile loop's starts
(reconcile/manifests.py) both build it here, so what the loop applies is what render writes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..models import Job, Team
from ..resolve import ResolvedOption
from ..validate_workloads import elastic_options
from .facts import PoolFacts
from .jobset import jobset, stamp
from .ray import ray_object

GANG_KINDS = frozenset({"JobSet", "RayJob", "RayService"})
"""Kinds whose `spec.suspend` Kueue owns once it admits them: created once, never applied again."""


def is_gang(job: Job) -> bool:
    """The job is one gang object (not an inference service's Deployments / LeaderWorkerSets)."""
    return job.kind != "inference" or job.framework == "ray"


def sized(opt: ResolvedOption, job: Job, units: int) -> ResolvedOption:
    """An elastic job's option (resolved at `workers.min` units) at `units` units."""
    assert job.workers is not None
    per = replace(opt, count=opt.count // job.workers.min, slices=1 if opt.shape is not None else opt.slices)
    return elastic_options((per,), units)[0]


def gang_object(job: Job, team: Team, priority: str, opt: ResolvedOption, f: PoolFacts,
                units: tuple[int, ...]) -> dict[str, Any]:
    if job.workers is not None:
        opt = sized(opt, job, len(units))
    obj = ray_object(job, team, priority, opt, f) if job.framework == "ray" else jobset(job, team, priority, opt, f)
    return stamp(obj, job, units)
