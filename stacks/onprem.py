"""On-prem `infra` stack: no cloud resources, only the expected pools as stack outputs.

Owned machines are racked by people, not created by an API, so there is nothing for Pulumi to create. The
stack still exists, and exports every pool Fleet expects (name, node count, accelerator, labels, taints), for
two reasons: `fleet apply` treats every cluster the same way (infra, then Kueue, then jobs, where a failed
infra stack holds back the rest), and the outputs give drift checks (`pulumi stack output`, a refresh, or a
later `fleet diff` against the live nodes) a recorded statement of what the site should have.
"""

from __future__ import annotations

from typing import Any

from . import Program

EXPORTED_KEYS = ("name", "pool", "accelerator", "kind", "machine_type", "capacity", "node_count", "labels", "taints")


def expected_pools(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The pools the site should have, as exported: the spec entries cut to the keys that describe nodes."""
    return [{key: pool[key] for key in EXPORTED_KEYS} for pool in spec["node_pools"]]


def program(spec: dict[str, Any]) -> Program:
    def run() -> None:
        import pulumi

        pulumi.export("expected_pools", expected_pools(spec))
        pulumi.export("expected_nodes", sum(p["node_count"] or 0 for p in spec["node_pools"]))

    return run
