"""`fleet robot-agent` against a real registry (Debian's docker-registry): prestage before the window and
switch only inside it, resume a cut download, refuse a blob that does not verify, keep the previous model
and never delete the running one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from robot_parts import Health, registry

from reconciler.robots.agent import Agent
from reconciler.robots.registry import DESIRED, STATUS, Registry, RegistryError

MONDAY_NOON = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
MONDAY_EVENING = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with registry(tmp_path_factory.mktemp("registry")) as u:
        yield u


def model(url: str, tmp: Path, name: str, size: int = 300_000) -> tuple[str, str]:
    """A model artifact of one blob of `size` bytes: (manifest digest, blob digest)."""
    blob = tmp / f"{name}.bin"
    blob.write_bytes(hashlib.sha256(name.encode()).digest() * (size // 32))
    digest = Registry(url).push_files("models/agent-test", name, [blob])
    manifest = Registry(url).manifest("models/agent-test", digest)
    assert manifest is not None
    return digest, manifest["layers"][0]["digest"]


def desire(url: str, robot: str, digest: str, window: dict[str, Any] | None = None) -> None:
    Registry(url).push_json(DESIRED, robot, {"deployment": "towel", "model": digest, "repository": "models/agent-test",
                                             "window": window, "from_job": "vision/train"})


def test_prestages_before_the_window_and_switches_inside_it(url: str, tmp_path: Path) -> None:
    digest, _ = model(url, tmp_path, "w1")
    desire(url, "lab/w", digest, {"cron": "0 18 * * 1-5", "hours": 4})
    health = Health(tmp_path / "state")
    try:
        agent = Agent(url, "lab/w", tmp_path / "state", health.url)
        out = agent.round(MONDAY_NOON)
        assert out["running"] is None and out["health"] == "unknown"
        status = Registry(url).pull_json(STATUS, "lab/w")
        assert status is not None and status["staged"] is True and status["desired"] == digest
        assert (tmp_path / "state/models" / digest.split(":")[1]).is_dir()
        out = agent.round(MONDAY_EVENING)
        assert out == {"robot": "lab/w", "deployment": "towel", "running": digest, "health": "ok", "registry": "ok"}
    finally:
        health.close()


def test_a_cut_download_resumes_and_a_corrupt_one_is_refused(url: str, tmp_path: Path) -> None:
    _, blob = model(url, tmp_path, "r1", size=200_000)
    whole = (tmp_path / "r1.bin").read_bytes()
    part = tmp_path / "part"
    part.write_bytes(whole[:150_000])          # what a cut connection left
    assert Registry(url).fetch_blob("models/agent-test", blob, part) == 50_000
    assert part.read_bytes() == whole
    part.write_bytes(b"x" * 150_000)           # a partial file that is not the blob's start
    with pytest.raises(RegistryError, match="does not verify"):
        Registry(url).fetch_blob("models/agent-test", blob, part)
    assert not part.exists()                   # deleted: fetched whole next time
    assert Registry(url).fetch_blob("models/agent-test", blob, part) == 200_000


def test_keeps_the_previous_model_and_never_deletes_the_running_one(url: str, tmp_path: Path) -> None:
    a, b, c = (model(url, tmp_path, n)[0] for n in ("k1", "k2", "k3"))
    agent = Agent(url, "lab/k", tmp_path / "state")
    models = tmp_path / "state/models"
    for d in (a, b):
        desire(url, "lab/k", d)
        assert agent.round(MONDAY_NOON)["running"] == d
    assert {p.name for p in models.iterdir()} == {a.split(":")[1], b.split(":")[1]}
    desire(url, "lab/k", c, {"cron": "0 18 * * 1-5", "hours": 4})     # staged, not switched before the window
    agent.round(MONDAY_NOON)
    assert {p.name for p in models.iterdir()} == {a.split(":")[1], b.split(":")[1], c.split(":")[1]}
    assert agent.round(MONDAY_EVENING)["running"] == c
    assert {p.name for p in models.iterdir()} == {b.split(":")[1], c.split(":")[1]}   # a: neither running nor previous
    assert (tmp_path / "state/current").resolve().name == c.split(":")[1]


def test_an_unreachable_registry_keeps_what_runs(url: str, tmp_path: Path) -> None:
    a, _ = model(url, tmp_path, "u1")
    desire(url, "lab/u", a)
    assert Agent(url, "lab/u", tmp_path / "state").round(MONDAY_NOON)["running"] == a
    out = Agent("http://127.0.0.1:9", "lab/u", tmp_path / "state", timeout_s=1).round(MONDAY_NOON)
    assert out["running"] == a and out["registry"] == "unreachable"


def test_a_desired_state_is_an_oci_artifact_oras_pulls(url: str, tmp_path: Path) -> None:
    """What Fleet pushes is an ordinary artifact: oras's own pull gets the JSON as doc.json."""
    import json

    import oras.provider

    desire(url, "lab/o", "sha256:" + "e" * 64)
    host = url.removeprefix("http://")
    (path,) = oras.provider.Registry(hostname=host, insecure=True).pull(
        target=f"{host}/fleet-desired/lab/o:latest", outdir=str(tmp_path))
    assert Path(path).name == "doc.json" and json.loads(Path(path).read_text())["model"] == "sha256:" + "e" * 64


def test_a_desired_state_naming_no_digest_touches_nothing(url: str, tmp_path: Path) -> None:
    """A digest names a folder of the state folder: anything else (a path, `..`) is refused, not followed."""
    a, _ = model(url, tmp_path, "t1")
    desire(url, "lab/t", a)
    agent = Agent(url, "lab/t", tmp_path / "state")
    assert agent.round(MONDAY_NOON)["running"] == a
    desire(url, "lab/t", "sha256:../../../etc")
    assert agent.round(MONDAY_NOON)["running"] == a
    status = Registry(url).pull_json(STATUS, "lab/t")
    assert status is not None and "names no model digest" in status["errors"][0]
    assert sorted(p.name for p in (tmp_path / "state/models").iterdir()) == [a.split(":")[1]]
