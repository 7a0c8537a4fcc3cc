"""The simulator runs the reconcile loop's own cycle, and skips a cycle only where it would decide nothing: nothing
happened since the last, the last did nothing, and no clock of the loop runs out (`simulate/loop.py`
`FleetLoop.step`). Each cycle it skips is run here in full beside it: it must decide no action. Before the
forty-second session a cycle that acted was taken as done, and the next (a Kueue quota split that orders the
jobs it started first, an elastic gang that grows once it runs, a resize) waited for the next event: 5 of 99
skipped cycles would have acted on a 400-job, 2-day trace (review finding)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.simulate import loop as simloop
from reconciler.simulate.engine import Engine
from reconciler.simulate.faults import FaultModel
from reconciler.simulate.generate import generate
from reconciler.simulate.policies import make
from reconciler.simulate.trace import load_trace, write_lines
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_cycle_the_simulator_skips_would_decide_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    files = read_worktree(ROOT)
    catalog = load_catalog()
    v = check({p: b for p, b in files.items() if not p.startswith("jobs/")}, catalog)
    trace = load_trace("t.jsonl", write_lines(generate(v, JOBS, DAYS, SEED, 0.9, 0.2)).encode(), files, catalog)
    assert not isinstance(trace, list), trace
    seen: Counter[str] = Counter()
    acted: list[str] = []
    real = simloop.FleetLoop.step

    def step(self: simloop.FleetLoop, sim: Engine, now_s: int) -> None:
        if not sim.changed and now_s < self.due_s and self.last_plan is not None:
            seen["skipped"] += 1
            full = simloop.step(simloop._head(sim), sim.observe(), self.memory, last_snapshot=self.last_snapshot,
                                last_plan=self.last_plan, knobs=self.knobs, now=simloop.at(now_s))
            acted.extend(f"{now_s / 3600:.2f} h: {a.kind} {a.job or a.pool}" for a in full.decision.actions)
        else:
            seen["run"] += 1
        real(self, sim, now_s)

    monkeypatch.setattr(simloop.FleetLoop, "step", step)
    sim = Engine(trace, FaultModel(), SEED, DAYS, 300)
    sim.run(make("fleet", sim))
    assert seen["skipped"] > 0 and seen["run"] > 0, seen       # the rule was exercised both ways
    assert acted == [], acted[:5]


SEED, JOBS, DAYS = 3, 400, 2.0
