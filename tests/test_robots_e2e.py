"""A rollout through a real registry (Debian's docker-registry) to three real `fleet robot-agent --once`
processes, each with its own state folder and health endpoint, driven by `fleet reconcile`'s robots layer at
times the test chooses (FLEET_NOW for the agents, the loop's injected clock): a canary, its soak and the
full rollout; a robot whose registry route is cut (a proxy the test stops) that keeps running and catches
up; then a bad model whose canary fails its health gate and is rolled back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from robot_parts import Health, Proxy, registry

from reconciler import pipeline, sources
from reconciler.catalog import load_catalog
from reconciler.load import load
from reconciler.observability.metrics import FleetMetrics
from reconciler.observe.model import Snapshot
from reconciler.reconcile.loop import Config, Reconciler
from reconciler.robots.layer import observe_robots
from reconciler.robots.registry import Registry
from reconciler.status import status
from reconciler.status.render import to_html, to_json, to_text

from builders import PRIORITIES, TEAMS

FLEET = Path(sys.executable).with_name("fleet")
T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
ROBOTS = ("r1", "r2", "r3")


@pytest.fixture(scope="module")
def reg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with registry(tmp_path_factory.mktemp("registry")) as url:
        yield url


def push_model(url: str, tmp: Path, name: str, content: bytes) -> str:
    blob = tmp / f"{name}.bin"
    blob.write_bytes(content)
    return Registry(url).push_files("models/policy", name, [blob])


def write_repo(repo: Path, url: str, digest: str, *, soak: int = 1) -> None:
    (repo / "policies").mkdir(parents=True, exist_ok=True)
    (repo / "robots").mkdir(exist_ok=True)
    (repo / "deployments").mkdir(exist_ok=True)
    (repo / "policies/teams.yaml").write_text(TEAMS)
    (repo / "policies/priorities.yaml").write_text(PRIORITIES)
    (repo / "robots/lab.yaml").write_text(
        f"name: lab\nregistry: {url}\nlink: {{uplink_mbps: 100, offline_ok_hours: 24}}\n"
        "defaults: {disk_gb: 100}\nrobots:\n"
        "  - {name: r1, labels: {ring: canary}}\n  - {name: r2}\n  - {name: r3}\n")
    host = url.removeprefix("http://")
    (repo / "deployments/towel.yaml").write_text(
        f"name: towel\nfleet: lab\nteam: vision\n"
        f'model: {{artifact: "{host}/models/policy@{digest}", size_gb: 0.001}}\n'
        f'server: {{image: "{host}/server@sha256:{"a" * 64}", port: 8000, health_path: /healthz}}\n'
        f"rollout:\n  waves:\n    - {{name: canary, selector: {{ring: canary}}, soak_minutes: {soak}}}\n"
        "    - {name: rest}\n"
        "gates: {health_timeout_minutes: 1, abort_failed_percent: 10}\non_failure: rollback\n")


class Lab:
    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp, self.url, self.now = tmp, url, T0
        self.repo = tmp / "repo"
        self.log = tmp / "audit.jsonl"
        port = int(url.rsplit(":", 1)[1])
        self.proxy = Proxy(port)         # r3's route to the registry
        self.health = {r: Health(tmp / r) for r in ROBOTS}
        self.said: list[str] = []
        self.loop: Reconciler | None = None
        self.metrics = FleetMetrics()

    def cycle(self) -> list[Any]:
        if self.loop is None:
            config = Config(repo=self.repo, once=True, layers=("robots",), log_file=self.log)
            # a repository of robots only: the loop observes no cluster, plans nothing, runs its robots layer
            self.loop = Reconciler(config, clock=lambda: self.now, say=self.said.append, metrics=self.metrics)
        report = self.loop.cycle()
        assert not report.errors, report.errors
        return report.robots

    def agents(self) -> dict[str, dict[str, Any]]:
        """One `fleet robot-agent --once` round of every robot, at once (three processes)."""
        env = {**os.environ, "FLEET_NOW": self.now.isoformat()}
        procs = {r: subprocess.Popen(
            [str(FLEET), "robot-agent", "--registry", self.proxy.url if r == "r3" else self.url, "--robot",
             f"lab/{r}", "--state-dir", str(self.tmp / r), "--once", "--health-url", self.health[r].url,
             "--timeout", "10"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in ROBOTS}
        out = {}
        for r, p in procs.items():
            stdout, stderr = p.communicate(timeout=60)
            assert p.returncode == 0, stderr
            (line,) = stdout.splitlines()
            out[r] = json.loads(line)
        return out

    def events(self) -> list[str]:
        return [d["kind"] for d in map(json.loads, self.log.read_text().splitlines()) if d.get("event") == "robots"]


@pytest.fixture(scope="module")
def lab(reg: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("lab"), reg)
    yield lab
    lab.proxy.stop()
    for h in lab.health.values():
        h.close()


def test_canary_soak_and_full_rollout_with_an_offline_robot(lab: Lab, tmp_path: Path) -> None:
    good = push_model(lab.url, tmp_path, "v1", b"weights v1 " * 100)
    write_repo(lab.repo, lab.url, good)
    before = lab.agents()                        # nothing desired yet: nothing runs
    assert before["r1"] == {"robot": "lab/r1", "deployment": None, "running": None, "health": "unknown",
                            "registry": "ok"}

    (res,) = lab.cycle()                         # canary admitted
    assert [w.robots for w in res.outcome.waves] == [("r1",), ("r2", "r3")] and res.pushed == 1
    ran = lab.agents()
    assert ran["r1"]["running"] == good and ran["r1"]["health"] == "ok"
    assert ran["r2"]["running"] is None                      # the rest waits for the canary
    assert (lab.tmp / "r1/current").resolve().name == good.split(":")[1]

    (res,) = lab.cycle()                         # canary healthy: its soak starts
    assert res.outcome.state.soak_started_at == lab.now and res.outcome.state.wave == 0
    lab.now += timedelta(seconds=30)
    (res,) = lab.cycle()                         # mid-soak: still the canary
    assert res.outcome.state.wave == 0 and res.pushed == 0

    lab.now += timedelta(seconds=31)
    (res,) = lab.cycle()                         # soaked: the rest is admitted
    assert res.outcome.state.wave == 1 and res.pushed == 2
    lab.proxy.stop()                             # r3 loses its registry route
    ran = lab.agents()
    assert ran["r2"]["running"] == good and ran["r3"] == {
        "robot": "lab/r3", "deployment": None, "running": None, "health": "unknown", "registry": "unreachable"}
    (res,) = lab.cycle()
    assert dict(res.outcome.waves[1].states) == {"r2": "healthy", "r3": "pending"}
    lab.now += timedelta(minutes=11)             # no heartbeat from r3 for longer than OFFLINE_AFTER
    lab.agents()
    (res,) = lab.cycle()
    assert res.outcome.state.phase == "rolling"      # r3 is offline: pending, not failed (offline_ok_hours)
    assert dict(res.outcome.waves[1].states) == {"r2": "healthy", "r3": "offline"}

    lab.now += timedelta(minutes=20)
    lab.proxy.start()                            # back online: it catches up
    ran = lab.agents()
    assert ran["r3"]["running"] == good and ran["r3"]["health"] == "ok"
    (res,) = lab.cycle()
    assert res.outcome.state.phase == "done"
    assert lab.events() == ["rollout-started", "soak-started", "wave-passed", "wave-started", "soak-started",
                            "wave-passed", "done"]
    assert any("robots: lab/towel: done" in line for line in lab.said)

    text = lab.metrics.exposition()                                            # the loop's metrics
    assert 'fleet_rollout_phase{deployment="towel",phase="done",robot_fleet="lab"} 1.0' in text
    assert 'fleet_rollout_events_total{deployment="towel",kind="wave-passed",robot_fleet="lab"} 2.0' in text
    assert 'fleet_rollout_robots{deployment="towel",robot_fleet="lab",state="healthy",wave="rest"} 2.0' in text
    assert 'fleet_robot_healthy{robot="r3",robot_fleet="lab"} 1.0' in text

    seen = observe_robots(load(sources.read_worktree(lab.repo)), lab.now)      # `fleet observe`'s robots
    (rollout,) = seen.rollouts
    assert (rollout.phase, [(w.name, w.robots, w.updated, w.healthy) for w in rollout.waves]) == (
        "done", [("canary", 1, 1, 1), ("rest", 2, 2, 2)])
    assert {r.robot: (r.running, r.state) for r in seen.robots} == {r: (good, "healthy") for r in ROBOTS}
    files = sources.read_worktree(lab.repo)                                     # `fleet status`
    report = status(pipeline.check(files, load_catalog()), Snapshot(observed_at=lab.now, clusters=(), robots=seen))
    shown = to_text(report)
    assert "lab/towel   done   canary  1       1        1" in shown and "lab/r3  towel" in shown
    assert json.loads(to_json(report))["robots"]["rollouts"][0]["phase"] == "done"
    assert '<table id="rollouts">' in to_html(report) and "<td>lab/r2</td>" in to_html(report)


def test_a_failed_canary_is_rolled_back(lab: Lab, tmp_path: Path) -> None:
    good = json.loads((lab.tmp / "r1/agent.json").read_text())["running"]
    bad = push_model(lab.url, tmp_path, "v2", b"BAD weights")
    write_repo(lab.repo, lab.url, bad)
    lab.now += timedelta(hours=1)
    (res,) = lab.cycle()                         # a new digest: a new rollout, canary first
    assert res.outcome.state.wave == 0 and res.outcome.state.previous == {"r1": good}
    ran = lab.agents()
    assert ran["r1"]["running"] == bad and ran["r1"]["health"] == "failed"
    assert ran["r2"]["running"] == good                      # not admitted: untouched
    (res,) = lab.cycle()                         # inside its health timeout: pending
    assert res.outcome.state.phase == "rolling"

    lab.now += timedelta(minutes=1)
    lab.agents()
    (res,) = lab.cycle()                         # unhealthy past the timeout: the gate fails, rollback
    assert res.outcome.state.phase == "rolled-back" and res.pushed == 1
    assert [e.kind for e in res.outcome.events] == ["gate-failed", "rolled-back"]
    ran = lab.agents()
    assert {r: (d["running"], d["health"]) for r, d in ran.items()} == {r: (good, "ok") for r in ROBOTS}
    kept = {p.name for p in (lab.tmp / "r1/models").iterdir()}
    assert kept == {good.split(":")[1], bad.split(":")[1]}       # the previous model is kept
    (res,) = lab.cycle()                         # stays rolled back until the deployment changes
    assert res.outcome.state.phase == "rolled-back" and res.pushed == 0
