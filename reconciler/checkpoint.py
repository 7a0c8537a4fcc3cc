"""Work at risk: what a disruption (stop, preemption, move, fault) of a running job loses. Pure; one meaning,
used by every stage that counts lost work (the reconcile loop's actions, the planner's forced moves and victim
ranking, `fleet simulate`'s accounting, the impact and status reports).

A job states `checkpoint_minutes: N` (DESIGN 2: "most work a disruption loses"):
- N > 0: it checkpoints every N minutes of running time, counted from the start of its current run (the
  same model `fleet simulate` runs and issue 15's victim ranking uses). Stopped after `ran` minutes, it
  loses the minutes since its last checkpoint: `ran` modulo N, so never more than N and never more than it
  ran. When the running time is not known (a plan read from git alone, a cluster no longer read, a report
  before the change), the most it can lose is stated instead: N, the bound DESIGN names.
- N == 0: it checkpoints continuously (a service, a stateless batch): a disruption loses nothing.
- None (the field is absent): it never checkpoints: it loses all it ran; when the running time is not known
  the loss is unknown (None), never invented as zero or as a full interval.
"""

from __future__ import annotations

import math
from typing import overload

EPSILON = 1e-9      # a run within this fraction of an interval short of a checkpoint has just checkpointed
                    # (float noise: 0.3 minutes are 3 intervals of 0.1, not 2 and a whole interval lost)


@overload
def minutes_at_risk(ran_minutes: float, checkpoint_minutes: float | None) -> float: ...
@overload
def minutes_at_risk(ran_minutes: None, checkpoint_minutes: float | None) -> float | None: ...
def minutes_at_risk(ran_minutes: float | None, checkpoint_minutes: float | None) -> float | None:
    """Minutes of work a disruption loses now (see the module docstring); None: unknown (no checkpoints and
    no known running time). A negative running time (a clock skew) counts as 0."""
    if checkpoint_minutes is not None and checkpoint_minutes < 0:
        raise ValueError(f"checkpoint_minutes must be >= 0, not {checkpoint_minutes}")
    if ran_minutes is None:
        return None if checkpoint_minutes is None else float(checkpoint_minutes)
    ran = max(0.0, float(ran_minutes))
    if checkpoint_minutes is None:
        return ran
    if checkpoint_minutes == 0:
        return 0.0
    step = float(checkpoint_minutes)
    since = math.fmod(ran, step)                # exact, whatever the ratio of the two
    return 0.0 if step - since <= EPSILON * step else since


@overload
def work_at_risk(ran_minutes: float, checkpoint_minutes: float | None, accelerators: float) -> tuple[float, float]:
    ...
@overload
def work_at_risk(ran_minutes: None, checkpoint_minutes: float | None,
                 accelerators: float) -> tuple[float | None, float | None]: ...
def work_at_risk(ran_minutes: float | None, checkpoint_minutes: float | None,
                 accelerators: float) -> tuple[float | None, float | None]:
    """(minutes, accelerator-hours) a disruption loses now: `minutes_at_risk` x `accelerators` / 60 (both
    None when unknown). Unrounded: callers round for display."""
    minutes = minutes_at_risk(ran_minutes, checkpoint_minutes)
    return (None, None) if minutes is None else (minutes, minutes * accelerators / 60)
