"""`fleet status`'s robot section: each deployment's waves (robots updated, healthy, failed, offline, pending)
and each robot's model with the training job it came from. Pure."""

from __future__ import annotations

from collections.abc import Callable

from .observed import RobotsObservation

ROLLOUT_HEADER = ["deployment", "phase", "wave", "robots", "updated", "healthy", "failed", "offline", "pending",
                  "waiting", "model", "from job"]
ROBOT_HEADER = ["robot", "deployment", "state", "health", "running", "from job", "last heartbeat"]


def rollout_rows(obs: RobotsObservation) -> list[list[str]]:
    out = []
    for r in obs.rollouts:
        if r.problem:
            out.append([f"{r.fleet}/{r.deployment}", r.phase, "", "", "", "", "", "", "", "", r.digest[:19],
                        r.from_job or "", ])
            continue
        for w in r.waves:
            current = "*" if w.name == r.wave else ""
            out.append([f"{r.fleet}/{r.deployment}", r.phase, w.name + current, str(w.robots), str(w.updated),
                        str(w.healthy), str(w.failed), str(w.offline), str(w.pending), str(w.waiting),
                        r.digest[:19], r.from_job or ""])
    return out


def robot_rows(obs: RobotsObservation) -> list[list[str]]:
    return [[f"{r.fleet}/{r.robot}", r.deployment or "", r.state, r.health, (r.running or "none")[:19],
             r.from_job or "", r.heartbeat.isoformat() if r.heartbeat else "never"] for r in obs.robots]


def text(obs: RobotsObservation, table: Callable[[list[str], list[list[str]]], str]) -> str:
    """The section (empty without deployments); `table` is status/render.py's table layout."""
    if not obs.rollouts:
        return ""
    problems = "".join(f"  {r.fleet}/{r.deployment}: {r.problem}\n" for r in obs.rollouts if r.problem)
    return (f"\nrobot rollouts (* the current wave)\n{table(ROLLOUT_HEADER, rollout_rows(obs))}{problems}"
            f"\nrobots\n{table(ROBOT_HEADER, robot_rows(obs))}")


def tables(obs: RobotsObservation) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """The section for the HTML page: (title, id, header, rows) per table; none without deployments."""
    if not obs.rollouts:
        return []
    return [("Robot rollouts (* the current wave)", "rollouts", ROLLOUT_HEADER, rollout_rows(obs)),
            ("Robots", "robots", ROBOT_HEADER, robot_rows(obs))]
