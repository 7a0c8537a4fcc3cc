"""`checkpoint.work_at_risk`: the one meaning of "work lost since the last checkpoint" (issue 20), and the stages
that count lost work through it: the reconcile loop's decision, the planner's forced moves and victim ranking."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kube_objects import T0, job_objects, node

from reconciler.catalog import load_catalog
from reconciler.checkpoint import minutes_at_risk, work_at_risk
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_jobset, parse_node, parse_workload
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.plan.live import LiveInputs, lost_work
from reconciler.plan.types import Cost, LiveSummary, Placement, Plan, PoolPlan, Preemption
from reconciler.reconcile.decide import JobFacts, Knobs, LoopMemory, decide

from builders import ONPREM, TEAMS, with_files

# -- the function ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("ran", "checkpoint", "accelerators", "minutes", "hours"), [
    (120.0, 0, 8, 0.0, 0.0),            # checkpoints continuously: loses nothing, however long it ran
    (0.0, 0, 8, 0.0, 0.0),
    (120.0, None, 8, 120.0, 16.0),      # never checkpoints: loses all it ran (2 h x 8 accelerators)
    (0.0, None, 8, 0.0, 0.0),
    (45.0, 30, 8, 15.0, 2.0),           # checkpointed at 30: the 15 minutes since
    (29.0, 30, 4, 29.0, 29 * 4 / 60),   # ran less than one interval: all it ran
    (60.0, 30, 8, 0.0, 0.0),            # just checkpointed
    (89.0, 30, 60, 29.0, 29.0),
    (-3.0, 30, 8, 0.0, 0.0),            # a clock skew: nothing ran
    (-3.0, None, 8, 0.0, 0.0),
    (None, 30, 8, 30.0, 4.0),           # running time unknown: the most it can lose, one interval
    (None, 0, 8, 0.0, 0.0),
    (None, None, 8, None, None),        # no checkpoints, running time unknown: unknown, not invented
    (7.5, 2.5, 1, 0.0, 0.0),            # float multiples count as checkpointed, not as a whole interval lost
    (0.3, 0.1, 1, 0.0, 0.0),
    (1.0, 1e-310, 1, None, None),       # a tiny interval: less than one interval lost (checked below)
])
def test_work_at_risk_table(ran: float | None, checkpoint: float | None, accelerators: int,
                            minutes: float | None, hours: float | None) -> None:
    got = work_at_risk(ran, checkpoint, accelerators)
    if checkpoint is not None and 0 < checkpoint < 1e-300:
        assert got[0] is not None and 0 <= got[0] < checkpoint
    elif minutes is None:
        assert got == (None, None)
    else:
        assert got[0] == pytest.approx(minutes) and got[1] == pytest.approx(hours)
    assert minutes_at_risk(ran, checkpoint) == got[0]


def test_a_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="checkpoint_minutes must be >= 0"):
        minutes_at_risk(10.0, -1)


RAN = st.floats(min_value=0, max_value=10 * 365 * 24 * 60, allow_nan=False)
INTERVAL = st.floats(min_value=0, max_value=10 * 365 * 24 * 60, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(ran=RAN, interval=st.one_of(st.none(), INTERVAL), accelerators=st.integers(0, 4096))
def test_never_more_than_it_ran_nor_than_one_interval(ran: float, interval: float | None, accelerators: int) -> None:
    minutes, hours = work_at_risk(ran, interval, accelerators)
    assert 0 <= minutes <= ran
    if interval is not None:
        assert minutes <= interval
    assert hours == pytest.approx(minutes * accelerators / 60)


@settings(max_examples=200, deadline=None)
@given(ran=RAN, interval=st.floats(min_value=0.5, max_value=24 * 60), k=st.integers(0, 1000))
def test_it_loses_the_same_after_each_whole_interval(ran: float, interval: float, k: int) -> None:
    """Checkpoints every `interval` of running time: k more intervals change nothing (up to float noise)."""
    a, b = minutes_at_risk(ran, interval), minutes_at_risk(ran + k * interval, interval)
    assert min(abs(a - b), interval - abs(a - b)) <= 1e-6 * max(1.0, ran + k * interval)


# -- the reconcile loop's decision ----------------------------------------------------------------------------

NOW = T0.replace(tzinfo=UTC) + timedelta(minutes=200)


def _snap(*objs: dict[str, Any]) -> Snapshot:
    return Snapshot(observed_at=NOW, clusters=(ClusterObservation(
        name="a", status="ok", jobsets=tuple(parse_jobset(o) for o in objs if o["kind"] == "JobSet"),
        workloads=tuple(parse_workload(o) for o in objs if o["kind"] == "Workload"),
        nodes=tuple(parse_node(o) for o in objs if o["kind"] == "Node")),))


def _plan(*placements: Placement, preempted: tuple[Preemption, ...] = (), pools: tuple[PoolPlan, ...] = ()) -> Plan:
    return Plan(placements, (), preempted, pools, (), Cost(0, 0, 0))


# Running two hours at NOW: PodsReady two minutes after admission.
TWO_HOURS = job_objects("vision", "train", "v5p", admitted=200 - 120 - 2)
SLICES = [node(f"v5p-s{u}-h0", node_pool=f"v5p-s{u}", ready=u != 0) for u in (0, 1)]
MOVED = Placement("vision/train", "a", "v5p", 0, (1,), 8, "moved", 10.0, "slice 0 of a/v5p failed")
POOLS = (PoolPlan("a", "v5p", 0, 8, 1, 1, 16, 10.0, 10.0),)


@pytest.mark.parametrize(("checkpoint", "minutes", "hours"), [(0, 0, 0), (None, 120, 16), (30, 0, 0), (50, 20, 2.667)])
def test_a_move_decided_by_the_loop_counts_the_work_since_the_last_checkpoint(
        checkpoint: float | None, minutes: float, hours: float) -> None:
    """Issue 20: a job that ran 2 h on 8 accelerators with `checkpoint_minutes: 0` (it checkpoints continuously)
    was logged as 16 accelerator-hours lost: `0` was read as "never checkpoints"."""
    facts = {"vision/train": JobFacts("training", checkpoint, 10)}
    d = decide(_plan(MOVED, pools=POOLS), _snap(*TWO_HOURS, *SLICES), LoopMemory(), Knobs(), NOW, jobs=facts)
    (move,) = [a for a in d.actions if a.kind == "move"]
    assert (move.lost_minutes, move.lost_accelerator_hours) == (minutes, hours)


def test_a_preemption_of_a_job_that_checkpoints_continuously_loses_nothing() -> None:
    facts = {"vision/train": JobFacts("training", 0, 10)}
    d = decide(_plan(preempted=(Preemption("vision/train", "vision/urgent", "needs the slice"),)),
               _snap(*TWO_HOURS), LoopMemory(), Knobs(), NOW, jobs=facts)
    (stop,) = d.actions
    assert (stop.kind, stop.lost_minutes, stop.lost_accelerator_hours) == ("stop", 0, 0)


# -- the planner's forced moves -------------------------------------------------------------------------------

def test_a_forced_move_of_a_job_without_checkpoints_whose_run_is_unknown_is_unknown_not_zero() -> None:
    live = LiveInputs(NOW, run_minutes={"vision/seen": 90.0})
    unknown = lost_work(live, "vision/gone", None, 8)
    assert (unknown.minutes, unknown.accelerator_hours) == (None, None)
    assert lost_work(live, "vision/seen", None, 8).accelerator_hours == 12.0          # all it ran
    assert lost_work(live, "vision/seen", 0, 8).accelerator_hours == 0.0               # continuous
    assert lost_work(live, "vision/gone", 20, 8).minutes == 20                         # the most it loses
    (line,) = LiveSummary(lost_work=(unknown, lost_work(live, "vision/seen", 50, 8))).lines()
    assert line.startswith("work lost since the last checkpoint: 5.3 accelerator-hours + 1 job(s) unknown")
    assert "vision/gone (unknown: no checkpoint_minutes, running time not observed)" in line
    assert "vision/seen (40 min)" in line


# -- the planner's victim ranking, from git alone -------------------------------------------------------------

CAT = load_catalog()
SOLO = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", "nvidia-h100-80gb: {nominal: 16}").replace(
    "    cohort: research\n    weight: 2\n", "    weight: 2\n")   # vision alone: 16 H100s, no cohort


def _gpu(name: str, **extra: object) -> str:
    return "\n".join([f"name: {name}", "team: vision", "options:", "  - {accelerator: nvidia-h100-80gb, count: 8}",
                      "image: img:1", *(f"{k}: {v}" for k, v in extra.items())]) + "\n"


def _plan_repo(jobs: dict[str, str], base: Plan | None = None, changes: dict[str, str] | None = None) -> Plan:
    files: dict[str, str | bytes | None] = {f"jobs/{k}.yaml": v for k, v in jobs.items()}
    files |= {"jobs/vision/train.yaml": None, "policies/teams.yaml": SOLO, **(changes or {})}
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    return plan(v, base)


def test_from_git_alone_a_victim_that_never_checkpoints_is_not_taken_first_as_if_it_lost_nothing() -> None:
    """Two opportunistic jobs hold vision's 16 H100s; the production job needs 8: one victim. The one without
    `checkpoint_minutes` loses all it ran (unknown), the other at most 30 minutes: that one goes (absent was
    read as 0, the least work lost, and the job that never checkpoints was preempted)."""
    low = {"vision/ckpt": _gpu("ckpt", priority="opportunistic", checkpoint_minutes=30),
           "vision/never": _gpu("never", priority="opportunistic")}
    base = _plan_repo(low)
    assert {p.job for p in base.placements} == set(low)
    # a spot job, within vision's spot quota of 16 that the victims hold (issue 22: spot-only work has its own
    # quota; a victim frees room or quota where the preemptor lands, never only the fleet-wide quota)
    spot = {"policies/teams.yaml": SOLO.replace("{nominal: 16}", "{nominal: 16, spot: 16}")}
    base = _plan_repo(low, changes=spot)
    head = _plan_repo({**low, "vision/urgent": _gpu("urgent", priority="production", spot="required")}, base, spot)
    assert [(x.job, x.by) for x in head.preemptions] == [("vision/ckpt", "vision/urgent")]


def test_a_draining_cluster_moves_first_the_job_that_loses_the_least_and_a_job_without_checkpoints_last() -> None:
    """One move per plan: `a` never checkpoints (it would lose all it ran), `b` at most 30 minutes. `b` moves
    first (absent was read as 0, and the job that loses the most moved first)."""
    jobs = {"vision/a": _gpu("a"), "vision/b": _gpu("b", checkpoint_minutes=30)}
    base = _plan_repo(jobs)
    assert {p.job: p.cluster for p in base.placements} == {"vision/a": "onprem-sjc", "vision/b": "onprem-sjc"}
    head = _plan_repo(jobs, base, {"fleet/clusters/onprem-sjc.yaml": ONPREM + "status: draining\n",
                                   "policies/placement.yaml": "max_migrations_per_plan: 1\n"})
    assert {p.job: p.status for p in head.placements} == {"vision/a": "kept", "vision/b": "moved"}
