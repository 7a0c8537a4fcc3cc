"""The robots layer's decision: a function of a deployment, its robots' statuses, the rollout's record and the
time. Pure (the registry reads and pushes around it are `layer.py`).

A rollout of a deployment's model digest goes wave by wave. In the current wave, robots are admitted (sent
the new model in their desired state) `max_unavailable` at a time; each robot of the wave is then
    healthy   it runs the digest and its server answers its health path
    failed    it runs the digest and is not healthy `health_timeout_minutes` after it switched, or it has not
              reported for `offline_ok_hours` (link.offline_ok_hours)
    offline   no report for OFFLINE_AFTER (it keeps running what it has and catches up when back): pending
    pending   not switched yet (prestaging, waiting for its window), or switched and inside its health timeout
The gate fails as soon as the failed robots reach `abort_failed_percent` of the wave (and at least one); then
`on_failure: rollback` sends every admitted robot of the deployment back to the digest it ran before (at once,
no window) and `pause` stops admitting. A wave whose robots are all healthy or failed (under the gate) soaks
`soak_minutes`; then the next wave starts; after the last one the rollout is done. Every change of phase,
wave or soak is an `Event`, kept in the record (the last EVENTS_KEPT) and written as an audit line by the
caller. A new digest in the deployment starts a new rollout from the first wave.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from .models import Deployment, RobotFleet, split_ref
from .observed import RobotSeen, RolloutSeen, WaveSeen
from .validate import wave_robots

OFFLINE_AFTER = timedelta(minutes=10)
"""A robot whose last heartbeat is older than this is offline (the agent reports every 30 s by default)."""
EVENTS_KEPT = 50
Phase = Literal["rolling", "done", "rolled-back", "paused"]
RobotState = Literal["healthy", "failed", "offline", "pending", "waiting"]


class Event(BaseModel):
    model_config = ConfigDict(frozen=True)
    at: datetime
    kind: str    # rollout-started, wave-started, soak-started, wave-passed, gate-failed, rolled-back, paused, done
    wave: str
    message: str


class RolloutState(BaseModel):
    """The loop's record of one deployment's rollout (`fleet-rollout/<fleet>/<deployment>` in the registry)."""

    model_config = ConfigDict(frozen=True)
    deployment: str
    digest: str
    phase: Phase = "rolling"
    wave: int = 0
    wave_started_at: datetime
    soak_started_at: datetime | None = None
    admitted: tuple[str, ...] = ()
    previous: dict[str, str | None] = {}
    pushed: dict[str, str] = {}          # robot -> digest of the desired state last pushed to it
    events: tuple[Event, ...] = ()


@dataclass(frozen=True)
class WaveView:
    name: str
    robots: tuple[str, ...]
    states: Mapping[str, RobotState]       # robots not admitted yet are `waiting`

    def count(self, state: RobotState) -> int:
        return sum(1 for s in self.states.values() if s == state)


@dataclass(frozen=True)
class Outcome:
    state: RolloutState
    desired: Mapping[str, dict[str, Any]]     # robot -> its desired state (robots not admitted: absent)
    events: tuple[Event, ...]
    waves: tuple[WaveView, ...]
    from_job: Mapping[str, str | None] = field(default_factory=dict)   # robot -> training job of what it runs


def classify(status: Mapping[str, Any] | None, digest: str, since: datetime, now: datetime,
             health_timeout: timedelta, offline_ok: timedelta) -> RobotState:
    if status is not None and status.get("unread"):
        return "offline"      # its status did not read this cycle (the registry): not evidence of silence
    beat = _time(status.get("heartbeat")) if status else None
    if beat is None or now - beat > OFFLINE_AFTER:
        return "failed" if now - (beat or since) > offline_ok else "offline"
    assert status is not None
    if status.get("running") != digest:
        return "pending"
    if status.get("health") == "ok":
        return "healthy"
    switched = _time(status.get("switched_at")) or beat
    return "failed" if now - switched >= health_timeout else "pending"


def decide(dep: Deployment, fleet: RobotFleet, statuses: Mapping[str, Mapping[str, Any] | None],
           state: RolloutState | None, now: datetime) -> Outcome:
    digest = dep.digest
    waves = wave_robots(dep, fleet)
    events: list[Event] = []
    if state is None or state.digest != digest:
        state = RolloutState(deployment=dep.name, digest=digest, wave_started_at=now)
        events.append(Event(at=now, kind="rollout-started", wave=waves[0][0].name,
                            message=f"rollout of {digest[:19]} to {sum(len(r) for _, r in waves)} robot(s) in "
                                    f"{len(waves)} wave(s) starts with wave {waves[0][0].name}"))
    timeout = timedelta(minutes=dep.gates.health_timeout_minutes)
    offline_ok = timedelta(hours=fleet.link.offline_ok_hours)
    admitted = list(state.admitted)
    previous = dict(state.previous)
    for r in admitted:        # a robot offline when admitted: what it ran before is learnt when it reports
        st = statuses.get(r)
        if previous.get(r) is None and st and st.get("running") not in (None, digest):
            previous[r] = st.get("running")
        elif previous.get(r) is None and st and st.get("running") == digest and st.get("previous") != digest:
            previous[r] = st.get("previous")      # it switched before the loop read it: what it ran is `previous`
    wave, phase, started, soak = state.wave, state.phase, state.wave_started_at, state.soak_started_at

    def view(i: int) -> WaveView:
        return _wave_view(waves, i, admitted, statuses, digest, started, now, timeout, offline_ok)

    while phase == "rolling" and wave < len(waves):
        w, robots = waves[wave]
        v = view(wave)
        failed = v.count("failed")
        if failed and 100 * failed / len(robots) >= dep.gates.abort_failed_percent:
            phase = "rolled-back" if dep.on_failure == "rollback" else "paused"
            bad = ", ".join(r for r in robots if v.states[r] == "failed")
            events.append(Event(at=now, kind="gate-failed", wave=w.name,
                                message=f"wave {w.name}: {failed} of {len(robots)} robot(s) failed ({bad}), at or "
                                        f"over abort_failed_percent {dep.gates.abort_failed_percent:g}"))
            events.append(Event(at=now, kind=phase, wave=w.name, message=(
                f"every admitted robot ({len(admitted)}) goes back to the model it ran before" if phase == "rolled-back"
                else "no more robots are admitted until the deployment changes")))
            break
        in_flight = [r for r in robots if v.states[r] in ("pending", "offline")]
        for r in robots:
            if len(in_flight) >= w.batch(len(robots)):
                break
            if r not in admitted:
                admitted.append(r)
                in_flight.append(r)
                st = statuses.get(r)
                previous[r] = (st.get("previous") if st.get("running") == digest else st.get("running")) if st else None
        v = view(wave)
        if any(s in ("pending", "offline", "waiting") for s in v.states.values()):
            soak = None       # a robot not measured healthy (or failed) soaks again from when it is
            break
        if soak is None:
            soak = now
            events.append(Event(at=now, kind="soak-started", wave=w.name,
                                message=f"wave {w.name}: {v.count('healthy')} healthy, {failed} failed; soaks "
                                        f"{w.soak_minutes:g} min"))
        if now - soak < timedelta(minutes=w.soak_minutes):
            break
        events.append(Event(at=now, kind="wave-passed", wave=w.name, message=f"wave {w.name} passed its soak: "
                            f"{v.count('healthy')} healthy, {failed} failed of {len(robots)}"))
        wave, started, soak = wave + 1, now, None
        if wave == len(waves):
            phase = "done"
            events.append(Event(at=now, kind="done", wave=w.name, message=f"every wave runs {digest[:19]}"))
        else:
            events.append(Event(at=now, kind="wave-started", wave=waves[wave][0].name,
                                message=f"wave {waves[wave][0].name} starts ({len(waves[wave][1])} robot(s))"))
    new = state.model_copy(update={
        "phase": phase, "wave": min(wave, len(waves) - 1), "wave_started_at": started, "soak_started_at": soak,
        "admitted": tuple(admitted), "previous": previous,
        "events": (*state.events, *events)[-EVENTS_KEPT:]})
    desired = {r: desired_state(dep, new, r) for r in admitted}
    shown = tuple(view(i) for i in range(len(waves)))
    jobs = {r: (st.get("from_job") if st else None) for r, st in statuses.items()}
    return Outcome(new, desired, tuple(events), shown, jobs)


def _wave_view(waves: Any, i: int, admitted: list[str], statuses: Mapping[str, Mapping[str, Any] | None],
               digest: str, since: datetime, now: datetime, timeout: timedelta, offline_ok: timedelta,
               back: Mapping[str, str | None] | None = None) -> WaveView:
    """`back`: after a rollback, a robot that runs the model it was sent back to is measured against it (one
    still on the new model, against the new one: failed, healthy, ...)."""
    w, robots = waves[i]

    def target(r: str) -> str:
        was = (back or {}).get(r)
        return was if was and (statuses.get(r) or {}).get("running") == was else digest

    return WaveView(w.name, robots, {r: classify(statuses.get(r), target(r), since, now, timeout, offline_ok)
                                     if r in admitted else "waiting" for r in robots})


def desired_state(dep: Deployment, state: RolloutState, robot: str) -> dict[str, Any]:
    """What `robot` is told to run: the new model, or in a rollback the one it ran before (at once)."""
    back = state.phase == "rolled-back"
    model = state.previous.get(robot) if back else state.digest
    _, repo, _ = split_ref(dep.model.artifact)
    window = dep.rollout.window
    return {"deployment": dep.name, "model": model, "repository": repo, "server": dep.server.image,
            "health_url": f"http://127.0.0.1:{dep.server.port}{dep.server.health_path}",
            "from_job": None if back else dep.model.from_job, "rollback": back,
            "window": None if back or window is None else {"cron": window.cron, "hours": window.hours}}


def doc_digest(doc: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)   # a robot's clock without offset: UTC


def summarize(dep: Deployment, fleet: RobotFleet, statuses: Mapping[str, Mapping[str, Any] | None],
              state: RolloutState | None, now: datetime) -> tuple[RolloutSeen, tuple[RobotSeen, ...]]:
    """The rollout as `fleet observe` and `fleet status` show it: its waves by state, and each robot (no record
    yet: `not-started`, every robot waiting)."""
    waves = wave_robots(dep, fleet)
    if state is not None and state.digest != dep.digest:
        state = None          # the record is of the digest before: this one has not started
    admitted = list(state.admitted) if state else []
    since = state.wave_started_at if state else now
    timeout = timedelta(minutes=dep.gates.health_timeout_minutes)
    back = state.previous if state and state.phase == "rolled-back" else None
    views = [_wave_view(waves, i, admitted, statuses, dep.digest, since, now, timeout,
                        timedelta(hours=fleet.link.offline_ok_hours), back) for i in range(len(waves))]
    shown = []
    for v in views:
        updated = sum(1 for r in v.robots if (statuses.get(r) or {}).get("running") == dep.digest)
        shown.append(WaveSeen(name=v.name, robots=len(v.robots), updated=updated, healthy=v.count("healthy"),
                              failed=v.count("failed"), offline=v.count("offline"), pending=v.count("pending"),
                              waiting=v.count("waiting")))
    seen = RolloutSeen(fleet=fleet.name, deployment=dep.name, digest=dep.digest, from_job=dep.model.from_job,
                       phase=state.phase if state else "not-started",
                       wave=views[min(state.wave, len(views) - 1)].name if state else views[0].name,
                       wave_started_at=state.wave_started_at if state else None,
                       soak_started_at=state.soak_started_at if state else None, waves=tuple(shown),
                       last_event=state.events[-1].message if state and state.events else "")
    robots = []
    for v in views:
        for r in v.robots:
            st = statuses.get(r) or {}
            robots.append(RobotSeen(fleet=fleet.name, robot=r, deployment=st.get("deployment"),
                                    running=st.get("running"), from_job=st.get("from_job"),
                                    health=str(st.get("health") or "unknown"), heartbeat=_time(st.get("heartbeat")),
                                    state=v.states[r]))
    return seen, tuple(robots)
