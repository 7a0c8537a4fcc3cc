"""`fleet observe`: every cluster's Kueue Workloads, JobSets and Nodes, read into one frozen snapshot.

Three modules, so the snapshot can be read (`fleet status`, `fleet schema`, later `--observed` planning)
without importing the Kubernetes client:
- `model`: the snapshot (frozen pydantic models, JSON Schema, `Workload.phase()`).          pure
- `parse`: one API object (decoded JSON) -> one model, or a located `BadObject`.            pure
- `kube`: kubeconfig contexts, the official `kubernetes` client, parallel reads with timeouts, every
  failure turned into a fact of the snapshot; `read_snapshot` for `--observed FILE`.        EFFECT
"""
