"""What each of Fleet's workloads occupies, read from where its pods run. Pure.

A Deployment or a LeaderWorkerSet says how many replicas it wants, never which units they use; a JobSet's
`fleet.dev/units` annotation says which units the plan gave it. The pods say where the work really is: each
pod of a Fleet workload carries the job's labels (render/pods.py) and `spec.nodeName`, and each node belongs
to a pool and a unit (observe/parse.py):
- a TPU slice is a unit of its own (`<pool>-s<i>`): a pod on any host of slice i occupies unit i, and a
  workload's units are the slices its pods are on, each once;
- a GPU node group's nodes are interchangeable and carry no index: unit i is the i-th node of the pool by
  name, the numbering `decide.observed_units` counts with, and a workload's units are its pods' nodes, one
  entry per pod (replicas that share a node share its unit, as the plan writes them).
Only pods bound to a node and not finished count.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import ClusterObservation


def node_units(c: ClusterObservation) -> dict[str, tuple[str, int, bool]]:
    """node name -> (pool, unit, is a TPU slice) for every node of a pool."""
    out: dict[str, tuple[str, int, bool]] = {}
    index: dict[str, int] = {}
    for n in sorted(c.nodes, key=lambda n: n.name):
        if n.pool is None:
            continue
        if n.unit is not None:
            out[n.name] = (n.pool, n.unit, True)
        else:
            out[n.name] = (n.pool, index.get(n.pool, 0), False)
            index[n.pool] = index.get(n.pool, 0) + 1
    return out


def pod_units(c: ClusterObservation) -> Mapping[tuple[str, str], tuple[int, ...]]:
    """(job id, pool) -> the units the job's running pods occupy in that pool (module docstring)."""
    where = node_units(c)
    slices: dict[tuple[str, str], set[int]] = {}
    nodes: dict[tuple[str, str], list[int]] = {}
    for p in c.pods:
        if p.job_id is None or p.node is None or p.phase in ("Succeeded", "Failed") or p.node not in where:
            continue
        pool, unit, tpu = where[p.node]
        if tpu:
            slices.setdefault((p.job_id, pool), set()).add(unit)
        else:
            nodes.setdefault((p.job_id, pool), []).append(unit)
    out = {k: tuple(sorted(v)) for k, v in nodes.items()}
    out.update({k: tuple(sorted(v)) for k, v in slices.items()})
    return out
