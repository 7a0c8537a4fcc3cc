"""What a JobSet's pods run, read back from its pod template where it has no `fleet.dev/pod-digest`
(observe/podfields.py): the digest render would stamp, or not known, never a guess."""

from __future__ import annotations

import copy
import glob
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.observe.parse import parse_jobset
from reconciler.observe.podfields import jobset_pod_digest, jobset_pod_fields

ROOT = Path(__file__).resolve().parents[1]


def _golden_jobsets() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(glob.glob(str(ROOT / "tests/golden/render/*/*/jobsets/*.yaml"))):
        for obj in yaml.safe_load_all(Path(path).read_text()):
            if obj and obj.get("kind") == "JobSet":
                out.append((str(Path(path).relative_to(ROOT)), obj))
    return out


def test_every_golden_jobset_reads_back_to_the_pod_digest_render_stamped() -> None:
    """Every JobSet render writes in the golden files (TPU slices, multi-node GPU gangs with their rank settings,
    Trainium, secrets, volumes, a service account, pull secrets), its pod digest removed, reads back to the digest
    render stamped on it; the parsed JobSet carries it."""
    cases = _golden_jobsets()
    assert len(cases) >= 40
    for path, obj in cases:
        stamped = obj["metadata"]["annotations"].pop("fleet.dev/pod-digest")
        assert jobset_pod_digest(obj) == stamped, path
        assert parse_jobset(obj).pod_digest == stamped, path


def _gang() -> dict[str, Any]:
    """A golden multi-node GPU JobSet (rank settings, secrets, volumes), with no pod digest."""
    [obj] = [o for p, o in _golden_jobsets() if p.endswith("workloads/gke-use4/jobsets/vision.pretrain-gke.yaml")]
    del obj["metadata"]["annotations"]["fleet.dev/pod-digest"]
    return obj


def _container(obj: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    return c


def test_the_file_s_own_settings_are_told_from_the_rank_settings_render_adds() -> None:
    """A setting the file names itself is listed with the file's, in name order, and not again among the rank
    settings: read back as the file's, whatever its value; a rank setting out of its place is not read."""
    obj = _gang()
    env = _container(obj)["env"]
    assert jobset_pod_fields(obj)["env"] == []  # type: ignore[index]
    port = next(e for e in env if e["name"] == "MASTER_PORT")
    env.remove(port)
    env.insert(0, dict(port))                       # the file sets MASTER_PORT: 29500 itself
    assert jobset_pod_fields(obj)["env"] == [["MASTER_PORT", "29500"]]  # type: ignore[index]
    env[0]["value"] = "1234"
    assert jobset_pod_fields(obj)["env"] == [["MASTER_PORT", "1234"]]  # type: ignore[index]
    env.insert(0, {"name": "A", "value": "x"})
    assert jobset_pod_fields(obj)["env"] == [["A", "x"], ["MASTER_PORT", "1234"]]  # type: ignore[index]
    env.append(env.pop(0))                          # out of render's order: not what render writes
    assert jobset_pod_fields(obj) is None


@pytest.mark.parametrize("change", [
    "args", "second container", "env from a config map", "env drawn from a field", "host path", "no max restarts",
    "two replicated jobs", "image not a string"])
def test_a_template_fleet_cannot_read_back_is_not_known(change: str) -> None:
    """What render never writes in these fields, or a field of another type: not known (None), never a guess."""
    obj = _gang()
    assert jobset_pod_digest(obj) is not None
    c = _container(obj)
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    if change == "args":
        c["args"] = ["--resume"]
    elif change == "second container":
        pod["containers"].append(copy.deepcopy(c))
    elif change == "env from a config map":
        c["envFrom"].append({"configMapRef": {"name": "settings"}})
    elif change == "env drawn from a field":
        c["env"].insert(0, {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    elif change == "host path":
        pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
        c["volumeMounts"].append({"name": "host", "mountPath": "/host"})
    elif change == "no max restarts":
        del obj["spec"]["failurePolicy"]["maxRestarts"]
    elif change == "two replicated jobs":
        obj["spec"]["replicatedJobs"].append(copy.deepcopy(obj["spec"]["replicatedJobs"][0]))
    else:
        c["image"] = 7
    assert jobset_pod_fields(obj) is None and jobset_pod_digest(obj) is None
    assert parse_jobset(obj).pod_digest is None
