"""Defects found by a hunt in robot rollouts (each test fails at 8f59d37, before the fixes)."""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from robot_parts import registry
from test_robots_rollout import NEW, OLD, T0, dep, fleet, st

import reconciler.robots.agent as agent_mod
from reconciler.robots import cron
from reconciler.robots.agent import Agent, _probe
from reconciler.robots.layer import observation, robots_layer
from reconciler.robots.models import Deployment
from reconciler.robots.registry import DESIRED, ROLLOUT, STATUS, Registry, RegistryError
from reconciler.robots.rollout import decide, summarize


def registry_over(store: dict[str, Any], fails: Callable[[str, str], bool] = lambda kind, name: False) -> type:
    """A Registry class over `store` (`<kind>/<name>` -> document) whose reads time out where `fails` says."""

    class FakeRegistry:
        def __init__(self, url: str) -> None:
            pass

        def pull_json(self, kind: str, name: str) -> Any:
            if fails(kind, name):
                raise RegistryError("registry 127.0.0.1 does not answer: ReadTimeout", "")
            return store.get(f"{kind}/{name}")

        def push_json(self, kind: str, name: str, doc: dict[str, Any]) -> str:
            store[f"{kind}/{name}"] = doc
            return ""

        def close(self) -> None:
            pass

    return FakeRegistry


def test_rollback_of_a_robot_unread_at_admission_sends_it_to_its_previous_model_not_to_none() -> None:
    """A robot whose status could not be read when admitted (read_statuses turns a RegistryError into None)
    switches, then reports running=NEW, previous=OLD. A failed gate must send it back to OLD."""
    f, d = fleet(2), dep(soak=60)
    o = decide(d, f, {"c1": None, "r1": st(OLD)}, None, T0)          # c1's status did not read this cycle
    assert "c1" in o.state.admitted
    t1 = T0 + timedelta(minutes=1)
    o = decide(d, f, {"c1": st(NEW, "ok", at=t1, previous=OLD), "r1": st(OLD, at=t1)}, o.state, t1)
    t2 = T0 + timedelta(minutes=20)                                   # its server then fails
    bad = st(NEW, "failed", at=t2, previous=OLD) | {"switched_at": t1.isoformat()}
    o = decide(d, f, {"c1": bad, "r1": st(OLD, at=t2)}, o.state, t2)
    assert o.state.phase == "rolled-back"
    assert o.desired["c1"]["model"] == OLD          # observed: None -> the agent unlinks `current`: no model at all


def test_loop_metrics_count_a_failed_robot_as_failed() -> None:
    """observation() (the loop's snapshot `robots`, so the metrics fleet_rollout_robots{state}) rebuilds the
    statuses from RobotSeen, without `switched_at`: a robot unhealthy long after switching but with a fresh
    heartbeat is counted `pending` in its wave while the decision (and the robot row) says `failed`."""
    f, d = fleet(11), dep(abort=50)
    store: dict[str, dict] = {f"{STATUS}/lab/{r.name}": st(OLD) for r in f.robots}

    FakeRegistry = registry_over(store)
    L = partial(SimpleNamespace, deployments=[("deployments/towel.yaml", d)], robot_fleets=[("robots/lab.yaml", f)])

    robots_layer(L(), T0, write=True, log=lambda e: None, tell=lambda s: None,  # type: ignore[arg-type]
                 registry=FakeRegistry)
    later = T0 + timedelta(minutes=30)
    for r in f.robots:
        store[f"{STATUS}/lab/{r.name}"] = st(OLD, at=later)
    store[f"{STATUS}/lab/c1"] = st(NEW, "failed", at=later) | {"switched_at": T0.isoformat()}  # failed, 30 min
    results = robots_layer(L(), later, write=True, log=lambda e: None, tell=lambda s: None,  # type: ignore[arg-type]
                           registry=FakeRegistry)
    assert results[0].outcome is not None and results[0].outcome.waves[0].states["c1"] == "failed"
    obs = observation(results, L(), later)  # type: ignore[arg-type]
    canary = obs.rollouts[0].waves[0]
    assert [r.state for r in obs.robots if r.robot == "c1"] == ["failed"]
    assert (canary.failed, canary.pending) == (1, 0)         # observed: (0, 1)


