"""Check a stack spec (the JSON `fleet render` writes) before any Pulumi program touches it.

The spec is the only input of the programs in this package (contract: the "Stack spec contract" shared by
`fleet render` and `stacks/`). A program that read a malformed spec would fail deep inside a provider with a
message about some resource argument; checking here names the stack file and the key instead. Only the keys
the programs use are checked: the contract lets fields be added, so unknown keys are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.problems import RejectedError

SPEC_VERSION = 1
LAYERS = ("infra", "kueue", "jobs")
PROVIDERS = ("gcp", "aws", "onprem")
KINDS = ("tpu", "gpu", "trainium")
CAPACITIES = ("on-demand", "spot", "reserved", "owned")
SCALINGS = ("plan", "autoscaler")
PROVISIONINGS = ("fixed", "queued")
GPU_DIRECT_KINDS = ("tcpx", "tcpxo", "rdma")
TAINT_EFFECTS = ("NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE")
HINT = "stack specs are written by `fleet render --out DIR`; render them again rather than editing them by hand"


class SpecError(RejectedError):
    """A stack spec that breaks the contract: exit 1, naming the stack file and the key."""

    def __init__(self, source: str, key: str, message: str) -> None:
        super().__init__(f"{source}: {key}: {message}", HINT)
        self.source = source
        self.key = key


class _Checker:
    """Reads keys of one spec and raises SpecError with the full key path (`node_pools[2].autoscaling`)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> SpecError:
        return SpecError(self.source, key, message)

    def get(self, obj: Mapping[str, Any], key: str, path: str, types: tuple[type, ...], nullable: bool = False) -> Any:
        full = f"{path}.{key}" if path else key
        if key not in obj:
            raise self.fail(full, "required key is missing")
        value = obj[key]
        if value is None and nullable:
            return None
        # bool is an int in Python; a count or a version must not be `true`
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            want = " or ".join(t.__name__ for t in types) + (" or null" if nullable else "")
            raise self.fail(full, f"expected {want}, got {type(value).__name__} {value!r}")
        return value

    def choice(self, obj: Mapping[str, Any], key: str, path: str, choices: tuple[str, ...],
               nullable: bool = False) -> Any:
        value = self.get(obj, key, path, (str,), nullable)
        if value is not None and value not in choices:
            raise self.fail(f"{path}.{key}" if path else key, f"{value!r} is not one of {', '.join(choices)}")
        return value


def validate_spec(spec: Any, source: str) -> dict[str, Any]:
    """Return `spec` unchanged if it follows the contract, else raise SpecError naming `source` and the key.

    `source` is the stack file (`.fleet/render/stacks/gke-use5-infra.json`) or, for a spec built in memory,
    its stack name.
    """
    c = _Checker(source)
    if not isinstance(spec, dict):
        raise c.fail("(top level)", f"expected a JSON object, got {type(spec).__name__}")
    version = c.get(spec, "version", "", (int,))
    if version != SPEC_VERSION:
        raise c.fail("version", f"version {version} is not supported (this Fleet reads version {SPEC_VERSION})")
    layer = c.choice(spec, "layer", "", LAYERS)
    stack = c.get(spec, "stack", "", (str,))
    cluster = c.get(spec, "cluster", "", (str,))
    if stack != f"{cluster}-{layer}":
        raise c.fail("stack", f"{stack!r} should be {cluster}-{layer} (cluster, then layer)")
    c.choice(spec, "provider", "", PROVIDERS)
    c.get(spec, "region", "", (str,))
    c.get(spec, "zone", "", (str,), nullable=True)
    kube = c.get(spec, "kubernetes", "", (dict,))
    c.get(kube, "cluster", "kubernetes", (str,))
    c.get(kube, "context", "kubernetes", (str,), nullable=True)
    if layer == "infra":
        pools = c.get(spec, "node_pools", "", (list,))
        names: set[str] = set()
        for i, pool in enumerate(pools):
            name = _check_pool(c, pool, f"node_pools[{i}]")
            if pool.get("provisioning") == "queued" and spec["provider"] != "gcp":
                raise c.fail(f"node_pools[{i}].provisioning", f"queued provisioning is GKE's (a ProvisioningRequest "
                             f"grows a queued-provisioning node pool); a {spec['provider']} stack has none")
            if spec["provider"] != "onprem" and pool["machine_type"] is None:
                raise c.fail(f"node_pools[{i}].machine_type", "a cloud node pool needs its machine/instance type")
            if name in names:
                raise c.fail(f"node_pools[{i}].name", f"{name!r} appears twice; node pool names must be unique")
            names.add(name)
    else:
        objects = c.get(spec, "objects", "", (list,))
        for i, obj in enumerate(objects):
            _check_object(c, obj, f"objects[{i}]")
    return spec


