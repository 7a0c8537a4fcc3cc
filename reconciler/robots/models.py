"""The two robot documents (DESIGN 4d) as frozen models: `robots/<fleet>.yaml` and `deployments/<name>.yaml`. Pure.

Field rules that one value can check live here (digests, label syntax, a window's length); rules across fields
or documents (waves that overlap or leave robots out, a model that does not fit a robot's disk, a window the
link cannot fill) are in `robots/validate.py`, where each failure points at its line.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from ..models import Model, Name, Port

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
Digest = Annotated[str, Field(pattern=DIGEST_PATTERN, description="sha256:<64 lowercase hex digits>")]
PINNED = re.compile(r"^(?P<repository>[a-z0-9][a-z0-9._:/-]*[a-z0-9])@(?P<digest>sha256:[0-9a-f]{64})$")
"""An OCI reference pinned by digest: `host[:port]/path@sha256:<64 hex>` (a tag alone can be moved)."""
LABEL = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
LabelKey = Annotated[str, Field(pattern=LABEL, max_length=63)]
LabelValue = Annotated[str, Field(pattern=LABEL, max_length=63)]
Labels = dict[LabelKey, LabelValue]
Positive = Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0)]
MAX_DISK_GB = 1_000_000.0
"""A petabyte: far above any robot's disk, low enough that a typo cannot pass for a size."""
Runtime = Literal["agent", "k3s"]


# --- robots/<fleet>.yaml ------------------------------------------------------------------------------------


class Link(Model):
    uplink_mbps: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=1_000_000)] = Field(
        description="the site's uplink from the registry, Mbit/s (shared by its robots)")
    offline_ok_hours: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=8760)] = Field(
        72, description="a robot that does not report this long is failed; until then it is pending")


class GitOps(Model):
    repo: str = Field(pattern=r"^(https://|git@)[!-~]+$", max_length=1024,
                      description="the git repository Rancher Fleet reads the rendered policy servers from")
    branch: str = Field("main", pattern=r"^[A-Za-z0-9._/-]+$", max_length=255, description="its branch")
    path: str = Field("rendered", pattern=r"^[A-Za-z0-9._-][A-Za-z0-9._/-]*$", max_length=255,
                      description="the folder of that repository where `fleet render --out` output is committed")


class RobotDefaults(Model):
    runtime: Runtime = Field("agent", description="agent: `fleet robot-agent` switches the model; k3s: "
                             "Rancher Fleet deploys the policy server (fleet render writes a GitRepo per wave)")
    compute: str | None = Field(None, description="the robot's inference computer, e.g. rtx-4090, jetson-orin")
    disk_gb: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=MAX_DISK_GB)] | None = Field(
        None, description="disk for models, GB (the running model and the previous one are kept)")


class Robot(Model):
    name: Name = Field(description="robot name, unique in the file")
    labels: Labels = Field(default_factory=dict, description="labels that deployment and wave selectors match")
    runtime: Runtime | None = Field(None, description="overrides defaults.runtime")
    compute: str | None = Field(None, description="overrides defaults.compute")
    disk_gb: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=MAX_DISK_GB)] | None = Field(
        None, description="overrides defaults.disk_gb")


class RobotFleet(Model):
    name: Name = Field(description="the site's robot fleet; the file is robots/<name>.yaml")
    registry: str = Field(pattern=r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$",
                          description="OCI registry the robots pull from (model artifacts, desired state); "
                                      "http:// = plain HTTP")
    link: Link = Field(description="the site's network link")
    defaults: RobotDefaults = Field(default_factory=RobotDefaults, description="what every robot has unless it says")
    robots: tuple[Robot, ...] = Field(min_length=1, description="the robots of the site")
    gitops: GitOps | None = Field(None, description="k3s robots: where Rancher Fleet's GitRepos read the "
                                  "rendered policy servers from (required when a deployment has k3s robots)")

    def runtime(self, r: Robot) -> Runtime:
        return r.runtime or self.defaults.runtime

    def disk_gb(self, r: Robot) -> float | None:
        return r.disk_gb if r.disk_gb is not None else self.defaults.disk_gb

    def compute(self, r: Robot) -> str | None:
        return r.compute or self.defaults.compute


