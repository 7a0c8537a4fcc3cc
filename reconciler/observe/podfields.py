"""What a JobSet's pods run, read back from its pod template as `models.pod_fields` has it: for a JobSet with no
`fleet.dev/pod-digest` (made before Fleet stamped it), so planning from what runs knows whether its file changed
what its pods run, as the plan from git does against the base commit (plan/live.py `pods_changed`). Pure.

Each field is read where render writes it (render/jobset.py, render/pods.py): `kind` is the one container's
name; `image`, `command`, `env` (the file's settings, in name order, before the coordinator and rank settings
render adds to a multi-node GPU or Trainium gang: `render.jobset.rank_env` of the child Job's `parallelism` and
the accelerators a pod takes; a name the file sets itself is listed once, with its value), `envFrom`
(`secretRef`s), `volumeMounts` and `volumes` (a PersistentVolumeClaim or ConfigMap; the `/dev/shm` one of GPU
pods is render's own), the pod's `serviceAccountName` and `imagePullSecrets`, and the JobSet's
`failurePolicy.maxRestarts`; `framework` is `jobset`. Requests, node selectors and the fields Kueue writes on
admission are not looked at (a gang's shape is compared as a gang).

A template Fleet cannot read this way (a field of another type, a second replicated job or container, `args`,
an environment setting drawn from elsewhere than render draws it, a volume of another source, no
`maxRestarts`...) is not known: None, and the plan then does not judge it (it runs as it started) rather than
guess.
"""

from __future__ import annotations

from typing import Any

from ..kube_rules import ACCELERATOR_RESOURCES
from ..models import pod_fields_digest

SHM = ("dshm", "/dev/shm")
"""render/pods.py's memory-backed volume of GPU pods and where it is mounted (validate_jobs.SHM_VOLUME)."""
KINDS = ("training", "batch")
_CONTAINER = frozenset({"name", "image", "command", "args", "env", "envFrom", "volumeMounts"})
"""The container fields read or refused here; the rest (resources, ports, probes...) are not what pods_fields has."""

Env = tuple[str, str | None, Any]
"""(name, value, valueFrom) of one environment setting: value None where it is drawn from elsewhere."""


class _Unknown(Exception):
    """The template holds what render never writes in these fields, or a field of another type."""


def _need(ok: bool) -> None:
    if not ok:
        raise _Unknown


def _dict(value: Any) -> dict[str, Any]:
    _need(type(value) is dict)
    found: dict[str, Any] = value
    return found


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    _need(type(value) is list)
    found: list[Any] = value
    return found


def _str(value: Any) -> str:
    _need(type(value) is str)
    found: str = value
    return found


def _named(items: Any, key: str) -> list[str]:
    """`[{key: {"name": n}}]` (key "" : `[{"name": n}]`) as the names, refusing any other shape."""
    out = []
    for item in _list(items):
        ref = _dict(item)
        if key:
            _need(set(ref) == {key})
            ref = _dict(ref[key])
        _need(set(ref) == {"name"})
        out.append(_str(ref["name"]))
    return out


def _setting(e: Any) -> Env:
    entry = _dict(e)
    _need(set(entry) <= {"name", "value", "valueFrom"})
    name = _str(entry.get("name"))
    if entry.get("valueFrom") is not None:
        _need(entry.get("value") in (None, ""))
        return name, None, entry["valueFrom"]
    value = entry.get("value")
    return name, "" if value is None else _str(value), None     # an empty value is dropped by the API: ""


def _env(settings: list[Env], extra: list[Env]) -> list[list[str]]:
    """The file's `env` of a container whose settings render wrote as the file's, in name order, then `extra`
    less the names the file sets (render/pods.py `container`): the one way to read them so, else unknown."""
    found: set[tuple[tuple[str, str], ...]] = set()
    for cut in range(len(settings) + 1):
        own = settings[:cut]
        if cut and (own[-1][1] is None or (cut > 1 and own[-2][0] >= own[-1][0])):
            break                           # drawn from elsewhere, or out of name order: no longer cut is either
        names = {name for name, _, _ in own}
        if settings[cut:] == [x for x in extra if x[0] not in names]:
            found.add(tuple((name, value or "") for name, value, _ in own))
    _need(len(found) == 1)
    return [list(pair) for pair in found.pop()]


