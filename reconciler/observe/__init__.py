"""`fleet observe`: every cluster's Kueue Workloads, JobSets and Nodes, read into one frozen snapshot.

Five modules, so the snapshot can be read (`fleet status`, `fleet schema`, later `--observed` planning)
without importing the Kubernetes client:
- `model`: the snapshot (frozen pydantic models, JSON Schema, `Workload.phase()`).          pure
- `parse`: one API object (decoded JSON) -> one model, or a located `BadObject`.            pure
- `kube`: kubeconfig contexts, the official `kubernetes` client, parallel reads with timeouts, every
  failure turned into a fact of the snapshot.                                               EFFECT
- `wire`: a list page's bytes -> its items, pruned to what `parse` reads (pydantic-core).   pure
- `files`: `read_snapshot` (`--observed FILE`) and `write_snapshot`, without the client.   EFFECT
"""