# --- deployments/<name>.yaml --------------------------------------------------------------------------------


class ModelRef(Model):
    artifact: str = Field(description="the model as an OCI artifact pinned by its manifest digest, "
                                      "e.g. registry.example:5000/models/pi05@sha256:<64 hex>")
    size_gb: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=MAX_DISK_GB)] = Field(
        description="the artifact's size, GB (disk and link checks, the plan's bytes per site)")
    from_job: str | None = Field(None, description="the training job that made it, <team>/<job>")


class Server(Model):
    image: str = Field(description="the policy server's image pinned by digest, host/path@sha256:<64 hex>")
    port: Port = Field(description="the port it serves on")
    health_path: str = Field("/healthz", pattern=r"^/[!-~]*$", max_length=1024,
                             description="HTTP path answering 2xx while the server is healthy")


class Window(Model):
    cron: str = Field(min_length=9, max_length=200, description="when a window opens (5-field cron, UTC), "
                                                                "e.g. `0 18 * * 1-5`")
    hours: Annotated[float, Field(strict=True, allow_inf_nan=False, gt=0, le=168)] = Field(
        description="how long it stays open")


class Wave(Model):
    name: Name = Field(description="wave name, unique in the deployment")
    selector: Labels = Field(default_factory=dict, description="the deployment's robots this wave takes; "
                             "empty: every robot no earlier wave took (only the last wave)")
    soak_minutes: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=43200)] = Field(
        0, description="how long the wave runs healthy before the next one starts")
    max_unavailable: str | Annotated[int, Field(strict=True, ge=1)] = Field(
        "100%", description="robots of the wave switching at once: a count, or a percent such as 25%")

    def batch(self, robots: int) -> int:
        """How many of the wave's `robots` may switch at once (at least one)."""
        v = self.max_unavailable
        if isinstance(v, int):
            return max(1, v)
        m = re.fullmatch(r"([0-9]{1,3})%", v.strip())
        return max(1, robots * int(m.group(1)) // 100) if m else robots


class Rollout(Model):
    window: Window | None = Field(None, description="switches happen only inside it; pulls (prestage) before it")
    waves: tuple[Wave, ...] = Field(min_length=1, description="the waves, in order")


class Gates(Model):
    health_timeout_minutes: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=10080)] = Field(
        10, description="a robot that switched and is not healthy this long after is failed")
    abort_failed_percent: Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=100)] = Field(
        10, description="a wave with this percent of its robots failed (and at least one) fails its gate")


class Deployment(Model):
    name: Name = Field(description="deployment name; the file is deployments/<name>.yaml")
    fleet: Name = Field(description="the robot fleet (robots/<fleet>.yaml)")
    team: Name | None = Field(None, description="the team whose owners change this file; default: "
                                                "the team of model.from_job (else only admins)")
    selector: Labels = Field(default_factory=dict, description="the fleet's robots it rolls out to; empty: all")
    model: ModelRef = Field(description="the model artifact")
    server: Server = Field(description="the policy server that serves it")
    rollout: Rollout = Field(description="the waves and the window")
    gates: Gates = Field(default_factory=Gates, description="health gates between waves")
    on_failure: Literal["rollback", "pause"] = Field(
        "rollback", description="rollback: every robot of the deployment back to its previous model; pause: stop")

    @property
    def digest(self) -> str:
        m = PINNED.match(self.model.artifact)
        return m.group("digest") if m else ""

    @property
    def owner_team(self) -> str | None:
        if self.team:
            return self.team
        src = self.model.from_job or ""
        return src.split("/", 1)[0] if "/" in src else None


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def split_ref(ref: str) -> tuple[str, str, str]:
    """`host:port/path@sha256:..` -> (host:port, path, digest); ("", "", "") when it is not pinned."""
    m = PINNED.match(ref)
    if not m:
        return "", "", ""
    repo = m.group("repository")
    host, _, path = repo.partition("/")
    if not path or ("." not in host and ":" not in host and host != "localhost"):
        return "", repo, m.group("digest")
    return host, path, m.group("digest")
