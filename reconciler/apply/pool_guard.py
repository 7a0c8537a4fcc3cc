"""The node pools an update would replace, roll or delete, found in Pulumi's preview, and the refusal that follows.

Fleet's plan never models a pool's nodes going: a change to a property the provider cannot update in place (a
GKE node pool's `queuedProvisioning`, spot, location, reservation affinity, accelerators; an EKS node group's
instance types or capacity type; a pool's EC2 placement group) makes Pulumi delete the pool and create it
again, and every job on its nodes dies, while the plan and the reviewed pull request say the pool stays. Some
changes Pulumi shows as a plain `update` take the nodes as surely (`ROLLS`): the provider updates the pool in
place by re-creating its nodes. GKE migrates a pool's nodes for every node-config change but its Kubernetes
labels and taints, network tags and resource labels (the GKE API updates those on the running nodes: "Update
node labels and taints for existing node pools"; since the Google provider's 5.10 a machine type, disk type or
disk size change is such an update, not a replacement); a GKE pool's node locations are updated in place
too, and GKE removes the nodes of a zone the pool leaves (stacks/gcp.py pins each pool to one zone, so a
change of `fleet:nodeZone` moves every node); EKS rolls a node group whose launch template version,
Kubernetes version, release version or AMI type changes (UpdateNodegroupVersion), and stacks/aws.py's node
groups follow their template's latest version, so a template change beyond its tags rolls them. Labels,
taints, scaling and tags are not rolls. The rule reads Pulumi's detailed diff (property paths); where a step
has none, a change of a pool's node config or launch template counts as a roll (it cannot be told apart).

So before an `infra` stack's update, `fleet apply` and the reconcile loop preview it (the engine turns
Pulumi's per-resource `ResourcePreEvent`s into `Step`s), and refuse when a step would replace or roll a pool's
nodes, or delete a pool the stack spec still has (the plan keeps the pool, so its deletion is no decision of
the plan's), that no `--allow-replace CLUSTER/POOL` names: nothing is applied, and the message names each
pool, the operation and the properties that force it, and how to proceed. The loop passes no allowance: it
reports and holds. Pure: no Pulumi import (the engine builds the steps).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..problems import UsageError

POOL_TYPES: Mapping[str, str] = {
    "gcp:container/nodePool:NodePool": "",               # stacks/gcp.py: the GKE node pool, named as the pool
    "aws:eks/nodeGroup:NodeGroup": "",                   # stacks/aws.py: the EKS node group, named as the pool
    "aws:ec2/placementGroup:PlacementGroup": "-placement",          # a compact node group's placement group
    "aws:ec2/launchTemplate:LaunchTemplate": "-launch-template",    # its launch template
}
"""Resource type -> the suffix stacks/*.py append to the pool's name for the resource's logical name."""
REPLACING = ("replace", "create-replacement", "delete-replaced")
DISRUPTING = (*REPLACING, "delete")
"""Pulumi `OpType` values that take a pool's nodes away: the steps of a replacement, and a plain delete."""
GKE_IN_PLACE = frozenset({"labels", "taints", "tags", "resourceLabels"})
"""A GKE node pool's node-config fields the GKE API updates on the running nodes."""
ROLLS: Mapping[str, Callable[[Sequence[str]], bool]] = {
    "gcp:container/nodePool:NodePool": lambda p: p[0] == "nodeLocations" or
    (p[0] == "nodeConfig" and (len(p) == 1 or p[1] not in GKE_IN_PLACE)),
    "aws:eks/nodeGroup:NodeGroup": lambda p: p[0] in {"launchTemplate", "version", "releaseVersion", "amiType"},
    "aws:ec2/launchTemplate:LaunchTemplate": lambda p: p[0] not in {"tags", "tagsAll"},
}
"""Resource type -> whether an in-place update of this property path (its names) re-creates the pool's nodes."""


@dataclass(frozen=True)
class Step:
    """One resource step of a preview (Pulumi's `StepEventMetadata`): `op` an `OpType` value, `keys` the
    properties that force a replacement (Pulumi sets them on `replace`/`create-replacement`), `diffs` the
    properties that change."""

    op: str
    urn: str
    type: str
    keys: tuple[str, ...] = ()
    diffs: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()                 # the detailed diff's property paths ("nodeConfig.machineType")


@dataclass(frozen=True)
class Preview:
    """What a preview of one stack found: change counts by operation, and the resource steps."""

    counts: dict[str, int]
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True)
class Disruption:
    """A pool whose nodes an update would take away: `pool` as the stack names it (the node pool's name)."""

    cluster: str
    pool: str
    op: str                                     # "replace" | "roll" | "delete"
    resources: tuple[str, ...]                  # the Pulumi types replaced, rolled or deleted
    keys: tuple[str, ...] = field(default=())   # the properties that force the replacement or the roll

    @property
    def ref(self) -> str:
        return f"{self.cluster}/{self.pool}"

    def describe(self) -> str:
        what = {"replace": "REPLACES", "roll": "RE-CREATES THE NODES OF"}.get(self.op, "DELETES")
        forced = f", forced by {', '.join(self.keys)}" if self.keys else ""
        kept = " although the plan keeps it" if self.op == "delete" else ""
        types = ", ".join(t.split(":")[-1] for t in self.resources)
        return (f"{what} node pool {self.ref}{kept} ({types}{forced}): its nodes go, and every job on them "
                f"stops; the plan does not show this")


def name_of(urn: str) -> str:
    """A URN's logical name: `urn:pulumi:STACK::PROJECT::[PARENT$]TYPE::NAME` -> NAME."""
    return urn.rsplit("::", 1)[-1]


def rolled_by(step: Step) -> tuple[str, ...]:
    """The property paths of an `update` step that re-create its pool's nodes (module docstring); () if none
    does. Without a detailed diff, the changed top-level properties are judged whole (`nodeConfig` rolls)."""
    rolls = ROLLS.get(step.type)
    if step.op != "update" or rolls is None:
        return ()
    return tuple(p for p in step.paths or step.diffs if rolls(_parts(p)))


def _parts(path: str) -> list[str]:
    """A detailed diff's property path -> its names: `nodeConfig.taints[0].key` -> [nodeConfig, taints, key]."""
    return [p for p in re.split(r"[.\[\]]+", path) if p and not p.isdigit()] or [path]


def disruptions(spec: Mapping[str, Any], steps: Iterable[Step]) -> list[Disruption]:
    """The pools of `spec`'s cluster that `steps` replace or roll, or delete while `spec` still has them, one per
    pool (a replacement's several steps, and a pool's node group with its launch template, are one; a
    replacement outranks a roll, a roll a delete), sorted by name.

    A pool `spec` no longer has (a TPU slice the plan released, a pool removed from git) is deleted by the
    plan's own decision, which the plan shows with the jobs it stops or moves: not a disruption here."""
    found: dict[str, tuple[str, list[str], list[str]]] = {}
    rank = {"delete": 0, "roll": 1, "replace": 2}
    for s in steps:
        suffix = POOL_TYPES.get(s.type)
        rolls = rolled_by(s) if suffix is not None else ()
        if suffix is None or (s.op not in DISRUPTING and not rolls):
            continue
        name = name_of(s.urn)
        pool = name[:-len(suffix)] if suffix and name.endswith(suffix) else name
        op, types, keys = found.get(pool, ("delete", [], []))
        this = "replace" if s.op in REPLACING else "roll" if rolls else "delete"
        op = max(op, this, key=rank.__getitem__) if pool in found else this
        types += [s.type] if s.type not in types else []
        keys += [k for k in (*s.keys, *rolls) if k not in keys]
        found[pool] = (op, types, keys)
    kept = {str(p.get("name")) for p in spec.get("node_pools") or ()}
    return [Disruption(str(spec["cluster"]), pool, op, tuple(types), tuple(keys))
            for pool, (op, types, keys) in sorted(found.items()) if op != "delete" or pool in kept]


def refused(spec: Mapping[str, Any], steps: Iterable[Step], allow: Collection[str]) -> list[Disruption]:
    """The disruptions of `steps` that no `CLUSTER/POOL` in `allow` names."""
    return [d for d in disruptions(spec, steps) if d.ref not in allow]


def refusal(stack: str, bad: Sequence[Disruption]) -> tuple[str, str]:
    """The message and the hint of an update refused for `bad` (not empty)."""
    lines = "; ".join(d.describe() for d in bad)
    flags = " ".join(f"--allow-replace {d.ref}" for d in bad)
    return (f"stack {stack}: refusing to update: {lines}",
            f"move the work off first (`status: draining` on the cluster, or the pool's jobs to other pools) and "
            f"merge that, then rerun `fleet apply {flags}`; `fleet apply --preview` lists every such pool")


def parse_allow(values: Iterable[str]) -> frozenset[str]:
    """`--allow-replace` values: each `CLUSTER/POOL` (the pool as `fleet apply --preview` names it)."""
    out = set()
    for v in values:
        cluster, _, pool = v.partition("/")
        if not cluster or not pool or "/" in pool:
            raise UsageError(f"--allow-replace {v!r}: expected CLUSTER/POOL, e.g. gke-use5/v6e-flex",
                             "`fleet apply --preview` names each pool an update would replace, re-create or delete")
        out.add(v)
    return frozenset(out)
