"""The improvement phase's cost moves take shortcuts that must never change a plan (improve.py `repack` stops a
re-pack once the jobs put back already cost what it would save; `worth_repacking` remembers which jobs free a
unit alone). Each is checked against the move without it, on fleets where cost moves are kept (the example and
bench/bench_quality.py's instances quota-7, -9, -35 and -44: each keeps a re-pack of two or three jobs; quota-1
and medium-12 did until a job's run on a slower option counted as longer, 2026-12-07: their plans keep none now)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import improve, plan
from reconciler.plan.moves import frees_unit
from reconciler.plan.planner import plan_with_state
from reconciler.sources import read_worktree
from reconciler.validate import Validated

ROOT = Path(__file__).resolve().parents[1]


def fleets() -> list[tuple[str, Validated]]:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_quality

    return [("example", check(read_worktree(ROOT), load_catalog())),
            *((f"{family}-{seed}", bench_quality.validated(getattr(bench_quality, family)(seed)))
              for family, seed in (("quota", 7), ("quota", 9), ("quota", 35), ("quota", 44), ("mixed", 9)))]


FLEETS = fleets()


def counting(monkeypatch: pytest.MonkeyPatch, name: str, counts: dict[str, int]) -> None:
    inner: Callable[..., bool] = getattr(improve, name)

    def counted(*args: Any, **kw: Any) -> bool:
        kept = inner(*args, **kw)
        counts[f"{name} {kept}"] = counts.get(f"{name} {kept}", 0) + 1
        return kept

    monkeypatch.setattr(improve, name, counted)


def test_a_repack_stopped_early_is_one_the_whole_move_would_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    counts: dict[str, int] = {}
    counting(monkeypatch, "repack", counts)
    stops: list[bool] = []
    whole = improve.eject_and_insert

    def watched(*args: Any, hopeless: Callable[[], bool] | None = None, **kw: Any) -> bool:
        def asked() -> bool:
            stops.append(hopeless())
            return stops[-1]
        return whole(*args, hopeless=asked if hopeless is not None else None, **kw)

    monkeypatch.setattr(improve, "eject_and_insert", watched)
    shortcut = {name: plan(v) for name, v in FLEETS}
    # moves kept (each of two or three jobs: the stop was asked and said no), and moves stopped
    assert counts.get("repack True", 0) >= 4 and any(stops) and not all(stops), counts

    def without(*args: Any, hopeless: Callable[[], bool] | None = None, **kw: Any) -> bool:
        return whole(*args, **kw)

    monkeypatch.setattr(improve, "eject_and_insert", without)
    for name, v in FLEETS:
        assert plan(v) == shortcut[name], name


def test_a_pair_is_repacked_when_it_frees_a_unit_that_not_both_jobs_free_alone() -> None:
    paths: dict[str, int] = {}
    for _, v in FLEETS:
        _, st = plan_with_state(v)
        placed = sorted((lv for lv in st.live.values() if not lv.kept), key=lambda lv: lv.info.id)
        alone: dict[str, bool] = {}
        for i, a in enumerate(placed):
            for b in placed[i + 1:]:
                pair = [a, b]
                first, second = frees_unit(st, [a]), frees_unit(st, [b])
                want = frees_unit(st, pair) and not (first and second)
                assert improve.worth_repacking(st, pair, alone) == want, (a.info.id, b.info.id)
                path = "both" if first and second else "one" if first or second else "pair" if want else "none"
                paths[path] = paths.get(path, 0) + 1
    assert set(paths) == {"both", "one", "pair", "none"}, paths   # every branch of the test taken
