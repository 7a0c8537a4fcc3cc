"""The stack specs `fleet apply` works on.  EFFECT (read).

Two ways in, one checked result: `specs_from_render(files)` takes the specs the render stage built in memory
(the default: apply renders the repository it is run in, so what is applied is exactly what the plan says),
and `load_specs(dir)` reads the ones `fleet render --out DIR` wrote into `DIR/stacks/` (`--specs DIR`: apply
what a reviewer looked at). Both check every spec against the contract the same way.

A spec file is input like any other: `--specs DIR` may hold files nobody rendered. So beyond the contract's
shape, apply accepts only what `fleet render` produces (`check_objects`): in a `kueue` stack the Kueue objects
and team Namespaces, in a `jobs` stack JobSets, Deployments, LeaderWorkerSets and Services; each at the API
version Fleet renders; namespaced objects only in a Namespace the cluster's own `kueue` stack declares, never in
`kube-*`, `default` or a controller's namespace; Namespaces with no label but Fleet's team label (a
`pod-security.kubernetes.io/enforce: privileged` label would lift the namespace's pod security); and workloads
with only the fields Fleet renders (no privileged or host settings; volumes only as the team's claims and config
maps and the memory /dev/shm). A ClusterRoleBinding to cluster-admin, or a privileged pod in kube-system, is
refused before Pulumi runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stacks.spec import SpecError, validate_spec

from ..kube_rules import reserved_namespace
from ..problems import UsageError
from ..render.facts import TEAM_LABEL
from ..render.jobset import JOBSET
from ..render.kueue import KUEUE
from ..render.ray import RAY
from ..render.service import DEPLOYMENT, LWS
from ..safeio import read_file


@dataclass(frozen=True)
class StackSpec:
    """One parsed, checked stack spec and where it came from."""

    name: str
    layer: str
    cluster: str
    spec: dict[str, Any]
    source: str


def load_specs(directory: Path) -> list[StackSpec]:
    """Every `*.json` stack spec in `directory`, checked against the contract, sorted by stack name."""
    if not directory.is_dir():
        raise UsageError(f"no stack specs: {directory} is not a directory",
                         "render them first: `fleet render --out .fleet/render` (or pass --specs DIR)")
    paths = sorted(directory.glob("*.json"))
    if not paths:
        raise UsageError(f"no stack specs (*.json) in {directory}",
                         "render them first: `fleet render --out .fleet/render` (or pass --specs DIR)")
    return check_objects([_load(path) for path in paths])


def specs_from_render(files: dict[str, str]) -> list[StackSpec]:
    """The stack specs among the files `reconciler.render.render` returns (`stacks/<stack>.json`), checked and
    sorted by stack name, as if `fleet render` had written them and `load_specs` had read them back."""
    return check_objects([_parse(text, f"(rendered) {rel}", Path(rel).stem) for rel, text in sorted(files.items())
                          if rel.startswith("stacks/") and rel.endswith(".json")])


MAX_SPEC_BYTES = 256 << 20
"""256 MiB: the jobs spec of a cluster running 10,000 JobSets (a few KiB each) is some tens of MiB; a larger
file is not one."""


def _load(path: Path) -> StackSpec:
    """A spec file of `--specs DIR`, read by the repository's file rules (`safeio.read_file`: a regular file,
    never through a link, never a FIFO or device, at most `MAX_SPEC_BYTES`)."""
    data = read_file(path, MAX_SPEC_BYTES, "the stack spec",
                     "pass the folder `fleet render --out DIR` wrote (DIR/stacks), holding only its regular files")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(str(path), "(file)", f"not UTF-8 text ({e.reason})") from None
    return _parse(text, str(path), path.stem)


def _parse(text: str, source: str, stem: str) -> StackSpec:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(source, f"line {e.lineno} column {e.colno}", f"invalid JSON: {e.msg}") from None
    spec = validate_spec(data, source)
    if spec["stack"] != stem:
        raise SpecError(source, "stack", f"{spec['stack']!r} differs from the file name; it must be {stem!r}")
    return StackSpec(name=spec["stack"], layer=spec["layer"], cluster=spec["cluster"], spec=spec, source=source)


KINDS_BY_LAYER: dict[str, dict[str, str]] = {
    "kueue": {"Namespace": "v1", "ResourceFlavor": KUEUE, "Topology": KUEUE, "Cohort": KUEUE,
              "WorkloadPriorityClass": KUEUE, "ClusterQueue": KUEUE, "LocalQueue": KUEUE,
              "AdmissionCheck": KUEUE, "ProvisioningRequestConfig": KUEUE},      # queued pools (render/provisioning.py)
    "jobs": {"JobSet": JOBSET, "Deployment": DEPLOYMENT, "LeaderWorkerSet": LWS, "Service": "v1",
             "RayJob": RAY, "RayService": RAY},                                      # Ray jobs (render/ray.py)
}
"""Per layer, the kinds `fleet render` puts there and their apiVersion."""
NAMESPACED = frozenset({"LocalQueue", "JobSet", "Deployment", "LeaderWorkerSet", "Service", "RayJob", "RayService"})

# The fields of the workloads that `render/jobset.py`, `render/service.py` and `render/pods.py` write, level by
# level (None: any keys below, e.g. labels; a label that Kubernetes reads itself on a Namespace is not free,
# see NAMESPACE_SHAPE). Volumes only as PersistentVolumeClaims, ConfigMaps and the memory-backed /dev/shm:
# no hostPath, host networking or privileged setting can pass.
_Shape = dict[str, "_Shape | None"]
_CONTAINER: _Shape = {"name": None, "image": None, "command": None, "resources": None,
                      "env": {"name": None, "value": None, "valueFrom": {"fieldRef": {"fieldPath": None}}},
                      "envFrom": {"secretRef": {"name": None}},
                      "volumeMounts": {"name": None, "mountPath": None, "readOnly": None},
                      "ports": {"name": None, "containerPort": None, "protocol": None},
                      "readinessProbe": {"httpGet": {"path": None, "port": None}, "tcpSocket": {"port": None}}}
_VOLUME: _Shape = {"name": None, "persistentVolumeClaim": {"claimName": None, "readOnly": None},
                   "configMap": {"name": None}, "emptyDir": {"medium": None, "sizeLimit": None}}
_POD: _Shape = {"metadata": {"labels": None, "annotations": None},
                "spec": {"restartPolicy": None, "serviceAccountName": None, "imagePullSecrets": {"name": None},
                         "nodeSelector": None, "containers": _CONTAINER, "volumes": _VOLUME}}
_META: _Shape = {"name": None, "namespace": None, "labels": None, "annotations": None}
JOBSET_SHAPE: _Shape = {
    "apiVersion": None, "kind": None, "metadata": _META,
    "spec": {"suspend": None,
             "failurePolicy": {"maxRestarts": None, "rules": {"name": None, "action": None,
                                                              "onJobFailureReasons": None}},
             "coordinator": {"replicatedJob": None, "jobIndex": None, "podIndex": None},
             "replicatedJobs": {
                 "name": None, "replicas": None,
                 "template": {"spec": {"parallelism": None, "completions": None, "completionMode": None,
                                       "backoffLimit": None,
                                       "podFailurePolicy": {"rules": {"action": None, "onPodConditions": {
                                           "type": None, "status": None}}},
                                       "template": _POD}}}},
}
_ROLLING: _Shape = {"maxUnavailable": None, "maxSurge": None}
DEPLOYMENT_SHAPE: _Shape = {
    "apiVersion": None, "kind": None, "metadata": _META,
    "spec": {"replicas": None, "selector": {"matchLabels": None},
             "strategy": {"type": None, "rollingUpdate": _ROLLING}, "template": _POD},
}
LWS_SHAPE: _Shape = {
    "apiVersion": None, "kind": None, "metadata": _META,
    "spec": {"replicas": None, "leaderWorkerTemplate": {"size": None, "restartPolicy": None, "leaderTemplate": _POD,
                                                        "workerTemplate": _POD},
             "rolloutStrategy": {"type": None, "rollingUpdateConfiguration": _ROLLING}, "startupPolicy": None},
}
SERVICE_SHAPE: _Shape = {
    "apiVersion": None, "kind": None, "metadata": _META,
    "spec": {"selector": None, "clusterIP": None, "type": None,
             "ports": {"name": None, "port": None, "targetPort": None, "protocol": None}},
}

_RAY_GROUP: _Shape = {"groupName": None, "replicas": None, "minReplicas": None, "maxReplicas": None,
                      "rayStartParams": None, "template": _POD}
_RAY_CLUSTER: _Shape = {"headGroupSpec": {"rayStartParams": None, "template": _POD}, "workerGroupSpecs": _RAY_GROUP}
RAYJOB_SHAPE: _Shape = {
    "apiVersion": None, "kind": None, "metadata": _META,
    "spec": {"entrypoint": None, "shutdownAfterJobFinishes": None, "suspend": None, "backoffLimit": None,
             "rayClusterSpec": _RAY_CLUSTER, "submitterPodTemplate": _POD},
}
RAYSERVICE_SHAPE: _Shape = {"apiVersion": None, "kind": None, "metadata": _META,
                            "spec": {"serveConfigV2": None, "rayClusterConfig": _RAY_CLUSTER}}


NAMESPACE_SHAPE: _Shape = {"apiVersion": None, "kind": None, "metadata": {"name": None, "labels": {TEAM_LABEL: None}}}
SHAPES = {"JobSet": JOBSET_SHAPE, "Deployment": DEPLOYMENT_SHAPE, "LeaderWorkerSet": LWS_SHAPE,
          "Service": SERVICE_SHAPE, "Namespace": NAMESPACE_SHAPE, "RayJob": RAYJOB_SHAPE,
          "RayService": RAYSERVICE_SHAPE}


def check_objects(specs: list[StackSpec]) -> list[StackSpec]:
    """Return `specs` if every object is one `fleet render` would write (see the module docstring), else raise
    SpecError naming the spec and the object."""
    namespaces: dict[str, set[str]] = {}
    for s in specs:
        if s.layer == "kueue":
            namespaces.setdefault(s.cluster, set()).update(
                str(o["metadata"]["name"]) for o in s.spec["objects"] if o.get("kind") == "Namespace")
    for s in specs:
        allowed = KINDS_BY_LAYER.get(s.layer, {})
        for i, obj in enumerate(s.spec.get("objects", ())):
            where = f"objects[{i}]"
            kind, meta = obj["kind"], obj["metadata"]
            if kind not in allowed:
                raise SpecError(s.source, f"{where}.kind", f"a {kind} does not belong in a `{s.layer}` stack: Fleet "
                                f"renders only {', '.join(sorted(allowed)) or 'node pools'} there")
            if obj["apiVersion"] != allowed[kind]:
                raise SpecError(s.source, f"{where}.apiVersion",
                                f"{kind} {obj['apiVersion']!r}: Fleet renders {allowed[kind]!r}")
            name, namespace = str(meta["name"]), meta.get("namespace")
            if kind in SHAPES:
                _only(s.source, where, obj, kind, SHAPES[kind])
            if kind == "Namespace" and reserved_namespace(name):
                raise SpecError(s.source, f"{where}.metadata.name", f"namespace {name!r} is the cluster's own; "
                                "Fleet never manages it")
            if kind not in NAMESPACED:
                if namespace:
                    raise SpecError(s.source, f"{where}.metadata.namespace",
                                    f"a {kind} is cluster-scoped and has no namespace")
                continue
            declared = namespaces.get(s.cluster, set())
            if not isinstance(namespace, str) or reserved_namespace(namespace) or namespace not in declared:
                raise SpecError(s.source, f"{where}.metadata.namespace",
                                f"{kind} {name!r} is in namespace {namespace!r}, not one of the team namespaces "
                                f"the {s.cluster}-kueue stack declares ({', '.join(sorted(declared)) or 'none'})")
    return specs


def _only(source: str, where: str, value: Any, kind: str, shape: _Shape) -> None:
    """Every key of `value` (a mapping, or each mapping of a list) is in `shape`, recursively."""
    items = value if isinstance(value, list) else [value]
    for j, item in enumerate(items):
        at = f"{where}[{j}]" if isinstance(value, list) else where
        if not isinstance(item, dict):
            raise SpecError(source, at, f"expected an object, got {type(item).__name__}")
        for key, sub in item.items():
            if key not in shape:
                raise SpecError(source, f"{at}.{key}", f"Fleet never renders this field in a {kind}; apply only "
                                "accepts what `fleet render` writes")
            nested = shape[key]
            if nested is not None:
                _only(source, f"{at}.{key}", sub, kind, nested)
