"""node-problem-detector running `fleet health-check` on a cluster's NVIDIA GPU nodes. Pure.

For every cluster that asks (`health_check: true`) or is on-prem (`health_check` unset: GKE and EKS run their
own GPU health monitoring, the EKS node monitoring agent and GKE's node auto-repair; on-prem has none),
`node_health(cluster, facts)` renders `<cluster>/node-health.yaml`:

- ServiceAccount, ClusterRole and ClusterRoleBinding `fleet-gpu-health` (kube-system): node-problem-detector
  reads its node, patches `nodes/status` (the condition) and writes Events, as its own deployment/ RBAC does;
- ConfigMap `fleet-gpu-health`: one custom plugin monitor config per NVIDIA GPU pool (`<pool>.json`, also
  written as `<cluster>/node-health/<pool>.json` for a node-problem-detector run outside Kubernetes);
- a DaemonSet `fleet-gpu-health-<pool>` per pool, on exactly that pool's nodes (its flavor's node labels,
  facts.py), so `--expected-gpus` is the pool's GPUs per node: a GPU that fell off the bus is a fault.

The monitor runs `fleet health-check` every `INVOKE_INTERVAL` (exit 0/1/2, one line: analysis.py) and sets the
node condition `FleetGPUProblem` (True: a fault, the line its message; Unknown: cannot tell), which
reconciler/observe/parse.py reads as accelerator health. The container image must hold both the
node-problem-detector binary and Fleet (README, "GPU health checks"); the GPUs are reached through the NVIDIA
container runtime (`NVIDIA_VISIBLE_DEVICES=all`, utility capability only) without requesting `nvidia.com/gpu`,
so the check never takes a GPU from a job. Constraints node-problem-detector checks when it loads a config
(pkg/custompluginmonitor/types/config.go): plugin `custom`, a rule's timeout at most the global one, every
permanent rule's condition among the default conditions.
"""

from __future__ import annotations

import json
from typing import Any

from .. import __version__
from ..health import CONDITION
from ..models import Cluster
from .facts import PoolFacts
from .yamlout import dump_all

NAME = "fleet-gpu-health"
NAMESPACE = "kube-system"
IMAGE = f"fleet-node-health:{__version__}"
"""node-problem-detector's image with Fleet installed (README: a four-line Dockerfile builds it); set the
registry by retagging, as for the reconciler's own image."""
NPD_BINARY = "/node-problem-detector"
FLEET_BINARY = "/usr/local/bin/fleet"
INVOKE_INTERVAL_S = 60
TIMEOUT_S = 30
XID_WAIT_S = 20
"""Wait for Xid events 20 s of every 60 s; the rest of the timeout covers Python's start and NVML's reads.
Xids in between leave lasting state (a lost GPU, ECC counters, remapped rows) that every run reads."""
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "fleet"}


def wanted(cluster: Cluster) -> bool:
    """The cluster asked for health checks, or is on-prem and did not say no."""
    return cluster.health_check if cluster.health_check is not None else cluster.provider == "onprem"


def monitor_config(f: PoolFacts) -> dict[str, Any]:
    """node-problem-detector's custom plugin monitor config for one pool."""
    return {
        "plugin": "custom",
        "pluginConfig": {"invoke_interval": f"{INVOKE_INTERVAL_S}s", "timeout": f"{TIMEOUT_S}s",
                         "max_output_length": 1024, "concurrency": 1,
                         "enable_message_change_based_condition_update": True},
        "source": NAME,
        "metricsReporting": True,
        "conditions": [{"type": CONDITION, "reason": "FleetGPUHealthy",
                        "message": "fleet health-check found no GPU fault"}],
        "rules": [{"type": "permanent", "condition": CONDITION, "reason": "FleetGPUFault", "path": FLEET_BINARY,
                   "args": ["health-check", "--expected-gpus", str(f.accelerators_per_node),
                            "--xid-wait-seconds", str(XID_WAIT_S)],
                   "timeout": f"{TIMEOUT_S}s"}],
    }


def _meta(name: str, namespaced: bool = True, pool: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespaced:
        meta["namespace"] = NAMESPACE
    meta["labels"] = {**LABELS, "fleet.dev/pool": pool} if pool else dict(LABELS)
    return meta


def _daemonset(f: PoolFacts) -> dict[str, Any]:
    labels = {**LABELS, "fleet.dev/pool": f.name}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": _meta(f"{NAME}-{f.name}", pool=f.name),
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": NAME,
                    "priorityClassName": "system-node-critical",
                    "nodeSelector": dict(f.node_labels),
                    "tolerations": [{"operator": "Exists"}],   # cordoned, tainted and failing nodes too
                    "containers": [{
                        "name": "node-problem-detector",
                        "image": IMAGE,
                        "command": [NPD_BINARY, "--logtostderr",
                                    f"--config.custom-plugin-monitor=/config/{f.name}.json"],
                        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}],
                        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
                        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": NAME}}],
                },
            },
        },
    }


def node_health(cluster: Cluster, facts: list[PoolFacts]) -> dict[str, str]:
    """The cluster's node-health files (module docstring); none when it wants none or has no NVIDIA GPU pool."""
    gpus = sorted((f for f in facts if f.resource == "nvidia.com/gpu"), key=lambda f: f.name)
    if not wanted(cluster) or not gpus:
        return {}
    configs = {f"{f.name}.json": json.dumps(monitor_config(f), indent=2) + "\n" for f in gpus}
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(NAME, False),
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                   {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
                    "verbs": ["create", "patch", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _meta(NAME, False),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(NAME), "data": configs},
        *(_daemonset(f) for f in gpus),
    ]
    c = cluster.name
    return {f"{c}/node-health.yaml": dump_all(objs), **{f"{c}/node-health/{k}": v for k, v in configs.items()}}
