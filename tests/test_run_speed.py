"""A job runs `duration_hours` on its first option and `duration_hours / relative_speed` on another
(`resolve.run_hours`), as `fleet simulate` runs it and as placement already ranks cost per hour of work. Before
2026-12-07 every end, backfill, quota hold, run cost and Slurm time limit took the duration whatever the option:
a job backfilled on an option at 0.5 ran into the reservation it was to end before, and Slurm killed a job placed
on it halfway (tests/test_slurm.py).

The fleet is tests/test_reserve.py's: six 8-GPU H100 nodes, `a` (2 h) and `b` (6 h) running on nodes 0-3, `big`
reserving nodes 0, 1, 4, 5 from 2 h; `slow` (team lang, class low, like `short`) asks 8 H200s first (lang has
no H200 quota) or 8 H100s at a relative speed."""

from __future__ import annotations

import json

import pytest
from test_reserve import CLUSTER, PRIO, QUEUE, RUNNING

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan import starts
from reconciler.plan.planner import plan, plan_with_state
from reconciler.plan.types import Plan
from reconciler.resolve import run_hours
from reconciler.validate import Validated

from builders import job, with_files


def slow(name: str, team: str, hours: float, speed: float, count: int = 8, body: str = "priority: low\n") -> str:
    """A job asking `count` H200s first (its team has no H200 quota) or `count` H100s at `speed`."""
    return (f"name: {name}\nteam: {team}\noptions:\n  - {{accelerator: nvidia-h200-141gb, count: {count}}}\n"
            f"  - {{accelerator: nvidia-h100-80gb, count: {count}, relative_speed: {speed}}}\n"
            f"duration_hours: {hours}\nimage: img:1\n{body}")


def validated(jobs: dict[str, tuple[int, str]], raw: dict[str, str], nodes: int = 6, team: str = "") -> Validated:
    """test_reserve.fleet with `raw` job files (path: text) beside."""
    changes: dict[str, str | None] = {
        "policies/priorities.yaml": PRIO, "fleet/clusters/gke-usc1.yaml": CLUSTER.replace("NODES", str(nodes)),
        "fleet/clusters/onprem-sjc.yaml": None, "jobs/vision/train.yaml": None, **raw}
    for name, (count, body) in jobs.items():
        owner = team or ("lang" if "priority: low" in body else "vision")
        changes[f"jobs/{owner}/{name}.yaml"] = job(name, team=owner, count=count, body=body)
    v = check(with_files(changes), load_catalog())
    assert not v.errors, [p.message for p in v.errors]
    return v


def queued(speed: float) -> Plan:
    """`a` and `b` kept from the base plan, then the queue and `slow` (1.5 h) submitted (test_reserve.queued)."""
    base = plan(validated(RUNNING, {}))
    return plan(validated({**RUNNING, **QUEUE}, {"jobs/lang/slow.yaml": slow("slow", "lang", 1.5, speed)}), base)


def pending(p: Plan) -> dict[str, dict[str, object]]:
    return {d["job"]: d for d in json.loads(p.to_json())["pending"]}


def placed(p: Plan) -> dict[str, tuple[int, ...]]:
    return {x.job: x.units for x in p.placements}


def test_run_hours_is_the_duration_over_the_options_speed() -> None:
    assert run_hours(6.0, 1.0) == 6.0 and run_hours(6.0, 0.8) == 7.5 and run_hours(None, 0.5) is None


