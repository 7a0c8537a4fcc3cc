"""`fleet simulate`: replay a trace through the planner and the loop against simulated clusters (DESIGN 4c).

trace.py (the JSON Lines format, loaded with located errors), generate.py (seeded realistic traces),
alibaba.py (the Alibaba cluster-trace-gpu-v2023 importer), faults.py (the fault model and its sources),
cluster.py (simulated clusters: units, provisioning, observe as a Snapshot), engine.py (the discrete-event
loop and its accounting), loop.py (the `fleet` policy: the reconcile loop's cycle with a simulated
Actuator), policies.py (fifo, kueue, cheapest), results.py (JSON, Markdown), html.py (the offline HTML
report), run.py (the command line's edge: files in and out).
"""

from __future__ import annotations

from collections.abc import Sequence

from .engine import Engine
from .faults import FaultModel
from .results import Result, result
from .trace import Trace

DEFAULT_INTERVAL_S = 60
"""The loop's interval when policies/placement.yaml sets no `reconcile.interval_seconds` (its default)."""


def interval_of(trace: Trace) -> int:
    """`reconcile.interval_seconds` of policies/placement.yaml, when the placement model has it."""
    knobs = getattr(trace.validated.loaded.placement, "reconcile", None)
    return int(getattr(knobs, "interval_seconds", DEFAULT_INTERVAL_S) or DEFAULT_INTERVAL_S)


def default_days(trace: Trace) -> float:
    """The trace's span in whole days (at least one)."""
    last = max((tj.submit_minutes for tj in trace.jobs), default=0.0)
    return float(max(1, -(-int(last) // 1440)))


def simulate(trace: Trace, policies: Sequence[str], *, days: float, seed: int, faults: FaultModel,
             interval_s: int) -> list[Result]:
    """Each policy on the same trace, fleet, faults and seed (a fresh engine per policy)."""
    from .policies import make

    out = []
    for name in policies:
        sim = Engine(trace, faults, seed, days, interval_s)
        sim.run(make(name, sim))
        out.append(result(sim, name, days, seed))
    return out
