"""Validation rules of Slurm clusters, pools and jobs (DESIGN 2 and 4e). Pure; each problem located.

- A cluster says how it is reached: `slurm:` for `provider: slurm`, `kubernetes:` for every other provider,
  never both.
- A Slurm pool names its `partition` (the field is for Slurm pools only), is `owned` (the lab's hardware) or
  `reserved` (an allocation), and so has a fixed size (min == max, checked with the other capacity rules):
  Fleet never resizes a partition.
- The reconcile loop's Lease lives in a Kubernetes cluster: `lease_cluster` cannot be a Slurm one.
- A job's `slurm:` block is for training and batch jobs: an inference service has no Slurm form (the planner
  never places one on a Slurm pool: `resolve.gang_fit`).
"""

from __future__ import annotations

from ..models import Cluster
from ..reporter import Reporter

PLACEMENT = "policies/placement.yaml"


def check_cluster(r: Reporter, path: str, cluster: Cluster) -> None:
    slurm = cluster.provider == "slurm"
    if slurm and cluster.slurm is None:
        r.add(path, ("provider",), "a Slurm cluster needs a `slurm:` block (how slurmrestd is reached)",
              'add `slurm: {rest_url: "http://HOST:6820", token_env: SLURM_JWT}`')
    if slurm and cluster.kubernetes is not None:
        r.add(path, ("kubernetes",), "a Slurm cluster is reached through slurmrestd, not a Kubernetes API",
              "remove `kubernetes:`, or set the provider of the Kubernetes cluster it is")
    if not slurm and cluster.kubernetes is None:
        r.add(path, ("provider",), f"a {cluster.provider} cluster needs a `kubernetes:` block",
              "add `kubernetes: {cluster: NAME, context: CONTEXT}`")
    if not slurm and cluster.slurm is not None:
        r.add(path, ("slurm",), f"`slurm:` is for clusters with `provider: slurm`, and this one is {cluster.provider}",
              "remove it, or set `provider: slurm`")
    for i, pool in enumerate(cluster.pools):
        if slurm and pool.partition is None:
            r.add(path, ("pools", i, "name"), f"Slurm pool `{pool.name}` names no partition",
                  f"add `partition: NAME`: the Slurm partition whose nodes are the pool (e.g. {pool.name})")
        if not slurm and pool.partition is not None:
            r.add(path, ("pools", i, "partition"), "`partition` is for pools of Slurm clusters",
                  "remove it, or move the pool to a cluster with `provider: slurm`")
        if slurm and pool.capacity not in ("owned", "reserved"):
            r.add(path, ("pools", i, "capacity"), f"a Slurm partition is owned hardware or an allocation, not "
                  f"`{pool.capacity}`: Fleet does not buy or release its nodes",
                  "set `capacity: owned` (the lab's nodes) or `capacity: reserved` (an allocation)")
        if slurm and pool.scaling != "plan":
            r.add(path, ("pools", i, "scaling"), "a Slurm partition is not scaled by Fleet or an autoscaler",
                  "remove `scaling`")


def check_lease(r: Reporter) -> None:
    doc = r.loaded.placement
    lease = doc.reconcile.lease_cluster if doc is not None else None
    if any(c.name == lease and c.provider == "slurm" for c in r.loaded.clusters):
        r.add(PLACEMENT, ("reconcile", "lease_cluster"), f"lease_cluster `{lease}` is a Slurm cluster; the "
              "reconciler's Lease is a Kubernetes object", "name a Kubernetes cluster (the management cluster)")


def check_jobs(r: Reporter) -> None:
    for job in r.loaded.jobs:
        if job.slurm is not None and job.kind == "inference":
            r.add(r.loaded.job_paths[job.id], ("slurm",), "an inference service does not run on Slurm "
                  "(Slurm runs batch jobs), so its `slurm:` block would never be used", "remove `slurm:`")
