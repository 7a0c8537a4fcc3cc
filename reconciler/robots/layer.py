"""The `robots` layer of `fleet reconcile`: per deployment, read the rollout's record and its robots' statuses
from the fleet's registry, decide (`rollout.decide`, pure), push the desired states that changed and the
record.  EFFECT (network).

A registry that does not answer is reported and its deployments wait for the next cycle; nothing is pushed
unless the loop writes (not a dry run, not paused, the leader). Every event of the decision is an audit line
(`{"event": "robots", ...}` in the loop's log) and an entry of the rollout's record, which `fleet status` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from ..load import Loaded
from ..observe.model import Snapshot
from .models import Deployment, RobotFleet
from .observed import RobotSeen, RobotsObservation, RolloutSeen
from .registry import ROLLOUT, STATUS, Registry, RegistryError
from .rollout import Outcome, RolloutState, decide, doc_digest, summarize
from .validate import wave_robots

THREADS = 8


@dataclass(frozen=True)
class DeploymentResult:
    deployment: str
    fleet: str
    outcome: Outcome | None
    pushed: int = 0
    error: str = ""
    seen: tuple[RobotSeen, ...] = ()        # its robots as the decision saw them (the snapshot's robots)
    statuses: Mapping[str, Mapping[str, Any] | None] | None = None   # what the decision read


def read_statuses(reg: Registry, fleet: str, robots: list[str]) -> dict[str, Mapping[str, Any] | None]:
    """Each robot's last status (None: none yet, or one that does not read)."""
    def one(robot: str) -> Mapping[str, Any] | None:
        try:
            return reg.pull_json(STATUS, f"{fleet}/{robot}")
        except RegistryError as e:
            return {"unread": e.message}     # not "no status": the robot may be fine

    with ThreadPoolExecutor(THREADS) as pool:
        return dict(zip(robots, pool.map(one, robots), strict=True))


def robots_layer(loaded: Loaded, now: datetime, *, write: bool, log: Callable[[dict[str, Any]], None],
                 tell: Callable[[str], None], registry: Callable[[str], Registry] = Registry) -> list[DeploymentResult]:
    fleets = {f.name: f for _, f in loaded.robot_fleets}
    registries: dict[str, Registry] = {}
    out = []
    try:
        for _, dep in loaded.deployments:
            fleet = fleets.get(dep.fleet)
            if fleet is None:
                continue
            reg = registries.get(fleet.registry) or registries.setdefault(fleet.registry, registry(fleet.registry))
            result = _one(reg, dep, fleet, now, write)
            out.append(result)
            _report(result, dep, now, write, log, tell)
    finally:
        for reg in registries.values():
            reg.close()
    return out


def _one(reg: Registry, dep: Deployment, fleet: RobotFleet, now: datetime, write: bool) -> DeploymentResult:
    name = f"{fleet.name}/{dep.name}"
    try:
        state = _state(reg.pull_json(ROLLOUT, name))
        robots = [r for _, rs in wave_robots(dep, fleet) for r in rs]
        statuses = read_statuses(reg, fleet.name, robots)
        outcome = decide(dep, fleet, statuses, state, now)
        seen = summarize(dep, fleet, statuses, outcome.state, now)[1]
        if not write:
            return DeploymentResult(dep.name, fleet.name, outcome, seen=seen, statuses=statuses)
        todo = {r: d for r, d in outcome.desired.items() if outcome.state.pushed.get(r) != doc_digest(d)}

        def push(item: tuple[str, dict[str, Any]]) -> tuple[str, str | None]:
            try:
                reg.push_json("fleet-desired", f"{fleet.name}/{item[0]}", item[1])
                return item[0], doc_digest(item[1])
            except RegistryError:
                return item[0], None

        with ThreadPoolExecutor(THREADS) as pool:
            done = {r: d for r, d in pool.map(push, todo.items()) if d is not None}
        new = outcome.state.model_copy(update={"pushed": {**outcome.state.pushed, **done}})
        if new != state:
            reg.push_json(ROLLOUT, name, new.model_dump(mode="json"))
        missed = len(todo) - len(done)
        return DeploymentResult(dep.name, fleet.name, Outcome(new, outcome.desired, outcome.events, outcome.waves,
                                                              outcome.from_job), len(done),
                                f"{missed} desired state(s) not pushed; pushed again next cycle" if missed else "",
                                seen, statuses)
    except RegistryError as e:
        return DeploymentResult(dep.name, fleet.name, None, error=f"{e.message} (hint: {e.hint})")


