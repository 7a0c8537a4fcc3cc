"""The node pools an update would replace or delete, found in Pulumi's preview, and the refusal that follows.

Fleet's plan never models a replacement: a change to a property the provider cannot update in place (a GKE
node pool's `queuedProvisioning`, machine type, spot, locations, reservation affinity; an EKS node group's
instance types or capacity type; a pool's EC2 placement group or launch template) makes Pulumi delete the pool
and create it again, and every job on its nodes dies, while the plan and the reviewed pull request say the pool
stays. So before an `infra` stack's update, `fleet apply` and the reconcile loop preview it (the engine turns
Pulumi's per-resource `ResourcePreEvent`s into `Step`s), and refuse when a step would replace a pool's
resource, or delete one the stack spec still has (the plan keeps the pool, so its deletion is no decision of
the plan's), that no `--allow-replace CLUSTER/POOL` names: nothing is applied, and the message names each
pool, the operation and the properties that force it, and how to proceed. The loop passes no allowance: it
reports and holds. Pure: no Pulumi import (the engine builds the steps).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
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
    op: str                                     # "replace" | "delete"
    resources: tuple[str, ...]                  # the Pulumi types replaced or deleted
    keys: tuple[str, ...] = field(default=())   # the properties that force the replacement

    @property
    def ref(self) -> str:
        return f"{self.cluster}/{self.pool}"

    def describe(self) -> str:
        what = "REPLACES" if self.op == "replace" else "DELETES"
        forced = f", forced by {', '.join(self.keys)}" if self.keys else ""
        kept = "" if self.op == "replace" else " although the plan keeps it"
        types = ", ".join(t.split(":")[-1] for t in self.resources)
        return (f"{what} node pool {self.ref}{kept} ({types}{forced}): its nodes go, and every job on them "
                f"stops; the plan does not show this")


def name_of(urn: str) -> str:
    """A URN's logical name: `urn:pulumi:STACK::PROJECT::[PARENT$]TYPE::NAME` -> NAME."""
    return urn.rsplit("::", 1)[-1]


def disruptions(spec: Mapping[str, Any], steps: Iterable[Step]) -> list[Disruption]:
    """The pools of `spec`'s cluster that `steps` replace, or delete while `spec` still has them, one per pool (a
    replacement's several steps, and a pool's node group with its launch template, are one), sorted by name.

    A pool `spec` no longer has (a TPU slice the plan released, a pool removed from git) is deleted by the
    plan's own decision, which the plan shows with the jobs it stops or moves: not a disruption here."""
    found: dict[str, tuple[str, list[str], list[str]]] = {}
    for s in steps:
        suffix = POOL_TYPES.get(s.type)
        if suffix is None or s.op not in DISRUPTING:
            continue
        name = name_of(s.urn)
        pool = name[:-len(suffix)] if suffix and name.endswith(suffix) else name
        op, types, keys = found.get(pool, ("delete", [], []))
        op = "replace" if s.op in REPLACING else op
        types += [s.type] if s.type not in types else []
        keys += [k for k in s.keys if k not in keys]
        found[pool] = (op, types, keys)
    kept = {str(p.get("name")) for p in spec.get("node_pools") or ()}
    return [Disruption(str(spec["cluster"]), pool, op, tuple(types), tuple(keys))
            for pool, (op, types, keys) in sorted(found.items()) if op == "replace" or pool in kept]


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
                             "`fleet apply --preview` names each pool an update would replace or delete")
        out.add(v)
    return frozenset(out)
