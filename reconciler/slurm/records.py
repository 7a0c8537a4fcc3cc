"""Durable completion records of Slurm jobs: read into each Slurm cluster's observation, written when a job
Fleet submitted is seen finished. EFFECT (network: the lease cluster's Kubernetes API, through observe/kube.py).

Why: slurmctld remembers a finished job only for `MinJobAge` (300 s by default; with no slurmdbd, Fleet has no
other history), and a job file whose job nobody remembers is a job to submit. So the finish is written down
where Kubernetes clusters' are (observe/completions.py, every rule of its docstring holds), with two choices:
- Where: the lease cluster (`reconcile.lease_cluster`), the one Kubernetes cluster every writer of the fleet
  already reaches (its Lease elects the writer); a Slurm controller has no place of its own Fleet may write.
  In its own ConfigMap `fleet-completions-slurm` (field manager `fleet-completions-slurm`), keys
  `<slurm cluster>.<team>.<job>`: in that cluster's `fleet-completions` each key is read as a job that finished
  on that Kubernetes cluster, and the same job finishing there and on Slurm would be two writers of one key.
  One ConfigMap for every Slurm cluster keeps the RBAC one fixed name (reconcile/deploy.py).
- What: a Fleet job (its comment carries `fleet.dev/job` and `fleet.dev/spec-digest`, in its team's account:
  slurm/observe.py, observe/owners.py) whose Slurm state is terminal, exactly as the live observation counts
  it finished (`completions.finished_now` over the same Workloads): the record makes durable what the live
  view already decides, nothing more. A requeued job is PENDING again, not finished; a cancelled one is gone.
Read: the stored records replace the ones slurm/observe.py derives from the jobs slurmctld still lists (those
are its Workloads anyway). A failed read (or an unreachable lease cluster) makes every Slurm cluster's records
unknown: no job that may have finished is started (reconcile/decide.py; the loop, which cannot renew its
Lease there then, writes nothing anyway). Without a lease cluster there is no store: a limit (docs/slurm.md),
not an unknown (which would stop every start, forever).
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from ..load import Loaded
from ..observe import completions
from ..observe.kube import (
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    ContextError,
    Target,
    _read_completions,
    client_configuration,
    targets,
)
from ..observe.model import ClusterObservation, ObserveProblem, Snapshot
from ..observe.owners import split, team_namespaces
from ..observe.recording import _write_completions


def store(loaded: Loaded) -> Target | None:
    """The lease cluster, where the Slurm clusters' records live (None: no `reconcile.lease_cluster`)."""
    section = loaded.placement.reconcile if loaded.placement is not None else None
    name = section.lease_cluster if section is not None else None
    return next((t for t in targets(loaded.clusters, loaded.locate) if t.name == name), None)


def _slurm(loaded: Loaded) -> set[str]:
    return {c.name for c in loaded.clusters if c.provider == "slurm"}


def read(snap: Snapshot, loaded: Loaded, kubeconfig: str | None, timeout_s: float = READ_TIMEOUT_S) -> Snapshot:
    """`snap` with each Slurm cluster's stored records (or, when they cannot be read, `completions_unknown`)."""
    names, target = _slurm(loaded), store(loaded)
    if not names or target is None:
        return snap
    got = _read(snap, target, kubeconfig, timeout_s)
    clusters = []
    for c in snap.clusters:
        if c.name in names:
            where = f"cluster `{target.name}` ({completions.NAMESPACE}/{completions.SLURM_CONFIGMAP}, keys " \
                    f"`{c.name}.*`)"
            mine = got if got.unknown is not None else completions.RecordsRead() if got.live is None else \
                completions.read_doc(got.live, where, f"{c.name}.", completions.SLURM_CONFIGMAP)
            c = _with(c, mine)
        clusters.append(c)
    return snap.model_copy(update={"clusters": tuple(clusters)})


def _read(snap: Snapshot, target: Target, kubeconfig: str | None, timeout_s: float) -> completions.RecordsRead:
    lease = snap.cluster(target.name)
    if lease is not None and lease.status == "unreachable":
        why = f"lease cluster `{target.name}`, which holds the Slurm clusters' completion records, is unreachable"
        return _unknown(why, "the records are read again once it answers")
    try:
        cfg = client_configuration(target, kubeconfig)
    except ContextError as e:
        return _unknown(e.problem.message, e.problem.hint)
    with k8s.ApiClient(cfg) as api:
        return _read_completions(api, target, cfg.host, (CONNECT_TIMEOUT_S, timeout_s), completions.SLURM_CONFIGMAP)


def _unknown(why: str, hint: str) -> completions.RecordsRead:
    message = f"{why}: the Slurm jobs' completion records are unknown this cycle (no job that may have " \
              "finished is started, no record written)"
    return completions.RecordsRead(problems=(ObserveProblem(resource="completions", kind="server-error",
                                                            message=message, hint=hint),), unknown=why)


def _with(c: ClusterObservation, got: completions.RecordsRead) -> ClusterObservation:
    update: dict[str, Any] = {"problems": (*c.problems, *got.problems)}
    if got.problems and c.status == "ok":
        update["status"] = "degraded"
    if got.unknown is not None:
        update["completions_unknown"] = got.unknown      # the jobs slurmctld still lists keep theirs
    else:
        update |= {"completions": got.records, "unreadable_records": got.unreadable}
    return c.model_copy(update=update)


def record(snap: Snapshot, loaded: Loaded, kubeconfig: str | None) -> Snapshot:
    """EFFECT: each Slurm cluster's newly finished Fleet jobs added to the lease cluster's records (a write
    only when there is one to add; none while the records are unknown); a failed write is a problem of that
    Slurm cluster, its records as they were (the next cycle tries again)."""
    names, target = _slurm(loaded), store(loaded)
    if not names or target is None:
        return snap
    lease = snap.cluster(target.name)
    server = (lease.server if lease is not None else None) or ""
    owned = split(snap, team_namespaces(loaded.teams)).snapshot
    clusters = []
    for c, mine in zip(snap.clusters, owned.clusters, strict=True):
        new = completions.finished_now(mine) if c.name in names and c.status != "unreachable" \
            and c.completions_unknown is None else ()
        if new:
            problem = _write_completions(target, kubeconfig, new, server, (CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
                                         completions.SLURM_CONFIGMAP, completions.SLURM_FIELD_MANAGER, f"{c.name}.")
            c = c.model_copy(update={"completions": completions.merged(c.completions, new)} if problem is None else
                             {"problems": (*c.problems, problem), "status": "degraded"})
        clusters.append(c)
    return snap.model_copy(update={"clusters": tuple(clusters)})
