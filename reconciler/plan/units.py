"""When a job keeps its place: the one rule behind a placement's `status` (the planner, summary.py and
exact.py), the moves of the diff (the pull-request comment's "Moves N running jobs") and the moves `fleet
apply` checks against the reviewed plan (apply/safety.py). Pure.

A pool's units are interchangeable when they are nodes of one node group (GPU and Trainium pools): any node
does as well as another, so the planner numbers the used ones 0..k-1 (`summary.node_numbers`) and a unit
index is bookkeeping, never a place. A TPU pool's unit is a slice, its own GKE node pool `<pool>-s<i>`
(DESIGN.md 4b): its index names physical capacity, and a job given another slice moves. The catalog says
which an accelerator is (`kind`, carried by the resolved pool).
"""

from __future__ import annotations

from ..resolve import ResolvedPool
from .types import Placement


def interchangeable(pool: ResolvedPool) -> bool:
    """Whether the units of `pool` are interchangeable (nodes of one node group), not slices (module docstring)."""
    return pool.kind != "tpu"


def stays(before: Placement, after: Placement, units_interchangeable: bool) -> bool:
    """Whether `after` leaves the job where `before` had it: the same cluster, pool and option, the same gang
    shape (accelerators per unit and number of units), and the same units, unless the pool's units are
    interchangeable (`interchangeable`), when other unit numbers are the same place."""
    if (before.cluster, before.pool, before.option, before.accelerators_per_unit, len(before.units)) != \
            (after.cluster, after.pool, after.option, after.accelerators_per_unit, len(after.units)):
        return False
    return units_interchangeable or before.units == after.units


def units_gone(before: tuple[int, ...], after: tuple[int, ...], units_interchangeable: bool) -> int:
    """How many of a group's units on one pool `after` no longer holds of `before`: as many fewer where the pool's
    nodes are interchangeable (a GPU node group), else the units themselves (a TPU slice is a place). 0: `after`
    holds all of `before` (diff.py `_within` for a service's group that grew or shrank; impact.py `_leaving`)."""
    if units_interchangeable:
        return max(0, len(before) - len(after))
    return len(set(before) - set(after))