def test_a_job_backfills_reserved_units_only_if_its_run_on_that_option_ends_before_the_reservation() -> None:
    fast = queued(speed=1.0)         # 1.5 h on H100: ends by `big`'s start at 2 h, so it backfills node 5
    assert placed(fast)["lang/slow"] == (5,) and placed(fast)["lang/short"] == (4,)
    slow = queued(speed=0.5)         # 1.5 h of work take 3 h at 0.5: it would still run when `big` starts
    assert "lang/slow" not in placed(slow) and placed(slow)["lang/short"] == (4,)
    waits = pending(slow)
    assert waits["vision/big"]["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [0, 1, 4, 5]}
    # `b`'s two nodes free at 6 h go to `long` and `nodur`, ahead of it in the queue; `long`'s at 11 h to it
    assert (waits["lang/long"]["expected_start"], waits["lang/slow"]["expected_start"]) == (6.0, 11.0)
    why = waits["lang/slow"]["reasons"]
    assert isinstance(why, list) and any("reserved for vision/big" in r and "it runs 3 h there (1.5 h at "
                                         "relative_speed 0.5), ending after that" in r for r in why), why


def test_a_teams_quota_hold_keeps_out_a_job_whose_run_on_that_option_ends_after_the_held_start() -> None:
    """test_reserve's quota case: vision's quota is held for `big` from 2 h. `qslow` (1.5 h of work) ends by then on
    an option at 1.0 and backfills, as `qshort` does; at 0.5 it would still hold 8 GPUs of the quota at 2 h."""
    running = {"a": (32, "duration_hours: 2\n"), "b": (32, "duration_hours: 6\n")}
    queue = {"big": (64, "duration_hours: 10\n"), "qshort": (8, "duration_hours: 1\npriority: low\n")}
    base = plan(validated(running, {}, nodes=20, team="vision"))
    for speed, backfills in ((1.0, True), (0.5, False)):
        v = validated({**running, **queue}, {"jobs/vision/qslow.yaml": slow("qslow", "vision", 1.5, speed)},
                      nodes=20, team="vision")
        p = plan(v, base)
        assert ("vision/qslow" in placed(p)) is backfills, speed
        assert "vision/qshort" in placed(p) and pending(p)["vision/big"]["expected_start"] == 2.0
    why = pending(p)["vision/qslow"]["reasons"]
    assert isinstance(why, list) and any("quota is held for vision/big" in r and "it runs 3 h there" in r
                                         for r in why), why


def test_running_work_on_a_slower_option_ends_later_in_the_expected_starts() -> None:
    """`a` (2 h of work) runs on an option at 0.5: it ends at 4 h, and `big`, behind it, is expected then."""
    running = {"b": RUNNING["b"]}
    a = {"jobs/vision/a.yaml": slow("a", "vision", 2, 0.5, count=16, body="")}
    base = plan(validated(running, a))
    assert {x.job: x.option for x in base.placements} == {"vision/a": 1, "vision/b": 0}
    p = plan(validated({**running, "big": QUEUE["big"]}, a), base)
    assert pending(p)["vision/big"]["expected_start"] == 4.0


MIX = ("name: mix\nteam: lang\noptions:\n  - {accelerator: nvidia-h100-80gb, count: 8}\n"
       "  - {accelerator: nvidia-h100-80gb, count: 4, relative_speed: 0.5}\nduration_hours: 1.5\nimage: img:1\n"
       "priority: low\n")


def test_a_job_backfills_on_an_option_that_ends_in_time_though_its_slower_one_of_that_accelerator_does_not() -> None:
    """`mix` runs 1.5 h on 8 H100s (its first option), 3 h on 4 H100s at 0.5: on its first option it ends by
    `big`'s start at 2 h, so it backfills now, as `short` does. Until the review of 2026-12-07
    `PlanState.backfill_until` took the slowest option of the pool's accelerator for every option: it waited 6 h,
    told "it runs 3 h there"."""
    base = plan(validated(RUNNING, {}))
    p = plan(validated({**RUNNING, **QUEUE}, {"jobs/lang/mix.yaml": MIX}), base)
    assert placed(p) == {"vision/a": (0, 1), "vision/b": (2, 3), "lang/mix": (4,), "lang/short": (5,)}
    assert next(x.option for x in p.placements if x.job == "lang/mix") == 0
    assert pending(p)["vision/big"]["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [0, 1, 4, 5]}


def test_jobs_alike_but_for_an_options_speed_are_told_their_own_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the first `starts.QUEUED` pending jobs, jobs alike share one reckoning (`starts._annotate`'s memo).
    `zfast` and `zslow` differ only in their H100 option's speed: 0.9 h of work runs 0.9 h at 1.0, ending by `big`'s
    start (2 h) when `short`'s node frees at 1 h; 1.8 h at 0.5, which ends after it, so `zslow` waits for `b`'s
    nodes at 6 h. Until the review of 2026-12-07 the memo's key left the speed out: `zslow` was told 1 h too."""
    monkeypatch.setattr(starts, "QUEUED", 0)     # as in a fleet with more pending jobs than that
    base = plan(validated(RUNNING, {}))
    raw = {f"jobs/lang/{n}.yaml": slow(n, "lang", 0.9, speed) for n, speed in (("zfast", 1.0), ("zslow", 0.5))}
    p = plan(validated({**RUNNING, **QUEUE, "mid": (8, "duration_hours: 1.5\npriority: low\n")}, raw), base)
    assert placed(p) == {"vision/a": (0, 1), "vision/b": (2, 3), "lang/mid": (4,), "lang/short": (5,)}
    waits = pending(p)
    assert (waits["lang/zfast"]["expected_start"], waits["lang/zslow"]["expected_start"]) == (1.0, 6.0)


def test_a_reservation_ends_when_the_option_it_starts_with_ends() -> None:
    """`big` (10 h of work) fits at 2 h on nodes 0, 1, 4, 5 with its first option (32 GPUs at 1.0); a second option
    of the same accelerator runs at 0.5. Its reservation ends at 12 h, not at 22 h (the slower option's run): the
    end is what later holds and expected starts count on."""
    big = ("name: big\nteam: vision\noptions:\n  - {accelerator: nvidia-h100-80gb, count: 32}\n"
           "  - {accelerator: nvidia-h100-80gb, count: 24, relative_speed: 0.5}\nduration_hours: 10\nimage: img:1\n")
    base = plan(validated(RUNNING, {}))
    queue = {k: q for k, q in QUEUE.items() if k != "big"}
    _, st = plan_with_state(validated({**RUNNING, **queue}, {"jobs/vision/big.yaml": big}), base)
    r = st.reservation_of["vision/big"]
    assert (r.units, r.start_hours, r.end_hours) == ((0, 1, 4, 5), 2.0, 12.0)