def _accelerators(container: dict[str, Any]) -> tuple[str | None, int | None]:
    """(accelerator kind, count) of the container's accelerator limit, as render writes it."""
    limits = _dict(_dict(container.get("resources") or {}).get("limits") or {})
    for kind, resource in ACCELERATOR_RESOURCES.items():
        if resource in limits:
            count = limits[resource]
            if type(count) is str and count.isascii() and count.isdigit():
                count = int(count)
            _need(type(count) is int)
            return kind, count
    return None, None


def _volumes(spec: dict[str, Any], container: dict[str, Any]) -> list[dict[str, object]]:
    """The job's `volumes` as `Volume.model_dump(mode="json")`: each mount in order, with its pod volume."""
    sources = {}
    for v in _list(spec.get("volumes")):
        vol = _dict(v)
        name = _str(vol.get("name"))
        _need(name not in sources)
        sources[name] = vol
    out: list[dict[str, object]] = []
    mounted: set[str] = set()
    for m in _list(container.get("volumeMounts")):
        mount = _dict(m)
        _need(set(mount) <= {"name", "mountPath", "readOnly"})
        name, path = _str(mount.get("name")), _str(mount.get("mountPath"))
        read_only = mount.get("readOnly", False)
        _need(type(read_only) is bool and name in sources and name not in mounted)
        mounted.add(name)
        vol = sources[name]
        if (name, path) == SHM and set(vol) == {"name", "emptyDir"}:
            continue
        claim = config_map = None
        if set(vol) == {"name", "persistentVolumeClaim"}:
            pvc = _dict(vol["persistentVolumeClaim"])
            _need(set(pvc) <= {"claimName", "readOnly"} and pvc.get("readOnly", False) is read_only)
            claim = _str(pvc.get("claimName"))
        else:
            _need(set(vol) == {"name", "configMap"})
            cm = _dict(vol["configMap"])
            _need(set(cm) <= {"name", "defaultMode"} and cm.get("defaultMode", 0o644) == 0o644)   # the API default
            config_map = _str(cm.get("name"))
        out.append({"name": name, "claim": claim, "config_map": config_map, "mount_path": path,
                    "read_only": read_only})
    _need(mounted == set(sources))
    return out


def jobset_pod_fields(obj: Any) -> dict[str, object] | None:
    """`models.pod_fields` of the job whose file renders the JobSet `obj` (module docstring); None: not known."""
    from ..render.jobset import rank_env  # only for a JobSet with no pod digest

    try:
        spec = _dict(_dict(obj).get("spec"))
        [replicated] = _list(spec.get("replicatedJobs")) or [None]
        child = _dict(_dict(_dict(replicated).get("template")).get("spec"))
        pod = _dict(_dict(_dict(child.get("template")).get("spec")))
        [c] = _list(pod.get("containers")) or [None]
        container = _dict(c)
        _need(not _list(container.get("args")) and not _list(pod.get("initContainers")))
        kind = _str(container.get("name"))
        _need(kind in KINDS)
        restarts = _dict(spec.get("failurePolicy")).get("maxRestarts")
        pods = child.get("parallelism", 1)
        _need(type(restarts) is int and type(pods) is int)
        accelerator, per_pod = _accelerators(container)
        extra: list[Env] = []
        if accelerator != "tpu" and pods > 1:
            _need(per_pod is not None)
            assert per_pod is not None
            extra = [_setting(e) for e in rank_env(pods, per_pod)]
        return {"kind": kind, "image": _str(container.get("image")),
                "command": [_str(a) for a in _list(container.get("command"))],
                "env": _env([_setting(e) for e in _list(container.get("env"))], extra),
                "env_from_secrets": _named(container.get("envFrom"), "secretRef"),
                "service_account": None if pod.get("serviceAccountName") is None else _str(pod["serviceAccountName"]),
                "image_pull_secrets": _named(pod.get("imagePullSecrets"), ""),
                "volumes": _volumes(pod, container), "max_restarts": restarts, "framework": "jobset"}
    except (_Unknown, ValueError, TypeError):       # ValueError: not exactly one replicated job or container
        return None


def jobset_pod_digest(obj: Any) -> str | None:
    """`models.pod_digest` of the job whose file renders the JobSet `obj`; None: its template is not read so."""
    fields = jobset_pod_fields(obj)
    return None if fields is None else pod_fields_digest(fields)

