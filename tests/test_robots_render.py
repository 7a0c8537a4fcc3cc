"""`fleet render` for k3s robots (robots/render.py): a Rancher Fleet GitRepo per admitted wave targeting exactly
that wave's k3s robots, validated against the vendored CRD (../shared/tools/validate_kueue.py), and the policy
server Deployment (model as an OCI image volume pinned by digest, readiness probe on health_path), validated
against the Kubernetes schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from test_robots_validate import D1, ROBOTS, deployment

from reconciler.catalog import load_catalog
from reconciler.load import Loaded
from reconciler.pipeline import check
from reconciler.robots.observed import RobotsObservation
from reconciler.robots.render import render_robots

from builders import shared_file, with_files

K3S = ROBOTS.replace("defaults: {runtime: agent,", "defaults: {runtime: k3s,").replace(
    "  - {name: aloha-03, labels: {arm: aloha, cell: b}}",
    "  - {name: aloha-03, labels: {arm: aloha, cell: b}, runtime: agent}",
) + "gitops: {repo: https://github.com/ml-org/fleet.git, branch: main, path: rendered}\n"


def loaded(robots: str = K3S) -> Loaded:
    v = check(with_files({"robots/aloha-sf.yaml": robots, "deployments/pi05-towel.yaml": deployment()}),
              load_catalog())
    assert v.ok, v.errors
    return v.loaded


def rolling(wave: str, phase: str = "rolling") -> RobotsObservation:
    return RobotsObservation.model_validate({"rollouts": [
        {"fleet": "aloha-sf", "deployment": "pi05-towel", "digest": D1, "phase": phase, "wave": wave}]})


def test_each_admitted_wave_is_a_gitrepo_of_exactly_its_k3s_robots() -> None:
    first = render_robots(loaded())
    assert sorted(first) == ["robots/aloha-sf/pi05-towel/gitrepo-canary.yaml",
                             "robots/aloha-sf/pi05-towel/server/deployment.yaml"]
    both = render_robots(loaded(), rolling("rest"))
    repo = yaml.safe_load(both["robots/aloha-sf/pi05-towel/gitrepo-rest.yaml"])
    assert [t["clusterSelector"]["matchLabels"]["fleet.dev/robot"] for t in repo["spec"]["targets"]] == ["aloha-02"]
    assert repo["spec"]["paths"] == ["rendered/robots/aloha-sf/pi05-towel/server"]     # aloha-03 runs the agent
    assert set(render_robots(loaded(), rolling("rest", "rolled-back"))) == {
        "robots/aloha-sf/pi05-towel/server/deployment.yaml"}
    assert render_robots(loaded(ROBOTS)) == {}                    # agent robots: no GitRepo


def test_the_server_mounts_the_model_by_digest_with_a_readiness_probe() -> None:
    doc = yaml.safe_load(render_robots(loaded())["robots/aloha-sf/pi05-towel/server/deployment.yaml"])
    pod = doc["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "model", "image": {"reference": f"127.0.0.1:5000/models/pi05@{D1}",
                                                           "pullPolicy": "IfNotPresent"}}]
    assert pod["containers"][0]["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 8000}
    kubernetes_validate.validate(doc, "1.33", strict=True)


def test_gitrepos_validate_against_the_rancher_fleet_crd(tmp_path: Path) -> None:
    validator = shared_file("tools/validate_kueue.py")
    for path, text in render_robots(loaded(), rolling("rest", "done")).items():
        if "gitrepo-" in path:
            (tmp_path / Path(path).name).write_text(text)
    assert len(list(tmp_path.iterdir())) == 2
    r = subprocess.run([sys.executable, str(validator), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0 and " 0 error(s)" in r.stdout, r.stdout + r.stderr
    bad = yaml.safe_load((tmp_path / "gitrepo-rest.yaml").read_text())
    bad["spec"]["targets"][0]["clusterSelector"]["matchLabelz"] = {}      # the validator catches a typo
    (tmp_path / "gitrepo-rest.yaml").write_text(yaml.safe_dump(bad))
    r = subprocess.run([sys.executable, str(validator), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1


def test_k3s_robots_need_gitops() -> None:
    v = check(with_files({"robots/aloha-sf.yaml": K3S.split("gitops:")[0],
                          "deployments/pi05-towel.yaml": deployment()}), load_catalog())
    assert [p.message for p in v.errors] == ["robots of `aloha-sf` run k3s, but robots/aloha-sf.yaml has no `gitops`"]


@pytest.mark.parametrize("phase", ["not-started", "rolling", "done"])
def test_render_is_deterministic(phase: str) -> None:
    assert render_robots(loaded(), rolling("canary", phase)) == render_robots(loaded(), rolling("canary", phase))
