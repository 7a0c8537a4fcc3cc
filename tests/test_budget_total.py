"""The planner's running total of each team's spend per hour (PlanState.team_hourly) comes back exactly to where
it was after placements are taken out and put back in another order: the improvement phase and the preemption
rule try and undo moves by the hundred, and a float total drifted in its last digits, so a team's budget room
depended on the order of what was tried (a budget met to the cent could then refuse a job or admit it)."""

from __future__ import annotations

from pathlib import Path

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan.planner import plan_with_state
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]


def test_a_teams_spend_comes_back_exactly_after_moves_tried_and_undone() -> None:
    v = check(read_worktree(ROOT), load_catalog())     # the example fleet: many jobs of several teams
    _, st = plan_with_state(v)
    teams = sorted({lv.info.team for lv in st.live.values()})
    before = {t: st.budget_left(t) for t in teams}
    jobs = sorted(st.live)
    assert len(jobs) >= 3
    for order in (jobs, jobs[::-1], jobs[1::2] + jobs[::2]):
        taken = [st.evict(j) for j in order]
        for lv in reversed(taken[len(taken) // 2:]):
            st.put_back(lv)
        for lv in taken[: len(taken) // 2]:
            st.put_back(lv)
        assert {t: st.budget_left(t) for t in teams} == before
