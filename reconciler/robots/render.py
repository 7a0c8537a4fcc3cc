"""`fleet render` for k3s robots: each admitted wave of a deployment as a Rancher Fleet `GitRepo`
(fleet.cattle.io/v1alpha1) targeting exactly that wave's k3s robots, and the policy server they deploy. Pure.

    robots/<fleet>/<deployment>/server/deployment.yaml   the policy server: a Deployment that mounts the model
                                                          as an OCI image volume (pinned by digest, read-only)
                                                          with a readiness probe on `health_path`
    robots/<fleet>/<deployment>/gitrepo-<wave>.yaml       one GitRepo per admitted wave, reading server/ from the
                                                          fleet's `gitops` repository (robots/<fleet>.yaml)

A robot's k3s cluster is registered in Rancher Fleet with the labels `fleet.dev/robot-fleet: <fleet>` and
`fleet.dev/robot: <robot>`; each target selects one robot by them. Which waves are admitted comes from the
observed rollout (`--observed`, the snapshot's `robots`): not started, the first wave; rolling or paused, the
waves up to the current one; done, all; rolled back, none (the previous model comes back through git: revert
the deployment's `model.artifact`, a reviewed change). Agent-runtime robots get their model from `fleet
robot-agent` instead, and appear in no GitRepo.
"""

from __future__ import annotations

from typing import Any

from ..load import Loaded
from ..render.yamlout import dump_all
from .models import Deployment, RobotFleet
from .observed import RobotsObservation
from .validate import wave_robots

NAMESPACE = "fleet-robots"            # where the policy servers run on each robot's k3s
GITREPO_NAMESPACE = "fleet-default"   # Rancher Fleet's workspace for downstream clusters
MODEL_MOUNT = "/models/current"


def admitted_waves(dep: Deployment, obs: RobotsObservation | None) -> int:
    seen = next((r for r in (obs.rollouts if obs else ()) if r.fleet == dep.fleet and r.deployment == dep.name
                 and r.digest == dep.digest), None)
    total = len(dep.rollout.waves)
    if seen is None or seen.phase in ("not-started", "unreachable"):
        return 1
    if seen.phase == "done":
        return total
    if seen.phase == "rolled-back":
        return 0
    names = [w.name for w in dep.rollout.waves]
    return names.index(seen.wave) + 1 if seen.wave in names else 1


def server_deployment(dep: Deployment) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": f"{dep.name}-server", "fleet.dev/deployment": dep.name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": f"{dep.name}-server", "namespace": NAMESPACE,
                     "labels": {**labels, "fleet.dev/model-digest": dep.digest.split(":")[1][:63]}},
        "spec": {
            "replicas": 1, "selector": {"matchLabels": dict(labels)},
            "strategy": {"type": "Recreate"},      # one GPU per robot: the old server goes before the new one
            "template": {"metadata": {"labels": dict(labels)}, "spec": {
                "containers": [{
                    "name": "server", "image": dep.server.image,
                    "env": [{"name": "MODEL_DIR", "value": MODEL_MOUNT}],
                    "ports": [{"name": "http", "containerPort": dep.server.port}],
                    "readinessProbe": {"httpGet": {"path": dep.server.health_path, "port": dep.server.port},
                                       "periodSeconds": 10, "failureThreshold": 3},
                    "volumeMounts": [{"name": "model", "mountPath": MODEL_MOUNT, "readOnly": True}],
                }],
                "volumes": [{"name": "model", "image": {"reference": dep.model.artifact,
                                                        "pullPolicy": "IfNotPresent"}}],
            }},
        },
    }


def gitrepo(dep: Deployment, fleet: RobotFleet, wave: str, robots: tuple[str, ...]) -> dict[str, Any]:
    assert fleet.gitops is not None
    path = f"{fleet.gitops.path.rstrip('/')}/robots/{fleet.name}/{dep.name}/server"
    return {
        "apiVersion": "fleet.cattle.io/v1alpha1", "kind": "GitRepo",
        "metadata": {"name": f"{dep.name}-{wave}"[:63].rstrip("-"), "namespace": GITREPO_NAMESPACE,
                     "labels": {"fleet.dev/deployment": dep.name, "fleet.dev/wave": wave}},
        "spec": {"repo": fleet.gitops.repo, "branch": fleet.gitops.branch, "paths": [path],
                 "targets": [{"name": r, "clusterSelector": {"matchLabels": {
                     "fleet.dev/robot-fleet": fleet.name, "fleet.dev/robot": r}}} for r in robots]},
    }


def render_robots(loaded: Loaded, obs: RobotsObservation | None = None) -> dict[str, str]:
    """`{path: YAML}` for every deployment with k3s robots (see the module's docstring)."""
    fleets = {f.name: f for _, f in loaded.robot_fleets}
    out: dict[str, str] = {}
    for _, dep in loaded.deployments:
        fleet = fleets.get(dep.fleet)
        if fleet is None or fleet.gitops is None:
            continue
        k3s = {r.name for r in fleet.robots if fleet.runtime(r) == "k3s"}
        waves = [(w, tuple(r for r in rs if r in k3s)) for w, rs in wave_robots(dep, fleet)]
        if not any(rs for _, rs in waves):
            continue
        base = f"robots/{fleet.name}/{dep.name}"
        out[f"{base}/server/deployment.yaml"] = dump_all([server_deployment(dep)])
        for w, rs in waves[:admitted_waves(dep, obs)]:
            if rs:
                out[f"{base}/gitrepo-{w.name}.yaml"] = dump_all([gitrepo(dep, fleet, w.name, rs)])
    return out