def _report(result: DeploymentResult, dep: Deployment, now: datetime, write: bool,
            log: Callable[[dict[str, Any]], None], tell: Callable[[str], None]) -> None:
    where = f"{result.fleet}/{result.deployment}"
    if result.outcome is None:
        tell(f"  robots: {where}: {result.error}; its robots keep what they run")
        log({"event": "robots", "time": now.isoformat(), "deployment": where, "kind": "unreachable",
             "message": result.error})
        return
    o = result.outcome
    for ev in o.events:
        tell(f"  robots: {where}: {ev.kind}: {ev.message}" + ("" if write else " (not written)"))
        log({"event": "robots", "time": now.isoformat(), "deployment": where, "kind": ev.kind, "wave": ev.wave,
             "digest": o.state.digest, "message": ev.message, "written": write})
    waves = ", ".join(f"{w.name} {w.count('healthy')}/{len(w.robots)} healthy" for w in o.waves)
    tell(f"  robots: {where}: {o.state.phase}, wave {o.waves[o.state.wave].name}; {waves}"
         + (f"; {result.pushed} desired state(s) pushed" if result.pushed else "")
         + (f"; {result.error}" if result.error else ""))


def observe_robots(loaded: Loaded, now: datetime, registry: Callable[[str], Registry] = Registry) -> RobotsObservation:
    """Every deployment's rollout and robots, read from the registries (`fleet observe`); a registry that does
    not answer is a rollout in phase `unreachable` with the reason, never an exception."""
    fleets = {f.name: f for _, f in loaded.robot_fleets}
    rollouts: list[RolloutSeen] = []
    robots: list[RobotSeen] = []
    for _, dep in loaded.deployments:
        fleet = fleets.get(dep.fleet)
        if fleet is None:
            continue
        reg = registry(fleet.registry)
        try:
            doc = reg.pull_json(ROLLOUT, f"{fleet.name}/{dep.name}")
            state = _state(doc)
            names = [r for _, rs in wave_robots(dep, fleet) for r in rs]
            seen, mine = summarize(dep, fleet, read_statuses(reg, fleet.name, names), state, now)
            rollouts.append(seen)
            robots.extend(mine)
        except RegistryError as e:
            rollouts.append(RolloutSeen(fleet=fleet.name, deployment=dep.name, digest=dep.digest,
                                        from_job=dep.model.from_job, phase="unreachable", problem=e.message))
        finally:
            reg.close()
    return RobotsObservation(rollouts=tuple(rollouts), robots=tuple(robots))


def _state(doc: Mapping[str, Any] | None) -> RolloutState | None:
    try:
        return RolloutState.model_validate(doc) if doc else None
    except ValidationError:
        return None          # a record this version cannot read: the rollout starts again from its first wave


def with_robots(snap: Snapshot, loaded: Loaded) -> Snapshot:
    """`snap` with the robots of the repository's deployments read into its `robots` (`fleet observe`)."""
    if not loaded.deployments:
        return snap
    return snap.model_copy(update={"robots": observe_robots(loaded, snap.observed_at)})


def observation(results: list[DeploymentResult], loaded: Loaded, now: datetime) -> RobotsObservation:
    """The loop's robots layer as the snapshot's `robots` (for the metrics), without reading anything again."""
    deps = {(d.fleet, d.name): d for _, d in loaded.deployments}
    fleets = {f.name: f for _, f in loaded.robot_fleets}
    rollouts: list[RolloutSeen] = []
    robots: list[RobotSeen] = []
    for r in results:
        dep, fleet = deps[(r.fleet, r.deployment)], fleets[r.fleet]
        if r.outcome is None:
            rollouts.append(RolloutSeen(fleet=r.fleet, deployment=r.deployment, digest=dep.digest,
                                        from_job=dep.model.from_job, phase="unreachable", problem=r.error))
            continue
        statuses = r.statuses if r.statuses is not None else {
            s.robot: {"running": s.running, "health": s.health, "from_job": s.from_job,
                      "heartbeat": s.heartbeat.isoformat() if s.heartbeat else None} for s in r.seen}
        rollouts.append(summarize(dep, fleet, statuses, r.outcome.state, now)[0])
        robots.extend(r.seen)
    return RobotsObservation(rollouts=tuple(rollouts), robots=tuple(robots))
