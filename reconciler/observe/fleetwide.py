"""Every cluster of a repository, Kubernetes and Slurm alike, observed and its completion records written: the
orchestration above observe/kube.py (Kubernetes reads), slurm/observe.py (slurmrestd reads), slurm/records.py
(the Slurm jobs' records, kept in the lease cluster) and observe/recording.py (the writes). It sits above all of
them so that none of them imports another in a circle. EFFECT (network, through those modules).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from ..load import Loaded, load
from ..problems import RejectedError
from ..slurm import records
from ..slurm.observe import with_slurm
from .kube import READ_TIMEOUT_S, observe, targets
from .model import Snapshot
from .owners import team_namespaces
from .recording import record_completions


def observe_repo(files: Mapping[str, bytes], kubeconfig: str | None, observed_at: datetime) -> Snapshot:
    """Observe every cluster of the repository's `fleet/clusters/` (those that load; `fleet validate` reports
    the others), and the robots of deployments/ through their registries (robots/layer.py). Raises
    `RejectedError` only when there is no cluster at all to observe."""
    from ..robots.layer import with_robots

    loaded = load(files)
    return with_robots(observe_loaded(loaded, kubeconfig, observed_at), loaded)


def observe_loaded(loaded: Loaded, kubeconfig: str | None, observed_at: datetime, *,
                   deadline_s: float | None = None) -> Snapshot:
    """`observe_repo` of a repository already loaded (the loop loads it once a cycle, and gives a per-cluster
    deadline: `observe`)."""
    if not loaded.clusters:
        raise RejectedError("no cluster to observe: fleet/clusters/ has no valid cluster file",
                            "run `fleet validate` and fix what it reports")
    snap = observe(targets(loaded.clusters, loaded.locate), kubeconfig, observed_at, deadline_s=deadline_s)
    timeout_s = min(deadline_s or READ_TIMEOUT_S, READ_TIMEOUT_S)
    return records.read(with_slurm(snap, loaded, timeout_s), loaded, kubeconfig, timeout_s)


def record_completions_repo(files: Mapping[str, bytes], snap: Snapshot, kubeconfig: str | None) -> Snapshot:
    """`record_completions` for the repository's clusters (`fleet observe --record-completions`)."""
    return record_completions_loaded(load(files), snap, kubeconfig)


def record_completions_loaded(loaded: Loaded, snap: Snapshot, kubeconfig: str | None) -> Snapshot:
    """`record_completions_repo` of a repository already loaded: each Kubernetes cluster's records
    (observe/recording.py; its teams' namespaces decide whose objects are whose: observe/owners.py), then the
    Slurm clusters' (slurm/records.py)."""
    snap = record_completions(snap, targets(loaded.clusters, loaded.locate), kubeconfig,
                              namespaces=team_namespaces(loaded.teams))
    return records.record(snap, loaded, kubeconfig)
