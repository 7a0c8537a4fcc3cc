"""One reconcile cycle's thinking, shared by `fleet reconcile` (loop.py, real clusters) and `fleet simulate`
(simulate/loop.py, simulated ones). Pure.

    step(head, observed, memory, last_snapshot, last_plan, knobs, now) -> Step(snapshot, plan, decision)

0. the observation split (observe/owners.py): only objects in their team's namespace are the teams' jobs;
   the others, impostors, are kept out of everything below and named in the decision's notes;
1. the observation completed: what the previous snapshot knew and this one cannot (an unreachable cluster's
   last running jobs, when a cordon was first seen: `observe.model.carry_over`), and when each unreachable
   cluster was first seen so (`decide.since_unreachable`, from the memory);
2. the plan from git (`head`) and what runs: `pipeline.plan` with the previous cycle's plan as the base, from
   the snapshot with the stale copies of moved jobs hidden (`decide.fenced_view`); without the pending jobs'
   expected starts and measured reasons, which nothing here reads (`fleet plan`, `explain` and `status` give them);
3. the decision: that plan against what runs (`decide.decide`, with each quota's split over the flavors,
   `render.quota_digests`, and where the caller gives them, the other Kueue objects as git decides them,
   `kueue`: `render.kueue_config`, which needs the catalog) -> the actions, and the memory as if every one
   of them succeeds; a Slurm cluster's pools are never resized and it has no Kueue (DESIGN 4e), so no resize
   or Kueue update is decided for it (`fixed_partitions`): its jobs are decided like every other cluster's.

What the caller does with it is its own: acting through its actuator (`act.execute`), then `decide.settle`
to take back what did not get done. Two loops that call this with the same inputs decide the same; nothing
here reads a clock, a file or the network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from .. import pipeline
from ..observe.model import Snapshot, carry_over, partial_as_unreachable
from ..observe.owners import Impostor, notes, owned_snapshot
from ..plan.types import Plan
from ..render import quota_digests
from ..validate import Validated
from .decide import Decision, Knobs, LoopMemory, decide, fenced_view, job_facts, since_unreachable


@dataclass(frozen=True)
class Step:
    snapshot: Snapshot       # the observation completed (step 1): what the cycle planned and decided from
    plan: Plan
    decision: Decision
    impostors: tuple[Impostor, ...] = ()     # objects with Fleet's labels outside their team's namespace


def step(head: Validated, observed: Snapshot, memory: LoopMemory, *, last_snapshot: Snapshot | None,
         last_plan: Plan | None, knobs: Knobs, now: datetime, kueue: Mapping[str, list[str]] | None = None,
         lap: Callable[[str], None] | None = None) -> Step:
    """One cycle's snapshot, plan and decision (module docstring). `lap(stage)` is called after each stage
    (`observe`, `plan`, `decide`), for the caller's timings."""
    owned = owned_snapshot(head, partial_as_unreachable(observed))
    snapshot = since_unreachable(carry_over(last_snapshot, owned.snapshot), memory, now)
    if lap:
        lap("observe")
    planned = pipeline.plan(head, base=last_plan, observed=fenced_view(snapshot, memory), now=now,
                            for_people=False)
    if lap:
        lap("plan")
    accelerators = {c.name: frozenset(p.accelerator for p in c.pools) for c in head.loaded.clusters}
    decision = fixed_partitions(decide(planned, snapshot, memory, knobs, now, jobs=job_facts(head),
                                       accelerators=accelerators,
                                       flavors=quota_digests(head, planned), kueue=kueue), head)
    if owned.impostors:
        decision = replace(decision, notes=(*notes(owned.impostors), *decision.notes))
    if lap:
        lap("decide")
    return Step(snapshot, planned, decision, owned.impostors)


def fixed_partitions(decision: Decision, head: Validated) -> Decision:
    """`decision` less the resizes and Kueue updates of Slurm clusters, and what its memory says was asked of them."""
    slurm = {c.name for c in head.loaded.clusters if c.provider == "slurm"}
    if not slurm:
        return decision
    mem = decision.memory
    mem = mem.model_copy(update={
        "targets": {k: v for k, v in mem.targets.items() if k.split("/", 1)[0] not in slurm},
        "quotas": {k: v for k, v in mem.quotas.items() if k not in slurm}})   # `kueue` has none (kueue_config)
    return replace(decision, memory=mem, actions=tuple(
        a for a in decision.actions if not (a.kind in ("resize", "kueue") and a.cluster in slurm)))
