"""The robots' metrics (`fleet_rollout_*`, `fleet_robot_*`), on FleetMetrics' registry. Pure bookkeeping.

Set from the snapshot's `robots` (what `fleet observe` and the loop's robots layer read): each wave's robots
by state, each rollout's phase, the rolling wave's age against its soak plus health timeout (the alert
FleetRolloutWaveStuck compares the two), each robot's health and last heartbeat; and a counter of the
rollouts' transitions (wave started, soak started, gate failed, rolled back, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge

from ..load import Loaded
from ..robots.observed import RobotsObservation
from . import names as n

STATES = ("updated", "healthy", "failed", "offline", "pending", "waiting")
PHASES = ("not-started", "rolling", "done", "rolled-back", "paused", "unreachable")


class RobotMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def g(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(name, doc, labels, registry=registry)

        self.robots = g(n.ROLLOUT_ROBOTS, "Robots of a rollout's wave by state (updated: running the digest)",
                        "robot_fleet", "deployment", "wave", "state")
        self.phase = g(n.ROLLOUT_PHASE, "1 for a rollout's phase", "robot_fleet", "deployment", "phase")
        self.age = g(n.ROLLOUT_WAVE_AGE, "Seconds since the rolling wave started", "robot_fleet", "deployment", "wave")
        self.deadline = g(n.ROLLOUT_WAVE_DEADLINE, "The rolling wave's soak plus health timeout, seconds",
                          "robot_fleet", "deployment", "wave")
        self.healthy = g(n.ROBOT_HEALTHY, "1 when the robot's policy server is healthy", "robot_fleet", "robot")
        self.heartbeat = g(n.ROBOT_HEARTBEAT, "When the robot last pushed its status (Unix seconds)",
                           "robot_fleet", "robot")
        self.events = Counter(n.ROLLOUT_EVENTS, "Rollout transitions", ["robot_fleet", "deployment", "kind"],
                              registry=registry)

    def update(self, obs: RobotsObservation, deadlines: Mapping[tuple[str, str, str], float], now: datetime) -> None:
        """`deadlines`: (fleet, deployment, wave) -> soak plus health timeout, seconds (from the deployments)."""
        for gauge in (self.robots, self.phase, self.age, self.deadline, self.healthy, self.heartbeat):
            gauge.clear()
        for r in obs.rollouts:
            for phase in PHASES:
                self.phase.labels(r.fleet, r.deployment, phase).set(1 if phase == r.phase else 0)
            for w in r.waves:
                for state in STATES:
                    self.robots.labels(r.fleet, r.deployment, w.name, state).set(getattr(w, state))
            if r.phase == "rolling" and r.wave_started_at is not None:
                self.age.labels(r.fleet, r.deployment, r.wave).set((now - r.wave_started_at).total_seconds())
                self.deadline.labels(r.fleet, r.deployment, r.wave).set(
                    deadlines.get((r.fleet, r.deployment, r.wave), 0.0))
        for robot in obs.robots:
            self.healthy.labels(robot.fleet, robot.robot).set(1 if robot.health == "ok" else 0)
            if robot.heartbeat is not None:
                self.heartbeat.labels(robot.fleet, robot.robot).set(robot.heartbeat.timestamp())

    def event(self, fleet: str, deployment: str, kind: str) -> None:
        self.events.labels(fleet, deployment, kind).inc()


def wave_deadlines(loaded: Loaded) -> dict[tuple[str, str, str], float]:
    """(fleet, deployment, wave) -> the wave's soak plus the deployment's health timeout, in seconds."""
    return {(d.fleet, d.name, w.name): (w.soak_minutes + d.gates.health_timeout_minutes) * 60
            for _, d in loaded.deployments for w in d.rollout.waves}
