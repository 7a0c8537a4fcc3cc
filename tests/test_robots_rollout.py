"""The robots layer's decision (robots/rollout.py), pure: waves admitted `max_unavailable` at a time, the
health gate, offline robots pending until `offline_ok_hours` then failed, rollback and pause; and the
window's cron (robots/cron.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.robots import cron
from reconciler.robots.models import Deployment, RobotFleet
from reconciler.robots.rollout import classify, decide

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
NEW, OLD = "sha256:" + "b" * 64, "sha256:" + "a" * 64


def fleet(n: int = 5, offline_ok_hours: float = 2) -> RobotFleet:
    robots = [{"name": "c1", "labels": {"ring": "canary"}}] + [{"name": f"r{i}"} for i in range(1, n)]
    return RobotFleet.model_validate({"name": "lab", "registry": "http://127.0.0.1:5000",
                                      "link": {"uplink_mbps": 50, "offline_ok_hours": offline_ok_hours},
                                      "robots": robots})


def dep(on_failure: str = "rollback", abort: float = 10, batch: str | int = "100%", soak: float = 0) -> Deployment:
    return Deployment.model_validate({
        "name": "towel", "fleet": "lab", "team": "vision",
        "model": {"artifact": f"reg.local:5000/models/p@{NEW}", "size_gb": 1},
        "server": {"image": f"reg.local:5000/s@{OLD}", "port": 8000},
        "rollout": {"window": {"cron": "0 18 * * 1-5", "hours": 4},
                    "waves": [{"name": "canary", "selector": {"ring": "canary"}, "soak_minutes": soak},
                              {"name": "rest", "max_unavailable": batch}]},
        "gates": {"health_timeout_minutes": 5, "abort_failed_percent": abort}, "on_failure": on_failure})


def st(running: str | None, health: str = "ok", at: datetime = T0, previous: str | None = None) -> dict[str, Any]:
    return {"running": running, "health": health, "heartbeat": at.isoformat(), "switched_at": at.isoformat(),
            "previous": previous}




def test_canary_first_then_the_rest_in_batches() -> None:
    f, d = fleet(5), dep(batch=2)
    on_old = {r.name: st(OLD) for r in f.robots}
    o = decide(d, f, on_old, None, T0)
    assert list(o.desired) == ["c1"] and o.desired["c1"]["model"] == NEW and o.state.previous == {"c1": OLD}
    assert o.desired["c1"]["window"] == {"cron": "0 18 * * 1-5", "hours": 4.0}
    o = decide(d, f, {**on_old, "c1": st(NEW)}, o.state, T0)           # canary healthy; soak 0: rest starts
    assert o.state.wave == 1 and sorted(o.desired) == ["c1", "r1", "r2"]     # two at a time
    assert [e.kind for e in o.events] == ["soak-started", "wave-passed", "wave-started"]
    o2 = decide(d, f, {**on_old, "c1": st(NEW), "r1": st(NEW)}, o.state, T0)
    assert sorted(o2.desired) == ["c1", "r1", "r2", "r3"]               # r1 healthy: one more
    done = {r.name: st(NEW) for r in f.robots}
    o3 = decide(d, f, done, o2.state, T0)
    o3 = decide(d, f, done, o3.state, T0)
    assert o3.state.phase == "done" and len(o3.desired) == 5


def test_an_offline_robot_is_pending_until_offline_ok_hours_then_failed() -> None:
    t, off = timedelta(minutes=5), timedelta(hours=2)
    assert classify(st(OLD, at=T0), NEW, T0, T0 + timedelta(minutes=11), t, off) == "offline"
    assert classify(st(OLD, at=T0), NEW, T0, T0 + timedelta(hours=2, minutes=1), t, off) == "failed"
    assert classify(None, NEW, T0, T0 + timedelta(hours=1), t, off) == "offline"
    assert classify(st(NEW, "failed", at=T0), NEW, T0, T0 + timedelta(minutes=4), t, off) == "pending"
    late = T0 + timedelta(minutes=6)
    assert classify(st(NEW, "failed", at=T0) | {"heartbeat": late.isoformat()}, NEW, T0, late, t, off) == "failed"

    f, d = fleet(2), dep()
    o = decide(d, f, {"c1": st(OLD), "r1": st(OLD)}, None, T0)
    later = T0 + timedelta(hours=3)       # the canary never reported again: past offline_ok_hours
    o = decide(d, f, {"c1": st(OLD), "r1": st(OLD, at=later)}, o.state, later)
    assert o.state.phase == "rolled-back" and o.desired["c1"]["model"] == OLD and o.desired["c1"]["window"] is None


def test_failures_under_the_gate_pass_and_at_it_abort() -> None:
    f = fleet(11)
    statuses = {r.name: st(NEW) for r in f.robots}
    late = T0 + timedelta(minutes=10)
    statuses["r1"] = st(NEW, "failed", at=T0) | {"heartbeat": late.isoformat()}
    before = {r: st(OLD) for r in statuses}
    first = decide(dep(abort=20), f, before, None, T0).state
    state = decide(dep(abort=20), f, {**before, "c1": st(NEW)}, first, T0).state
    assert state.wave == 1 and state.phase == "rolling" and len(state.admitted) == 11
    passed = decide(dep(abort=20), f, statuses, state, late)           # 1 of 10 failed: 10% < 20%
    assert passed.state.phase == "done"
    failed = decide(dep(abort=10), f, statuses, state, late)           # 10% >= 10%: abort
    assert failed.state.phase == "rolled-back" and "r1" in failed.events[0].message


def test_pause_keeps_what_was_admitted() -> None:
    f, d = fleet(3), dep(on_failure="pause")
    o = decide(d, f, {r.name: st(OLD) for r in f.robots}, None, T0)
    late = T0 + timedelta(minutes=6)
    bad = {"c1": st(NEW, "failed", at=T0) | {"heartbeat": late.isoformat()}, "r1": st(OLD, at=late),
           "r2": st(OLD, at=late)}
    o = decide(d, f, bad, o.state, late)
    assert o.state.phase == "paused" and o.desired == {"c1": o.desired["c1"]} and o.desired["c1"]["model"] == NEW
    assert [e.kind for e in o.events] == ["gate-failed", "paused"]
    again = decide(d, f, bad, o.state, late + timedelta(hours=1))
    assert again.events == () and again.state.phase == "paused"


def test_soak_holds_the_next_wave_and_a_new_digest_starts_over() -> None:
    f, d = fleet(3), dep(soak=30)
    o = decide(d, f, {r.name: st(OLD) for r in f.robots}, None, T0)
    o = decide(d, f, {"c1": st(NEW)}, o.state, T0)
    assert o.state.soak_started_at == T0 and o.state.wave == 0
    o = decide(d, f, {"c1": st(NEW, at=T0 + timedelta(minutes=29))}, o.state, T0 + timedelta(minutes=29))
    assert o.state.wave == 0
    o = decide(d, f, {"c1": st(NEW, at=T0 + timedelta(minutes=30))}, o.state, T0 + timedelta(minutes=30))
    assert o.state.wave == 1
    other = d.model_copy(update={"model": d.model.model_copy(update={"artifact": f"reg.local:5000/models/p@{OLD}"})})
    o = decide(other, f, {"c1": st(NEW, at=T0 + timedelta(minutes=31))}, o.state, T0 + timedelta(minutes=31))
    assert o.state.digest == OLD and o.state.wave == 0 and o.events[0].kind == "rollout-started"


def test_decide_is_a_function_of_its_inputs() -> None:
    f, d = fleet(4), dep(batch=1)
    statuses = {r.name: st(OLD) for r in f.robots}
    assert decide(d, f, statuses, None, T0) == decide(d, f, statuses, None, T0)


@pytest.mark.parametrize(("expr", "now", "open_"), [
    ("0 18 * * 1-5", datetime(2026, 11, 23, 19, 30, tzinfo=UTC), True),      # Monday 19:30
    ("0 18 * * 1-5", datetime(2026, 11, 23, 22, 0, tzinfo=UTC), False),      # 4 h window closed at 22:00
    ("0 18 * * 1-5", datetime(2026, 11, 22, 19, 0, tzinfo=UTC), False),      # Sunday
    ("*/15 2 1 * *", datetime(2026, 12, 1, 2, 31, tzinfo=UTC), True),
])
def test_window(expr: str, now: datetime, open_: bool) -> None:
    c = cron.parse(expr)
    assert not isinstance(c, str)
    assert cron.window_open(c, 4, now) is open_ if expr.startswith("0") else cron.window_open(c, 0.25, now)


def test_cron_errors_and_next_start() -> None:
    assert "5 fields" in str(cron.parse("0 18 * *")).replace("has 4 field(s); cron has 5", "5 fields")
    assert "outside 0-23" in str(cron.parse("0 24 * * *"))
    assert "names such as mon" in str(cron.parse("0 1 * * mon"))
    c = cron.parse("0 18 * * 1-5")
    assert not isinstance(c, str)
    assert c.next_start(datetime(2026, 11, 21, 12, 0, tzinfo=UTC)) == datetime(2026, 11, 23, 18, 0, tzinfo=UTC)
