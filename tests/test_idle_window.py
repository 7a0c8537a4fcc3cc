"""The scale-down window counts a unit idle only while nothing runs on it (reconcile/pools.py): a unit a copy
still occupies (a victim the plan preempts at its checkpoint, a running job it leaves pending) is not idle,
so the pool does not shrink the moment that copy leaves, whatever the window."""

from __future__ import annotations

from typing import Any

from kube_objects import job_objects
from test_reconcile_decide import FACTS, KNOBS, NOW, at, cluster, plan, pool, slice_nodes, snap

from reconciler.plan.types import Pending
from reconciler.reconcile.decide import LoopMemory, decide


def _on_slice(unit: int) -> list[dict[str, Any]]:
    objs = job_objects("vision", "eval", "v5p")
    objs[0]["metadata"]["annotations"] = {"fleet.dev/units": str(unit)}
    return objs


def test_a_unit_a_running_copy_occupies_is_not_idle_while_it_runs() -> None:
    """`vision/eval` runs on slice 0; the plan leaves it pending (over budget: a running job is kept). The loop
    counted slice 0 idle from the first cycle, asked after 30 minutes to release it under the running job, and
    released it as soon as the job left, without the window that lets the next job reuse it."""
    running = snap(cluster("a", *slice_nodes("v5p", 0), *_on_slice(0)))
    p = plan(pending=(Pending("vision/eval", ("over budget",)),), pools=(pool("a", "v5p", 0),))
    first = decide(p, running, LoopMemory(), KNOBS, NOW, jobs=FACTS)
    assert "a/v5p/0" not in first.memory.idle_since
    later = decide(p, running, first.memory, KNOBS, at(40), jobs=FACTS)
    assert [a for a in later.actions if a.kind == "resize"] == []
    gone = snap(cluster("a", *slice_nodes("v5p", 0)))
    freed = decide(p, gone, later.memory, KNOBS, at(45), jobs=FACTS)
    assert [a for a in freed.actions if a.kind == "resize"] == [] and freed.memory.idle_since["a/v5p/0"] == at(45)
    ripe = decide(p, gone, freed.memory, KNOBS, at(75), jobs=FACTS)
    assert [(a.kind, a.target) for a in ripe.actions] == [("resize", 0)]
