"""Small, valid fleets as `{path: bytes}` for tests, and helpers to vary them.

`base_files()` is a complete two-cluster fleet; tests replace or add single files with `with_files()` so
each case states only what it changes.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from reconciler.models import TeamsDoc
from reconciler.resolve import ResolvedOption, ResolvedPool

TEAMS = """\
admins: ["@org/fleet-admins"]
cohorts:
  - {name: org}
  - {name: research, parent: org}
teams:
  - name: vision
    owners: ["@org/vision"]
    cohort: research
    weight: 2
    budget_monthly_usd: 5000000
    quota:
      tpu-v5p: {nominal: 256, borrowing_limit: 64, lending_limit: 64}
      nvidia-h100-80gb: {nominal: 64}
  - name: lang
    owners: ["@org/lang"]
    cohort: research
    max_priority: research
    quota:
      tpu-v5p: {nominal: 128}
      nvidia-h100-80gb: {nominal: 32}
"""

PRIORITIES = """\
default: research
classes:
  - {name: critical, value: 10000, preemptible: false}
  - {name: production, value: 1000}
  - {name: research, value: 100}
  - {name: opportunistic, value: 10, spot: required}
preemption:
  within_team: lower_priority
  reclaim_within_cohort: any
  borrow_within_cohort: {policy: never, max_priority_threshold: 100}
"""

GKE = """\
name: gke-usc1
provider: gcp
region: us-central1
zone: us-central1-a
kubernetes: {cluster: ml-usc1}
pools:
  - name: v5p-4x4x4
    accelerator: tpu-v5p
    topology: 4x4x4
    max: 4
  - name: h100
    accelerator: nvidia-h100-80gb
    max: 8
    placement: compact
  - name: h100-spot
    accelerator: nvidia-h100-80gb
    capacity: spot
    max: 8
"""

ONPREM = """\
name: onprem-sjc
provider: onprem
region: sjc
kubernetes: {cluster: sjc-1}
pools:
  - name: h100-owned
    accelerator: nvidia-h100-80gb
    capacity: owned
    min: 4
    max: 4
    node: {accelerators: 8, cpus: 192, memory_gib: 2048}
    hourly_usd: 40.0
"""

JOB = """\
name: train
team: vision
priority: production
options:
  - accelerator: tpu-v5p
    topology: 4x4x4
    slices: 2
  - accelerator: nvidia-h100-80gb
    count: 16
    relative_speed: 0.5
duration_hours: 24
checkpoint_minutes: 30
image: us-docker.pkg.dev/ml/train:1
command: [python, -m, train]
env: {WANDB_PROJECT: vision}
"""


SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_file(rel: str) -> Path:
    """`../shared/<rel>`, beside the checkout. CI always has ../shared (env `CI` is set there), so a missing
    file fails the test in CI; only a local checkout without it skips."""
    path = SHARED / rel
    if not path.is_file():
        why = f"../shared/{rel} is not beside the checkout"
        if os.environ.get("CI"):
            pytest.fail(f"{why}, but CI always has it", pytrace=False)
        pytest.skip(why, allow_module_level=True)   # called at import too (a module-level fixture)
    return path


def base_files() -> dict[str, bytes]:
    return {
        "policies/teams.yaml": TEAMS.encode(),
        "policies/priorities.yaml": PRIORITIES.encode(),
        "fleet/clusters/gke-usc1.yaml": GKE.encode(),
        "fleet/clusters/onprem-sjc.yaml": ONPREM.encode(),
        "jobs/vision/train.yaml": JOB.encode(),
    }


def job(name: str = "small", team: str = "vision", body: str = "", count: int = 1) -> str:
    """A valid job of `count` H100 GPUs (one by default), plus `body` (extra YAML lines)."""
    return f"name: {name}\nteam: {team}\noptions:\n  - {{accelerator: nvidia-h100-80gb, count: {count}}}\n" \
           f"image: img:1\n" + textwrap.dedent(body)


def with_files(changes: Mapping[str, str | bytes | None]) -> dict[str, bytes]:
    """The base fleet with files replaced, added (text or bytes) or removed (None)."""
    files = base_files()
    for path, content in changes.items():
        if content is None:
            files.pop(path, None)
        else:
            files[path] = content.encode() if isinstance(content, str) else content
    return files


def resolved_pool(name: str = "h100", *, cluster: str = "c1", unit: int = 8, mn: int = 0, mx: int = 4,
                  accelerator: str = "nvidia-h100-80gb", region: str = "us-central1", status: str = "active",
                  capacity: str = "on_demand", cpus: int | None = None, memory_gib: int | None = None) -> ResolvedPool:
    """A GPU pool as the resolver gives it (for the planner's state types, without YAML)."""
    return ResolvedPool(cluster, name, "gcp", region, status, accelerator, "gpu", None, "a3-highgpu-8g", unit, 1,
                        cpus, memory_gib, capacity, mn, mx, "autoscale", False)


def gpu_option(count: int, index: int = 0, accelerator: str = "nvidia-h100-80gb") -> ResolvedOption:
    return ResolvedOption(index, accelerator, "gpu", None, 1, count, 1.0, None, None)


def teams_doc(teams: list[dict[str, object]], cohorts: list[dict[str, object]] | None = None) -> TeamsDoc:
    """policies/teams.yaml as a model, from plain dicts (`owners` defaults to @org/<name>)."""
    return TeamsDoc.model_validate({"cohorts": cohorts or [],
                                    "teams": [{"owners": [f"@org/{t['name']}"], **t} for t in teams]})