def test_status_before_a_new_digest_is_reconciled_shows_every_robot_waiting() -> None:
    """`fleet observe` / `fleet status` between a merged new digest and the loop's next cycle: phase
    not-started, but robots admitted by the *old* rollout are shown pending/healthy instead of waiting."""
    f, d = fleet(3), dep()
    other = "sha256:" + "c" * 64
    old_dep = d.model_copy(update={"model": d.model.model_copy(
        update={"artifact": f"reg.local:5000/models/p@{other}"})})
    o = decide(old_dep, f, {r.name: st(OLD) for r in f.robots}, None, T0)     # rollout of `other`, canary admitted
    seen, robots = summarize(d, f, {r.name: st(OLD) for r in f.robots}, o.state, T0)
    assert seen.phase == "not-started"
    assert {r.robot: r.state for r in robots} == {"c1": "waiting", "r1": "waiting", "r2": "waiting"}


def test_status_after_waves_were_removed_is_no_traceback() -> None:
    """A rollout recorded in wave 3 of 3; a reviewed change (same digest) merges the last two waves: summarize
    (`fleet observe`, `fleet status`) raises IndexError before the loop's next cycle."""
    f = fleet(4)
    base = dep().model_dump()
    three = Deployment.model_validate(base | {"rollout": {"waves": [
        {"name": "canary", "selector": {"ring": "canary"}}, {"name": "one", "selector": {"n": "1"}},
        {"name": "rest"}]}})
    f = f.model_copy(update={"robots": tuple(r.model_copy(update={"labels": {"n": "1"}}) if r.name == "r1" else r
                                             for r in f.robots)})
    two = Deployment.model_validate(base | {"rollout": {"waves": [
        {"name": "canary", "selector": {"ring": "canary"}}, {"name": "rest"}]}})
    on_new = {r.name: st(NEW) for r in f.robots}
    o = decide(three, f, on_new, None, T0)
    while o.state.wave < 2:
        o = decide(three, f, on_new, o.state, T0)
    assert (o.state.wave == 2 and o.state.phase == "rolling") or o.state.phase == "done"
    seen, _ = summarize(two, f, on_new, o.state, T0)            # observed: IndexError
    assert seen.wave in ("canary", "rest")


def test_window_is_read_in_utc_whatever_the_offset_of_now() -> None:
    """`0 18 * * 1-5` is 18:00 UTC. 20:00+02:00 is 18:00 UTC: open. 18:30+02:00 is 16:30 UTC: closed."""
    c = cron.parse("0 18 * * 1-5")
    assert not isinstance(c, str)
    plus2 = timezone(timedelta(hours=2))
    assert cron.window_open(c, 4, datetime(2026, 11, 23, 20, 30, tzinfo=plus2))
    assert not cron.window_open(c, 4, datetime(2026, 11, 23, 18, 30, tzinfo=plus2))


def test_star_step_day_of_month_and_a_weekday_both_must_match_as_in_cron() -> None:
    """Vixie cron / cronie: a day field starting with `*` (e.g. `*/2`) is unrestricted, so both fields must
    match. Here `*/2` is treated as restricted: the window opens on every odd day *or* on Mondays."""
    c = cron.parse("0 18 */2 * 1")
    assert not isinstance(c, str)
    wed_25th = datetime(2026, 11, 25, 18, 30, tzinfo=UTC)      # a Wednesday, odd day of month
    assert not cron.window_open(c, 4, wed_25th)


# --- the agent and the loop against things that answer badly -------------------------------------------------





