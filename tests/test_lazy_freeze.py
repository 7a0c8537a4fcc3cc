"""Issue 22 item 5: the improvement phase (reconciler/plan/improve.py) judges each run by `state_key`, read from
its state, and freezes only the plan it keeps (summary.freeze: the pending jobs' reasons, the per-cluster quotas
and the pools' plans). These check that this changes no plan: the key read from the state is the key of the
frozen plan, and a run whose moves were all undone freezes to the plan it had before them, reasons included."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.plan import plan as plan_greedy
from reconciler.plan.greedy import place_all
from reconciler.plan.improve import FFD, SIZE, finish, plan_key, polish, state_key
from reconciler.plan.live import LiveInputs, Running
from reconciler.plan.state import FAIR, Fleet, PlanState, Strategy
from reconciler.plan.summary import freeze
from reconciler.plan.types import Plan
from reconciler.sources import read_worktree
from reconciler.validate import Validated

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from generate import generate

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 23, 8, tzinfo=UTC)
CAT = load_catalog()


def fleets() -> list[tuple[str, Validated, Plan | None, LiveInputs | None]]:
    """The example fleet and two small generated ones (the improvement phase runs on them), from git and from what
    runs: every second placed job of the plan from git running, with some minutes behind it."""
    out: list[tuple[str, Validated, Plan | None, LiveInputs | None]] = [
        ("example", pipeline.check(read_worktree(ROOT), CAT), None, None)]
    for size in ((3, 24, 4, 80, 3), (4, 30, 5, 100, 5)):
        out.append((f"generated {size}", pipeline.check({k: t.encode() for k, t in generate(*size).items()}, CAT),
                    None, None))
    for name, v, _, _ in list(out):
        first = plan_greedy(v)
        kinds = {j.id: j.kind for j in v.loaded.jobs}
        running = {p.job: Running(p.job, p.cluster, p.pool, p.units) for p in first.placements[::2]
                   if kinds.get(p.job) != "inference"}
        minutes = {j: 23.0 * (i % 7) for i, j in enumerate(sorted(running))}
        out.append((f"{name}, from what runs", v, None, LiveInputs(NOW, running, run_minutes=minutes)))
    return out


def runs(v: Validated, base: Plan | None, live: LiveInputs | None) -> list[PlanState]:
    """One greedy run per strategy the improvement phase tries (a re-pack leads with the default run's jobs)."""
    if live is not None:
        from reconciler.plan.live import live_base, live_validated
        v = live_validated(v, live)
        base = live_base(v, base, live)
    fleet = Fleet.of(v, live)
    out = []
    for strategy in (FAIR, SIZE, FFD, None):
        if strategy is None:
            strategy = Strategy(name="repack", order="fair", lead=tuple(sorted(out[0].live)))
        st = PlanState(fleet, base, strategy)
        place_all(st)
        out.append(st)
    return out


def test_the_key_read_from_a_runs_state_is_the_key_of_its_frozen_plan() -> None:
    checked = 0
    for name, v, base, live in fleets():
        for st in runs(v, base, live):
            assert state_key(st, 7) == plan_key(st, freeze(st), 7), (name, st.strategy.name)
            ranked = finish(st, 7)                               # after eject-and-insert too
            assert ranked[0] == plan_key(st, freeze(st), 7), (name, st.strategy.name)
            ranked = polish(ranked)                              # and after the cost moves and compaction
            assert ranked[0] == plan_key(st, ranked[1], 7), (name, st.strategy.name)
            checked += 1
    assert checked == 24


def test_a_run_whose_moves_were_all_undone_freezes_to_the_plan_it_had_before_them() -> None:
    """A move that places a pending job and takes it out again (`moves.restore`) drops the reasons recorded when
    the job was decided (the example's default run from git does); `finish` brings them back when no move was
    kept, so the plan is the run's own."""
    undone = []
    for name, v, base, live in fleets():
        for st in runs(v, base, live):
            before, waits = freeze(st), dict(st.outcome.waits)
            finish(st, 0)
            after = freeze(st)
            if after.placements != before.placements or after.pools != before.pools:
                continue   # a move was kept: the plan is the moved state's
            undone.append((name, st.strategy.name))
            assert st.outcome.waits == waits, (name, st.strategy.name)
            assert after.to_json() == before.to_json(), (name, st.strategy.name)
    assert ("example", "fair") in undone and len(undone) >= 4
