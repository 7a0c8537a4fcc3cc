"""Re-pack onto prepaid capacity (issue 22 item 4; plan/repack.py): planned from what runs, a running job on
on-demand H100s moves onto idle owned H100 nodes at its checkpoint when the saving over its remaining time
beats its restart cost, within `max_migrations_per_plan`, and says why in figures that hold."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kube_objects import T0, job_objects

from reconciler.catalog import load_catalog
from reconciler.observe.model import ClusterObservation, Snapshot
from reconciler.observe.parse import parse_jobset, parse_workload
from reconciler.pipeline import check
from reconciler.plan import plan
from reconciler.plan.live import LiveInputs, Running
from reconciler.plan.markdown import to_markdown
from reconciler.plan.types import Plan
from reconciler.reconcile.decide import JobFacts, Knobs, LoopMemory, decide

from builders import GKE, PRIORITIES, TEAMS, with_files

CAT = load_catalog()
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SOLO = TEAMS.replace("    cohort: research\n    weight: 2\n", "    weight: 2\n")   # vision: 64 H100s, no cohort
ON_DEMAND = "gke-usc1/h100"     # builders.GKE: on-demand H100 nodes, 8 GPUs each
OWNED = "onprem-sjc/h100-owned"  # builders.ONPREM: 4 owned H100 nodes, min 4: paid whether used or not
RESTORE = 10.0


def _job(name: str, **extra: object) -> str:
    return "\n".join([f"name: {name}", "team: vision", "options:", "  - {accelerator: nvidia-h100-80gb, count: 8}",
                      "image: img:1", *(f"{k}: {v}" for k, v in extra.items())]) + "\n"


def _plan(jobs: dict[str, str], ran: dict[str, float], placement: str = "",
          owned: dict[str, str] | None = None) -> Plan:
    """Plan from what runs: every job runs on its own on-demand node (unit 0, 1, ...) for `ran` minutes; the
    jobs of `owned` on owned node 0, 1, ... (running time unknown)."""
    files: dict[str, str | bytes | None] = {f"jobs/vision/{k}.yaml": v for k, v in {**jobs, **(owned or {})}.items()}
    files |= {"jobs/vision/train.yaml": None, "policies/teams.yaml": SOLO}
    if placement:
        files["policies/placement.yaml"] = placement
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    running = {f"vision/{k}": Running(f"vision/{k}", "gke-usc1", "h100", (i,)) for i, k in enumerate(sorted(jobs))}
    running |= {f"vision/{k}": Running(f"vision/{k}", "onprem-sjc", "h100-owned", (i,))
                for i, k in enumerate(sorted(owned or {}))}
    live = LiveInputs(NOW, running=running, run_minutes={f"vision/{k}": m for k, m in ran.items()})
    return plan(v, None, live)


def _where(p: Plan) -> dict[str, tuple[str, str]]:
    return {x.job: (x.pool_key, x.status) for x in p.placements}


def _node_price(p: Plan, key: str) -> float:
    return next(q.unit_hourly_usd for q in p.pools if f"{q.cluster}/{q.pool}" == key)


def test_a_job_on_on_demand_moves_onto_idle_owned_nodes_at_its_checkpoint_and_the_reason_holds() -> None:
    p = _plan({"big": _job("big", duration_hours=24, checkpoint_minutes=30)}, {"big": 60.0})
    assert _where(p) == {"vision/big": (OWNED, "moved")}
    (moved,) = p.placements
    price = _node_price(p, ON_DEMAND)
    remaining_h = 24 - 1
    saving, cost = price * remaining_h, price * RESTORE / 60      # at its checkpoint: only the restore is lost
    figures = [float(x.replace(",", "")) for x in re.findall(r"\$([\d,]+\.\d\d)", moved.reason)]
    assert figures[:3] == [pytest.approx(saving, abs=0.01), pytest.approx(price, abs=0.01),
                           pytest.approx(cost, abs=0.01)]
    assert saving > 2 * cost
    assert f"from on-demand {ON_DEMAND} onto idle owned {OWNED}" in moved.reason
    assert "at its checkpoint: 0 min lost + 10 min restore" in moved.reason
    pools = {f"{q.cluster}/{q.pool}": q for q in p.pools}
    assert pools[ON_DEMAND].target == 0 and pools[OWNED].used == 1     # the on-demand node scales down
    assert f"moved: {moved.reason}" in to_markdown(p)                    # the PR comment shows why


@pytest.mark.parametrize(("extra", "ran", "why"), [
    ({"duration_hours": 1.1, "checkpoint_minutes": 30}, 60.0, "6 minutes left: less than the 10-minute restore"),
    ({"duration_hours": 1 + 19 / 60, "checkpoint_minutes": 30}, 60.0, "19 minutes left: less than twice the restore"),
    ({"duration_hours": 24, "checkpoint_minutes": 30}, 75.0, "15 minutes since its checkpoint (window 5)"),
    ({"duration_hours": 24, "checkpoint_minutes": 30}, 84.0, "just before its next checkpoint"),
    ({"checkpoint_minutes": 30}, 60.0, "no duration_hours: the saving is unknown"),
    ({"duration_hours": 3}, 60.0, "never checkpoints: 120 minutes left do not cover twice its 60-minute run + restore"),
    ({"duration_hours": 24, "checkpoint_minutes": 30, "priority": "critical"}, 60.0, "a non-preemptible class"),
])
def test_a_job_stays_where_the_move_would_not_pay_or_may_not_happen(extra: dict[str, object], ran: float,
                                                                    why: str) -> None:
    """Beside it, a job that does pay moves (the idle owned nodes, the limit and the quota allow both)."""
    p = _plan({"big": _job("big", **extra), "pays": _job("pays", duration_hours=24, checkpoint_minutes=30)},
              {"big": ran, "pays": 60.0})
    assert _where(p) == {"vision/big": (ON_DEMAND, "kept"), "vision/pays": (OWNED, "moved")}, why


def test_a_job_without_checkpoints_moves_when_the_saving_covers_its_whole_lost_run() -> None:
    p = _plan({"big": _job("big", duration_hours=24)}, {"big": 60.0})
    (moved,) = p.placements
    assert (moved.pool_key, moved.status) == (OWNED, "moved")
    assert "it never checkpoints: its whole run of 60 min lost + 10 min restore" in moved.reason


def test_a_job_whose_running_time_is_unknown_stays() -> None:
    p = _plan({"big": _job("big", duration_hours=24, checkpoint_minutes=30), "pays": _job("pays", duration_hours=24)},
              {"pays": 60.0})
    assert _where(p) == {"vision/big": (ON_DEMAND, "kept"), "vision/pays": (OWNED, "moved")}


def test_repack_can_be_turned_off_in_placement_yaml() -> None:
    p = _plan({"big": _job("big", duration_hours=24, checkpoint_minutes=30)}, {"big": 60.0},
              "repack: {enabled: false, restart_minutes: 5}\n")
    assert _where(p) == {"vision/big": (ON_DEMAND, "kept")}


def test_the_restore_minutes_are_read_from_placement_yaml() -> None:
    """25 minutes left: more than twice a 10-minute restore (repack.MARGIN), not than twice a 15-minute one."""
    jobs = {"big": _job("big", duration_hours=1 + 25 / 60, checkpoint_minutes=30)}
    assert _where(_plan(jobs, {"big": 60.0})) == {"vision/big": (OWNED, "moved")}
    assert _where(_plan(jobs, {"big": 60.0}, "repack: {restart_minutes: 15}\n")) == {"vision/big": (ON_DEMAND, "kept")}


def test_the_migration_limit_holds_and_the_biggest_saving_moves_first() -> None:
    jobs = {n: _job(n, duration_hours=h, checkpoint_minutes=30) for n, h in (("a", 5), ("b", 48), ("c", 24))}
    p = _plan(jobs, {n: 60.0 for n in jobs}, "max_migrations_per_plan: 2\n")
    assert _where(p) == {"vision/a": (ON_DEMAND, "kept"), "vision/b": (OWNED, "moved"),
                         "vision/c": (OWNED, "moved")}
    none = _plan(jobs, {n: 60.0 for n in jobs}, "max_migrations_per_plan: 0\n")
    assert {s for _, s in _where(none).values()} == {"kept"}


def test_the_plan_is_deterministic() -> None:
    jobs = {n: _job(n, duration_hours=24, checkpoint_minutes=30) for n in ("a", "b", "c", "d", "e")}
    first = _plan(jobs, {n: 60.0 for n in jobs})
    assert first == _plan(jobs, {n: 60.0 for n in jobs})
    assert sorted(s for _, s in _where(first).values()) == ["kept"] + ["moved"] * 4   # 4 owned nodes, limit 5


def test_the_reconcile_loop_moves_the_job_with_the_plans_reason() -> None:
    """`reconcile.decide` turns the re-pack into a move out of the on-demand pool, with the plan's reason and
    nothing lost at the checkpoint."""
    p = _plan({"big": _job("big", duration_hours=24, checkpoint_minutes=30)}, {"big": 60.0})
    now = T0.replace(tzinfo=UTC) + timedelta(minutes=200)
    objs = job_objects("vision", "big", "h100", admitted=200 - 60 - 2, accel="gpu", per_pod=8)

    def seen(name: str, *o: dict[str, Any]) -> ClusterObservation:
        return ClusterObservation(name=name, status="ok",
                                  jobsets=tuple(parse_jobset(x) for x in o if x["kind"] == "JobSet"),
                                  workloads=tuple(parse_workload(x) for x in o if x["kind"] == "Workload"))

    snap = Snapshot(observed_at=now, clusters=(seen("gke-usc1", *objs), seen("onprem-sjc")))
    facts = {"vision/big": JobFacts("training", 30, 24)}
    d = decide(p, snap, LoopMemory(), Knobs(), now, jobs=facts)
    (move,) = [a for a in d.actions if a.kind == "move"]
    assert (move.cluster, move.pool, move.from_cluster) == ("onprem-sjc", "h100-owned", "gke-usc1")
    assert move.reason == p.placements[0].reason and move.lost_minutes == 0


def test_the_reason_quoted_in_the_docs_is_the_planners() -> None:
    p = _plan({"big": _job("big", duration_hours=24, checkpoint_minutes=30)}, {"big": 60.0})
    docs = " ".join((Path(__file__).resolve().parents[1] / "docs" / "concepts.md").read_text().split())
    assert f'("{p.placements[0].reason}")' in docs


def test_a_small_job_moves_onto_the_free_half_of_an_owned_node_and_one_sharing_its_node_stays() -> None:
    """Every owned node half used: a 4-GPU job alone on its on-demand node moves onto a free half; two that
    share one on-demand node do not (the node stays paid for the other: no saving)."""
    halves = {f"o{i}": _job4(f"o{i}") for i in range(4)}
    p = _plan({"alone": _job4("alone", duration_hours=24, checkpoint_minutes=30)}, {"alone": 60.0}, owned=halves)
    assert _where(p)["vision/alone"] == (OWNED, "moved")
    jobs = {n: _job4(n, duration_hours=24, checkpoint_minutes=30) for n in ("a", "b")}
    files: dict[str, str | bytes | None] = {f"jobs/vision/{k}.yaml": v for k, v in {**jobs, **halves}.items()}
    v = check(with_files({**files, "jobs/vision/train.yaml": None, "policies/teams.yaml": SOLO}), CAT)
    running = {f"vision/{k}": Running(f"vision/{k}", "gke-usc1", "h100", (0,)) for k in jobs}
    running |= {f"vision/{k}": Running(f"vision/{k}", "onprem-sjc", "h100-owned", (i,)) for i, k in enumerate(halves)}
    shared = plan(v, None, LiveInputs(NOW, running=running, run_minutes={"vision/a": 60.0}))
    assert _where(shared)["vision/a"] == (ON_DEMAND, "kept")


def _job4(name: str, **extra: object) -> str:
    return _job(name, **extra).replace("count: 8", "count: 4")


@pytest.mark.parametrize("duration", [1.2, 1.5, 2.0, 24.0])
def test_a_job_moves_exactly_when_the_rule_says_so(duration: float) -> None:
    """The rule, stated independently: at most 5 minutes after a checkpoint, and the saving (the whole node's
    price over the remaining minutes) more than twice the restart cost (minutes lost + 10, same price)."""
    for ran in (30.0, 33.0, 35.0, 36.0, 45.0, 60.0, 64.0, 66.0, 89.0, 90.0):
        p = _plan({"big": _job("big", duration_hours=duration, checkpoint_minutes=30)}, {"big": ran})
        lost = ran % 30
        remaining = duration * 60 - ran
        expected = (OWNED, "moved") if lost <= 5 and remaining > 2 * (lost + RESTORE) else (ON_DEMAND, "kept")
        assert _where(p) == {"vision/big": expected}, (duration, ran)


def test_a_job_whose_team_waits_for_its_accelerator_stays_and_another_teams_job_moves() -> None:
    """vision waits with a 64-GPU H100 job (its quota is 64): a restart would hold vision's H100 quota longer,
    so vision's running job stays; lang's, whose team waits for nothing, moves."""
    jobs = {"big": _job("big", duration_hours=24, checkpoint_minutes=30),
            "huge": _job("huge", duration_hours=24).replace("count: 8", "count: 64")}
    files: dict[str, str | bytes | None] = {f"jobs/vision/{k}.yaml": v for k, v in jobs.items()}
    files["jobs/lang/other.yaml"] = _job("other", duration_hours=24, checkpoint_minutes=30).replace(
        "team: vision", "team: lang")
    v = check(with_files({**files, "jobs/vision/train.yaml": None, "policies/teams.yaml": SOLO}), CAT)
    assert v.ok, v.errors
    running = {"vision/big": Running("vision/big", "gke-usc1", "h100", (0,)),
               "lang/other": Running("lang/other", "gke-usc1", "h100", (1,))}
    p = plan(v, None, LiveInputs(NOW, running=running, run_minutes={"vision/big": 60.0, "lang/other": 60.0}))
    assert _where(p) == {"vision/big": (ON_DEMAND, "kept"), "lang/other": (OWNED, "moved")}
    assert [x.job for x in p.pending] == ["vision/huge"]


@pytest.mark.parametrize(("h100_quota", "expected"), [
    ("{nominal: 8}", (OWNED, "moved")),
    ("{nominal: 0, borrowing_limit: 8}", ("gke-usc1/v5p-4x4x4", "kept")),   # it would borrow lang's H100s
])
def test_a_move_to_another_accelerator_stays_within_the_teams_nominal_quota(h100_quota: str,
                                                                             expected: tuple[str, str]) -> None:
    tpu_or_gpu = ("name: tpu\nteam: vision\noptions:\n  - {accelerator: tpu-v5p, topology: 4x4x4}\n"
                  "  - {accelerator: nvidia-h100-80gb, count: 8}\nimage: img:1\nduration_hours: 24\n"
                  "checkpoint_minutes: 30\n")
    teams = TEAMS.replace("nvidia-h100-80gb: {nominal: 64}", f"nvidia-h100-80gb: {h100_quota}")
    v = check(with_files({"jobs/vision/tpu.yaml": tpu_or_gpu, "jobs/vision/train.yaml": None,
                          "policies/teams.yaml": teams}), CAT)
    assert v.ok, v.errors
    live = LiveInputs(NOW, running={"vision/tpu": Running("vision/tpu", "gke-usc1", "v5p-4x4x4", (0,))},
                      run_minutes={"vision/tpu": 60.0})
    assert _where(plan(v, None, live)) == {"vision/tpu": expected}


def test_new_work_takes_an_idle_prepaid_node_before_the_free_half_of_an_open_on_demand_node() -> None:
    """Both cost nothing new; `capacity_preference` ranks owned first, so the owned node wins even where its
    amortized price is above the on-demand list price (the search stopped at the first pool that cost nothing
    new, in list-price order, and the on-demand node could never scale down)."""
    from builders import ONPREM
    dear = ONPREM.replace("hourly_usd: 40.0", "hourly_usd: 400.0")
    half = _job("half").replace("count: 8", "count: 4")
    files: dict[str, str | bytes | None] = {"jobs/vision/half.yaml": half, "jobs/vision/train.yaml": None,
                                            "jobs/vision/new.yaml": _job("new").replace("count: 8", "count: 4"),
                                            "fleet/clusters/onprem-sjc.yaml": dear, "policies/teams.yaml": SOLO}
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    running = {"vision/half": Running("vision/half", "gke-usc1", "h100", (0,))}
    p = plan(v, None, LiveInputs(NOW, running=running, run_minutes={"vision/half": 60.0}))
    assert _where(p)["vision/new"] == (OWNED, "new")
    assert _where(p)["vision/half"] == (ON_DEMAND, "kept")


def test_a_re_pack_takes_no_units_a_waiting_jobs_reservation_holds_whatever_its_class() -> None:
    """`lang/big` (low class, 32 GPUs) waits for the whole owned pool, which `vision/x` leaves in 2 hours: it holds
    a reservation of units 0-3 from then. `vision/r` (research, 23 hours left) runs on an on-demand node at its
    checkpoint. Before, the re-pack moved r onto owned unit 1 (a reservation of a lower class binds no higher
    one in the greedy), and big's reservation and expected start still read 2 hours while r held unit 1 for 23:
    a move made to save money delayed a waiting job by 21 hours and said otherwise. Now r stays."""
    prio = PRIORITIES.replace("  - {name: opportunistic, value: 10, spot: required}\n", "  - {name: low, value: 10}\n")
    big = ("name: big\nteam: lang\npriority: low\noptions:\n  - {accelerator: nvidia-h100-80gb, count: 32}\n"
           "image: img:1\nduration_hours: 10\n")
    files: dict[str, str | bytes | None] = {
        "jobs/vision/train.yaml": None, "policies/teams.yaml": SOLO, "policies/priorities.yaml": prio,
        "jobs/vision/r.yaml": _job("r", duration_hours=24, checkpoint_minutes=30),
        "jobs/vision/x.yaml": _job("x", duration_hours=3, priority="low"), "jobs/lang/big.yaml": big,
        "fleet/clusters/gke-usc1.yaml": GKE[:GKE.index("pools:\n")]    # one on-demand H100 node, r's
        + "pools:\n  - {name: h100, accelerator: nvidia-h100-80gb, max: 1}\n"}
    v = check(with_files(files), CAT)
    assert v.ok, v.errors
    running = {"vision/r": Running("vision/r", "gke-usc1", "h100", (0,)),
               "vision/x": Running("vision/x", "onprem-sjc", "h100-owned", (0,))}
    p = plan(v, None, LiveInputs(NOW, running=running, run_minutes={"vision/r": 60.0, "vision/x": 60.0}))
    assert _where(p) == {"vision/r": (ON_DEMAND, "kept"), "vision/x": (OWNED, "kept")}
    (waits,) = p.pending
    assert (waits.job, waits.expected_start, waits.reservation) == ("lang/big", 2.0, ("onprem-sjc", "h100-owned",
                                                                                      (0, 1, 2, 3)))