def _html_server() -> ThreadingHTTPServer:
    """Something at the registry's address answering 200 with an HTML page (a captive portal, a web server on
    the wrong port, a proxy's error page)."""
    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<html><body>Welcome</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    s = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def test_agent_reports_a_registry_answering_html_instead_of_raising(tmp_path: Path) -> None:
    s = _html_server()
    try:
        agent = Agent(f"http://127.0.0.1:{s.server_address[1]}", "lab/x", tmp_path / "state", timeout_s=2)
        out = agent.round(T0)            # observed: requests.exceptions.JSONDecodeError (a ValueError) escapes
        assert out["registry"] == "unreachable"
    finally:
        s.shutdown()


def test_loop_reports_a_registry_answering_html_instead_of_raising(tmp_path: Path) -> None:
    s = _html_server()
    try:
        f = fleet(2).model_copy(update={"registry": f"http://127.0.0.1:{s.server_address[1]}"})

        L = partial(SimpleNamespace, deployments=[("deployments/towel.yaml", dep())],
                    robot_fleets=[("robots/lab.yaml", f)])

        told: list[str] = []
        out = robots_layer(L(), T0, write=True, log=lambda d: None, tell=told.append)  # type: ignore[arg-type]
        assert out[0].outcome is None and out[0].error     # observed: ValueError escapes the layer
    finally:
        s.shutdown()


