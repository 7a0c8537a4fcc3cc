"""Expected starts that hold (reconciler/plan/starts.py, reserve.py, drain.py): a victim held until its checkpoint
frees its units, quota and spend then, and is named among the holders."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from reconciler.catalog import load_catalog
from reconciler.pipeline import check
from reconciler.plan.live import LiveInputs, Running
from reconciler.plan.planner import plan
from reconciler.plan.types import Plan
from reconciler.validate import Validated

from builders import GKE, ONPREM, PRIORITIES, TEAMS, with_files

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PRIO = PRIORITIES.replace("  - {name: opportunistic, value: 10, spot: required}\n", "  - {name: low, value: 10}\n")
SOLO = TEAMS.replace("    cohort: research\n    weight: 2\n", "    weight: 2\n")   # vision alone, no cohort


def gke(nodes: int) -> str:
    pools = f"pools:\n  - name: h100\n    accelerator: nvidia-h100-80gb\n    max: {nodes}\n"
    return GKE[:GKE.index("pools:\n")] + pools


def gjob(name: str, count: int, **extra: object) -> str:
    return "\n".join([f"name: {name}", "team: vision", "options:",
                      f"  - {{accelerator: nvidia-h100-80gb, count: {count}}}", "image: img:1",
                      *(f"{k}: {v}" for k, v in extra.items())]) + "\n"


def fleet(files: dict[str, str | None], prio: str = PRIO, teams: str = SOLO, nodes: int = 2) -> Validated:
    changes: dict[str, str | None] = {"policies/priorities.yaml": prio, "policies/teams.yaml": teams,
                                      "fleet/clusters/gke-usc1.yaml": gke(nodes), "jobs/vision/train.yaml": None,
                                      "fleet/clusters/onprem-sjc.yaml": None}
    changes.update(files)
    v = check(with_files(changes), load_catalog())
    assert v.ok, v.errors
    return v


def pending(p: Plan) -> dict[str, dict[str, object]]:
    return {d["job"]: d for d in json.loads(p.to_json())["pending"]}


def test_a_victim_held_to_its_checkpoint_frees_its_units_then_in_every_expected_start() -> None:
    """`v` (16 GPUs, low, 10 h) runs on both nodes, 20 minutes from its next checkpoint; `p` (research, 8 GPUs,
    1 h) preempts it, and `v` keeps running until its checkpoint in 10 minutes on the node `p` does not take.
    `q` (low, 8 GPUs, 0.5 h) fits that node from then until `v` could start again. Before, no estimate freed
    `v`'s node: `v` was told no expected start ("no end the plan reckons with frees what it lacks"), `q` 1 h
    (when `p` ends, on `p`'s node), and `q`'s reason named `p` alone as holding the pool. Now `q` starts at
    the checkpoint, and `v` once `p`, which starts then, ends: 10 minutes + 1 h."""
    v = fleet({"jobs/vision/v.yaml": gjob("v", 16, duration_hours=10, checkpoint_minutes=30, priority="low"),
               "jobs/vision/p.yaml": gjob("p", 8, duration_hours=1),
               "jobs/vision/q.yaml": gjob("q", 8, duration_hours=0.5, priority="low")})
    running = {"vision/v": Running("vision/v", "gke-usc1", "h100", (0, 1))}
    p = plan(v, None, LiveInputs(NOW, running=running, run_minutes={"vision/v": 50.0}))
    assert [(x.job, x.by, x.after_minutes) for x in p.preemptions] == [("vision/v", "vision/p", 10.0)]
    assert [(x.job, x.units) for x in p.placements] == [("vision/p", (0,))]
    waits = pending(p)
    assert waits["vision/q"]["expected_start"] == 0.17      # before: 1.0
    assert waits["vision/v"]["expected_start"] == 1.17      # before: None
    (why,) = waits["vision/q"]["reasons"]
    assert isinstance(why, str) and why.endswith("held by vision/p (8 GPUs), vision/v (8 GPUs)"), why


def test_a_reservation_start_counts_the_quota_work_placed_after_it_takes() -> None:
    """vision's 64 H100s (no cohort; within_team: never): `a` (16 GPUs, ends in 2 h) and `b` (16, 6 h) run on
    gke-usc1. `big` (research, 32 GPUs, its data must stay in us-central1) fits its quota now but not the room: it
    reserves 4 gke nodes from 2 h. Then `l` (low, 32 GPUs, 10 h) starts on the owned pool in sjc, into the team's
    quota: at 2 h the team would use 48 + 32 > 64, and `big` may preempt no one of its team. Before, `big` was told
    2 h; now 6 h (when `b` ends), and why. What starts now is unchanged."""
    prio = PRIO.replace("within_team: lower_priority", "within_team: never")
    v = fleet({"fleet/clusters/onprem-sjc.yaml": ONPREM, "jobs/vision/a.yaml": gjob("a", 16, duration_hours=3),
               "jobs/vision/b.yaml": gjob("b", 16, duration_hours=7),
               "jobs/vision/big.yaml": gjob("big", 32, duration_hours=10, data_region="us-central1",
                                            data_residency="required"),
               "jobs/vision/l.yaml": gjob("l", 32, duration_hours=10, priority="low")}, prio=prio, nodes=7)
    running = {"vision/a": Running("vision/a", "gke-usc1", "h100", (0, 1)),
               "vision/b": Running("vision/b", "gke-usc1", "h100", (2, 3))}
    p = plan(v, None, LiveInputs(NOW, running=running, run_minutes={"vision/a": 60.0, "vision/b": 60.0}))
    assert [(x.job, x.cluster, x.units) for x in p.placements] == [
        ("vision/a", "gke-usc1", (0, 1)), ("vision/b", "gke-usc1", (2, 3)), ("vision/l", "onprem-sjc", (0, 1, 2, 3))]
    big = pending(p)["vision/big"]
    assert big["expected_start"] == 6.0       # before: 2.0
    assert big["reservation"] == {"cluster": "gke-usc1", "pool": "h100", "units": [0, 1, 4, 5]}
    assert isinstance(big["reasons"], list)
    assert big["reasons"][-1] == (
        "team vision's nvidia-h100-80gb quota admits it only in 6 h, as the team's work ends, not at the start of "
        "the units reserved for it (2 h): its reservation holds units, and work placed since uses that quota")


def test_jobs_waiting_for_the_budget_are_told_starts_one_after_another() -> None:
    """vision's budget pays for 1.2 on-demand H100 nodes an hour; `a` runs on one (ends in 2 h). `b` and `c` (one
    node, 1 h each) wait for the budget. Before, both were told 2 h, though then it pays for one of them only: now
    `b` 2 h and `c` 3 h, when `b`, which its claim counts as spending from 2 h, ends."""
    budget = 88.49 * 730 * 1.2
    teams = SOLO.replace("budget_monthly_usd: 5000000", f"budget_monthly_usd: {budget:.0f}")
    v = fleet({"jobs/vision/a.yaml": gjob("a", 8, duration_hours=3),
               "jobs/vision/b.yaml": gjob("b", 8, duration_hours=1),
               "jobs/vision/c.yaml": gjob("c", 8, duration_hours=1)}, teams=teams, nodes=4)
    running = {"vision/a": Running("vision/a", "gke-usc1", "h100", (0,))}
    p = plan(v, None, LiveInputs(NOW, running=running, run_minutes={"vision/a": 60.0}))
    assert [x.job for x in p.placements] == ["vision/a"]
    waits = pending(p)
    assert waits["vision/b"]["expected_start"] == 2.0
    assert waits["vision/c"]["expected_start"] == 3.0       # before: 2.0