def _check_pool(c: _Checker, pool: Any, path: str) -> str:
    if not isinstance(pool, dict):
        raise c.fail(path, f"expected an object, got {type(pool).__name__}")
    name: str = c.get(pool, "name", path, (str,))
    if not name or len(name) > 40:
        raise c.fail(f"{path}.name", f"{name!r} must be 1 to 40 characters (cloud node pool name)")
    c.get(pool, "pool", path, (str,))
    c.get(pool, "slice", path, (int,), nullable=True)
    c.get(pool, "accelerator", path, (str,))
    kind = c.choice(pool, "kind", path, KINDS)
    c.get(pool, "machine_type", path, (str,), nullable=True)
    c.choice(pool, "capacity", path, CAPACITIES)
    scaling = c.choice(pool, "scaling", path, SCALINGS)
    count = c.get(pool, "node_count", path, (int,), nullable=True)
    auto = c.get(pool, "autoscaling", path, (dict,), nullable=True)
    if scaling == "plan":
        if count is None or count < 0:
            raise c.fail(f"{path}.node_count", "scaling `plan` needs a node_count >= 0")
    else:
        if auto is None:
            raise c.fail(f"{path}.autoscaling", "scaling `autoscaler` needs autoscaling {min_nodes, max_nodes}")
        low = c.get(auto, "min_nodes", f"{path}.autoscaling", (int,))
        high = c.get(auto, "max_nodes", f"{path}.autoscaling", (int,))
        if not 0 <= low <= high:
            raise c.fail(f"{path}.autoscaling", f"needs 0 <= min_nodes <= max_nodes, got {low} and {high}")
    if "provisioning" in pool:      # optional: added for queued pools (GKE flex-start), absent on every other
        _check_queued(c, pool, path, scaling, count, auto)
    topology = c.get(pool, "tpu_topology", path, (str,), nullable=True)
    if kind == "tpu" and topology is None:
        raise c.fail(f"{path}.tpu_topology", "a TPU node pool needs its slice topology (e.g. 4x4x4)")
    c.choice(pool, "placement_policy", path, ("COMPACT",), nullable=True)
    guest = c.get(pool, "guest_accelerator", path, (dict,), nullable=True)
    if guest is not None:
        c.get(guest, "type", f"{path}.guest_accelerator", (str,))
        c.get(guest, "count", f"{path}.guest_accelerator", (int,))
    if "efa_interfaces" in pool:      # optional: added by issue 13, older specs lack it
        efa = c.get(pool, "efa_interfaces", path, (int,))
        if efa < 0:
            raise c.fail(f"{path}.efa_interfaces", f"needs a count >= 0, got {efa}")
    if "gpu_direct" in pool:
        direct = c.get(pool, "gpu_direct", path, (dict,), nullable=True)
        if direct is not None:
            c.choice(direct, "kind", f"{path}.gpu_direct", GPU_DIRECT_KINDS)
            if c.get(direct, "networks", f"{path}.gpu_direct", (int,)) < 1:
                raise c.fail(f"{path}.gpu_direct.networks", "needs at least one additional network")
    labels = c.get(pool, "labels", path, (dict,))
    for key, value in labels.items():
        if not isinstance(value, str):
            raise c.fail(f"{path}.labels.{key}", f"label values are strings, got {value!r}")
    taints = c.get(pool, "taints", path, (list,))
    for j, taint in enumerate(taints):
        where = f"{path}.taints[{j}]"
        if not isinstance(taint, dict):
            raise c.fail(where, "expected {key, value, effect}")
        c.get(taint, "key", where, (str,))
        c.get(taint, "value", where, (str,))
        c.choice(taint, "effect", where, TAINT_EFFECTS)
    return name


def _check_queued(c: _Checker, pool: dict[str, Any], path: str, scaling: str, count: Any, auto: Any) -> None:
    """A queued node pool's nodes come only from ProvisioningRequests: it autoscales from 0, with no count."""
    if c.choice(pool, "provisioning", path, PROVISIONINGS) != "queued":
        return
    if scaling != "autoscaler" or count is not None or auto["min_nodes"] != 0:
        raise c.fail(f"{path}.provisioning", "a queued node pool autoscales from zero (scaling `autoscaler`, "
                     f"node_count null, autoscaling.min_nodes 0); got scaling {scaling!r}, node_count {count!r}, "
                     f"min_nodes {auto['min_nodes'] if auto else None!r}")
    if pool["capacity"] != "on-demand":
        raise c.fail(f"{path}.provisioning", f"queued provisioning is flex-start capacity, neither spot nor a "
                     f"reservation; got capacity {pool['capacity']!r}")


def _check_object(c: _Checker, obj: Any, path: str) -> None:
    if not isinstance(obj, dict):
        raise c.fail(path, f"expected a Kubernetes manifest object, got {type(obj).__name__}")
    c.get(obj, "apiVersion", path, (str,))
    c.get(obj, "kind", path, (str,))
    meta = c.get(obj, "metadata", path, (dict,))
    c.get(meta, "name", f"{path}.metadata", (str,))
    if "namespace" in meta:
        c.get(meta, "namespace", f"{path}.metadata", (str,), nullable=True)
