"""`fleet cost --history` reuses a point across duration changes no decision read (history_reuse.py): every point
it gives equals the point computed fresh, whether reused or not, and tracked durations replay exactly or refuse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reconciler import tracked
from reconciler.catalog import load_catalog
from reconciler.history_reuse import Reuse
from reconciler.load import ParseCache
from reconciler.pipeline import cost_point
from reconciler.plan import reserve
from reconciler.plan.state import Live, PlanState
from reconciler.sources import read_worktree

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def example() -> dict[str, bytes]:
    return {p: d for p, d in read_worktree(ROOT).items() if p.split("/")[0] in ("fleet", "policies", "jobs")}


def retime(files: dict[str, bytes], job: str, hours: float | None) -> dict[str, bytes]:
    path = f"jobs/{job}.yaml"
    text = re.sub(r"(?m)^duration_hours:.*\n", "", files[path].decode())
    return {**files, path: (text + ("" if hours is None else f"duration_hours: {hours}\n")).encode()}


def raise_quota(files: dict[str, bytes]) -> dict[str, bytes]:
    teams = files["policies/teams.yaml"].decode()
    m = re.search(r"\{nominal: (\d+)", teams)
    assert m is not None
    return {**files, "policies/teams.yaml": (teams[:m.start(1)] + str(int(m.group(1)) + 8) + teams[m.end(1):]).encode()}


def reprioritise(files: dict[str, bytes], job: str) -> dict[str, bytes]:
    path = f"jobs/{job}.yaml"
    text = re.sub(r"(?m)^priority:.*\n", "", files[path].decode())
    return {**files, path: (text + "priority: low\n").encode()}


def test_every_point_equals_the_fresh_one_reused_or_not(example: dict[str, bytes]) -> None:
    """A history of the example's kinds of change: durations no decision read (reused), a duration a reservation's
    backfill reads (computed), a duration removed, a quota and a priority changed (computed), each point equal
    to `cost_point` of the same files computed on its own."""
    catalog, cache, reuse = load_catalog(), ParseCache(), Reuse()
    files = example
    steps = [lambda f: f,
             lambda f: retime(f, "multimodal/captioner-finetune", 30),      # read by no decision
             lambda f: retime(f, "evals/checkpoint-eval-sweep", 0.5),       # nor this, on top of it
             lambda f: retime(f, "multimodal/captioner-finetune", 300),     # now it no longer backfills
             lambda f: retime(f, "rl/ppo-hparam-sweep", 3),                 # read by no decision of that plan
             lambda f: retime(f, "interp/circuit-analysis", None),          # no duration: never a reuse
             raise_quota,
             lambda f: reprioritise(f, "interp/circuit-analysis")]
    kinds = []
    for i, step in enumerate(steps):
        files = step(files)
        before = reuse.reused
        got = reuse.point(str(i), "d", "s", files, catalog, cache)
        assert got == cost_point(str(i), "d", "s", files, catalog), f"step {i}"
        kinds.append(reuse.reused > before)
    assert kinds == [False, True, True, False, True, False, False, False]
    assert reuse.tracking


def test_a_duration_used_in_a_way_no_trace_replays_is_computed_and_ends_tracking(
        example: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """A duration formatted (or converted, or pickled) refuses to be tracked: the point is computed without the
    trace, equal to the fresh one, and the process stops tracking."""
    end_hours = reserve.end_hours

    def formatting(st: PlanState, lv: Live, credible: bool = False) -> float | None:
        _ = f"{lv.info.job.duration_hours}"     # what a reason could do
        return end_hours(st, lv, credible)

    monkeypatch.setattr(reserve, "end_hours", formatting)
    catalog, reuse = load_catalog(), Reuse()
    files = retime(example, "multimodal/captioner-finetune", 30)
    assert reuse.point("a", "d", "s", example, catalog) == cost_point("a", "d", "s", example, catalog)
    assert not reuse.tracking
    assert reuse.point("b", "d", "s", files, catalog) == cost_point("b", "d", "s", files, catalog)
    assert reuse.reused == 0


def test_a_tracked_float_is_the_float_and_its_trace_replays_exactly() -> None:
    me = object()
    a, b = tracked.Tracked(0.1, ("var", 0, me)), tracked.Tracked(0.2, ("var", 1, me))
    with tracked.recording() as trace:
        total = a + b                   # 0.30000000000000004: the same bits as the floats'
        diff = 1 - a
        assert total == 0.1 + 0.2 and type(total) is tracked.Tracked
        assert sorted([b, total, diff]) == [0.2, 0.1 + 0.2, 1 - 0.1]
        assert max(0.0, diff - 0.5) > 0.0
        assert {total: 1}.get(0.1 + 0.2) == 1
    assert tracked.holds(trace, [0.1, 0.2], me)
    assert tracked.holds(trace, [0.1, 0.25], me) is False         # the sum's hash changes
    with tracked.recording() as trace:
        assert (a * 3 < b) is False and (-a < 0)
    assert tracked.holds(trace, [0.1, 0.2], me) and tracked.holds(trace, [0.07, 0.2], me)   # 0.21 is not < 0.2 either
    assert not tracked.holds(trace, [0.05, 0.2], me)              # 0.15 < 0.2 flips
    assert not tracked.holds(trace, [0.1, 0.2], object())      # another computation's variables: never
    for use in (str, repr, float, int, round, lambda x: f"{x:g}", lambda x: x // 1, abs, lambda x: x.real):
        with tracked.recording(), pytest.raises(tracked.Poisoned):
            use(a)
    with pytest.raises(tracked.Poisoned):
        _ = a < 1                                             # outside recording(): nobody would see the answer


def test_a_replay_that_fails_does_not_hold_and_is_no_error() -> None:
    """A division by what the new inputs make zero, or an expression deeper than the recursion limit, is a
    commit computed afresh (`holds` False), not an exception (an error point of `fleet cost --history`)."""
    me = object()
    a, b = tracked.Tracked(2.0, ("var", 0, me)), tracked.Tracked(1.0, ("var", 1, me))
    with tracked.recording() as trace:
        assert 1 / (a - b) > 0.5
    assert tracked.holds(trace, [2.0, 1.0], me) and not tracked.holds(trace, [3.0, 3.0], me)
    with tracked.recording() as trace:
        total = a
        for _ in range(3000):
            total = total + b
        assert total < 1e9
    assert not tracked.holds(trace, [2.0, 1.0], me)