def test_a_health_endpoint_answering_garbage_is_failed_not_a_crash(tmp_path: Path) -> None:
    """The policy server's port answers something that is not HTTP (a crashed server's port taken by another
    process, a half-started server): http.client.BadStatusLine is neither OSError nor ValueError, so it escapes
    Agent.round and the `fleet robot-agent` daemon loop (which catches FleetError and OSError only) dies."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve() -> None:
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.recv(4096)
            c.sendall(b"garbage\r\n\r\n")
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        assert _probe(f"http://127.0.0.1:{srv.getsockname()[1]}/healthz") == "failed"   # observed: BadStatusLine
    finally:
        srv.close()


def test_a_status_with_a_naive_heartbeat_does_not_crash_the_decision() -> None:
    """A robot's status is written by the robot (another agent version, a clock without zone, a hand push):
    a heartbeat without an offset makes `now - beat` a TypeError, which no caller catches (robots_layer catches
    RegistryError, the loop's run() FleetError and OSError): one robot stops the whole `fleet reconcile`."""
    f, d = fleet(2), dep()
    naive = {"running": OLD, "health": "ok", "heartbeat": "2026-11-23T09:00:00", "switched_at": None}
    o = decide(d, f, {"c1": naive, "r1": st(OLD)}, None, T0)       # observed: TypeError
    assert o.waves[0].states["c1"] in ("pending", "offline")


def test_one_status_read_that_times_out_does_not_roll_the_deployment_back() -> None:
    """read_statuses turns a RegistryError (a timeout on one request) into None, "no status yet"; classify
    then measures the silence from the wave's start, so in a wave older than offline_ok_hours (a wave waiting
    for its windows over a weekend) one unanswered request makes a robot `failed` and rolls everything back."""
    f, d = fleet(3, offline_ok_hours=72), dep()
    store: dict[str, dict] = {}
    t = T0
    for r in f.robots:
        store[f"{STATUS}/lab/{r.name}"] = st(OLD, at=t)
    flaky = {"on": False}

    FakeRegistry = registry_over(store, lambda kind, name: flaky["on"] and kind == STATUS and name == "lab/r2")
    L = partial(SimpleNamespace, deployments=[("deployments/towel.yaml", d)], robot_fleets=[("robots/lab.yaml", f)])

    def cycle(now: datetime):
        return robots_layer(L(), now, write=True, log=lambda e: None, tell=lambda s: None,  # type: ignore[arg-type]
                            registry=FakeRegistry)[0]

    cycle(t)                                                   # canary admitted
    store[f"{STATUS}/lab/c1"] = st(NEW, at=t)
    res = cycle(t)                                             # canary healthy, soak 0: wave `rest` starts
    assert res.outcome is not None and res.outcome.state.wave == 1
    # the rest wait for their window for three days (prestaged, running OLD, reporting every 30 s)
    later = t + timedelta(hours=73)
    for r in ("c1", "r1", "r2"):
        store[f"{STATUS}/lab/{r}"] = st(NEW if r == "c1" else OLD, at=later)
    res = cycle(later)
    assert res.outcome is not None and res.outcome.state.phase == "rolling"
    flaky["on"] = True                                         # one request for r2's status times out
    res = cycle(later + timedelta(minutes=1))
    assert res.outcome is None or res.outcome.state.phase == "rolling"   # observed: rolled-back
    assert store[f"{ROLLOUT}/lab/towel"]["phase"] == "rolling"


def test_a_robot_offline_during_its_soak_restarts_the_soak() -> None:
    """The canary soaks 30 min; it goes silent 5 min into the soak and is back healthy 40 min later: the wave
    passes at once, though its health was measured for 5 of its 30 soak minutes."""
    f, d = fleet(3), dep(soak=30)
    o = decide(d, f, {r.name: st(OLD) for r in f.robots}, None, T0)
    o = decide(d, f, {"c1": st(NEW), "r1": st(OLD), "r2": st(OLD)}, o.state, T0)     # soak starts at T0
    assert o.state.soak_started_at == T0
    t = T0 + timedelta(minutes=16)      # last heartbeat at T0+5: offline
    o = decide(d, f, {"c1": st(NEW, at=T0 + timedelta(minutes=5)), "r1": st(OLD, at=t), "r2": st(OLD, at=t)},
               o.state, t)
    assert o.waves[0].states["c1"] == "offline"
    t = T0 + timedelta(minutes=45)      # back, healthy
    o = decide(d, f, {"c1": st(NEW, at=t), "r1": st(OLD, at=t), "r2": st(OLD, at=t)}, o.state, t)
    assert o.state.wave == 0            # observed: wave-passed, `rest` started


# --- the agent on a full disk (a real docker-registry) --------------------------------------------------------





@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with registry(tmp_path_factory.mktemp("registry")) as u:
        yield u


def test_a_full_disk_still_reports_the_robot(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round first writes desired.json; on a full disk (ENOSPC) that OSError escapes Agent.round, so the
    agent pushes no status at all although the registry answers and the model runs: the loop sees the robot
    offline, then (offline_ok_hours) failed, and rolls the deployment back."""

    blob = tmp_path / "m.bin"
    blob.write_bytes(b"m" * 4096)
    digest = Registry(url).push_files("models/hunt", "m", [blob])
    Registry(url).push_json(DESIRED, "lab/full", {"deployment": "towel", "model": digest,
                                                  "repository": "models/hunt", "window": None})
    agent = Agent(url, "lab/full", tmp_path / "state")
    assert agent.round(T0)["running"] == digest

    def full(path: Path, data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(agent_mod, "write_file", full)
    t1 = T0 + timedelta(minutes=1)
    out = agent.round(t1)                            # observed: OSError [Errno 28]
    assert out["running"] == digest
    status = Registry(url).pull_json(STATUS, "lab/full")
    assert status is not None and status["heartbeat"] == t1.isoformat()


def test_status_of_a_rolled_back_robot_is_not_pending() -> None:
    """After a rollback every admitted robot runs its previous model again, as told; `fleet status` and the
    metric fleet_rollout_robots{state} show them `pending` ("admitted, not switched yet"), which is false: the
    rollback is complete and nothing is pending."""
    f, d = fleet(2), dep()
    o = decide(d, f, {"c1": st(OLD), "r1": st(OLD)}, None, T0)
    t = T0 + timedelta(minutes=10)
    o = decide(d, f, {"c1": st(NEW, "failed", at=t) | {"switched_at": T0.isoformat()}, "r1": st(OLD, at=t)},
               o.state, t)
    assert o.state.phase == "rolled-back" and o.desired["c1"]["model"] == OLD
    t2 = t + timedelta(minutes=1)
    back = {"c1": st(OLD, at=t2, previous=NEW), "r1": st(OLD, at=t2)}    # c1 is back on OLD, healthy
    seen, robots = summarize(d, f, back, o.state, t2)
    assert seen.phase == "rolled-back"
    assert [r.state for r in robots if r.robot == "c1"] != ["pending"]    # observed: pending
