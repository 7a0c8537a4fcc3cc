"""What `fleet observe` reads of the robots (the snapshot's `robots`): each deployment's rollout, wave by wave,
and each robot's last status. Pure values (the reading is `layer.observe_robots`)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WaveSeen(_Frozen):
    name: str = Field(description="wave name")
    robots: int = Field(description="robots in the wave")
    updated: int = Field(0, description="robots running the deployment's digest")
    healthy: int = Field(0, description="updated and healthy")
    failed: int = Field(0, description="unhealthy past the health timeout, or silent past offline_ok_hours")
    offline: int = Field(0, description="silent for a while, not yet for offline_ok_hours")
    pending: int = Field(0, description="admitted, not switched or inside the health timeout")
    waiting: int = Field(0, description="not admitted yet")


class RolloutSeen(_Frozen):
    fleet: str = Field(description="robot fleet")
    deployment: str = Field(description="deployment name")
    digest: str = Field(description="the model digest rolled out")
    from_job: str | None = Field(None, description="the training job that made it")
    phase: str = Field(description="not-started | rolling | done | rolled-back | paused | unreachable")
    wave: str = Field("", description="the current wave")
    wave_started_at: datetime | None = Field(None, description="when the current wave started")
    soak_started_at: datetime | None = Field(None, description="when its soak started")
    waves: tuple[WaveSeen, ...] = Field((), description="each wave's robots by state")
    last_event: str = Field("", description="the rollout's last transition")
    problem: str = Field("", description="why it could not be read (the registry did not answer)")


class RobotSeen(_Frozen):
    fleet: str = Field(description="robot fleet")
    robot: str = Field(description="robot name")
    deployment: str | None = Field(None, description="the deployment it runs")
    running: str | None = Field(None, description="model digest running")
    from_job: str | None = Field(None, description="training job the running model came from")
    health: str = Field("unknown", description="ok | failed | unknown")
    heartbeat: datetime | None = Field(None, description="last status it pushed")
    state: str = Field("unknown", description="healthy | failed | offline | pending | waiting in its rollout")


class RobotsObservation(_Frozen):
    rollouts: tuple[RolloutSeen, ...] = Field((), description="one per deployment, by fleet then name")
    robots: tuple[RobotSeen, ...] = Field((), description="every robot of a deployment, by fleet then name")
