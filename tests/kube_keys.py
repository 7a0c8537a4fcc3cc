"""How a real API server keys the items of a list in server-side apply, for `kube_api.py`: a list the object's
schema marks `x-kubernetes-list-type: map` is merged by its `x-kubernetes-list-map-keys` (a container's `ports` by
`containerPort` and `protocol`, `volumeMounts` by `mountPath`, `env` and `containers` by `name`), and every other
list is atomic (one field), whatever its items hold. The schemas are the real CRDs in ../shared/schemas; the core
kinds the tests serve (Deployment, Pod, Service) take theirs from a CRD that embeds them (JobSet's pod template,
RayCluster's head Service), and `metadata.ownerReferences` is keyed by `uid` as in the core API."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import yaml

from builders import SHARED

Schema = dict[str, Any]
OWNER_REFERENCES: Schema = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"],
                            "items": {"type": "object"}}
CRD_FILES = {  # plural -> the CRD that defines it
    "jobsets": "jobset/jobset.x-k8s.io_jobsets.yaml",
    "leaderworkersets": "lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "workloads": "kueue/kueue.x-k8s.io_workloads.yaml",
    "rayjobs": "kuberay/ray.io_rayjobs.yaml",
    "rayservices": "kuberay/ray.io_rayservices.yaml",
    "rayclusters": "kuberay/ray.io_rayclusters.yaml",
}


def _crd_schema(rel: str) -> Schema | None:
    path = SHARED / "schemas" / rel
    if not path.is_file():
        return None
    for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader):
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
            versions = doc["spec"]["versions"]
            ver = next((v for v in versions if v.get("storage")), versions[0])
            return ver["schema"]["openAPIV3Schema"]
    return None


def _at(schema: Schema | None, *fields: str) -> Schema | None:
    """The schema under a path of fields ('[]' steps into a list's items)."""
    for f in fields:
        if schema is None:
            return None
        schema = schema.get("items") if f == "[]" else (schema.get("properties") or {}).get(f)
    return schema


@cache
def root(plural: str) -> Schema | None:
    """The schema of an object of `plural`, or None (its lists are then atomic)."""
    if plural in CRD_FILES:
        return _crd_schema(CRD_FILES[plural])
    jobset = _crd_schema(CRD_FILES["jobsets"])
    template = _at(jobset, "spec", "replicatedJobs", "[]", "template", "spec", "template")
    if plural == "deployments":
        return {"type": "object", "properties": {"spec": {"type": "object", "properties": {"template": template}}}}
    if plural == "pods":
        return {"type": "object", "properties": {"spec": _at(template, "spec")}}
    if plural == "services":
        ray = _crd_schema(CRD_FILES["rayclusters"])
        return {"type": "object", "properties": {"spec": _at(ray, "spec", "headGroupSpec", "headService", "spec")}}
    return None


def child(schema: Schema | None, field: str, prefix_len: int) -> Schema | None:
    """The schema of `field` under `schema` (metadata's ownerReferences as the core API keys them)."""
    if prefix_len == 1 and field == "ownerReferences":
        return OWNER_REFERENCES
    return (schema or {}).get("properties", {}).get(field) if schema else None


def list_keys(schema: Schema | None) -> list[str] | None:
    """The list-map keys of a list's schema, or None for an atomic list."""
    if schema and schema.get("x-kubernetes-list-type") == "map":
        return list(schema.get("x-kubernetes-list-map-keys") or ())
    return None


def item_key(item: dict[str, Any], keys: list[str]) -> str:
    """`k:{"containerPort":8000,"protocol":"TCP"}`, as fieldsV1 names a list-map's item."""
    return "k:" + json.dumps({k: item.get(k) for k in keys}, separators=(",", ":"))


def matches(item: Any, seg: str) -> bool:
    """`item` is the list-map item that the `k:` segment names."""
    want = json.loads(seg[2:])
    return isinstance(item, dict) and all(item.get(k) == v for k, v in want.items())
