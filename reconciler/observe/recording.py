"""Completion records written (observe/completions.py says where, why and how): `fleet observe
--record-completions` and the reconcile loop's step 6. EFFECT (network: the clusters' Kubernetes API, through
observe/kube.py's requests): each Kubernetes cluster's finished Workloads into its own `fleet-completions`, then
the Slurm clusters' finished jobs into the lease cluster's `fleet-completions-slurm` (slurm/records.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from kubernetes import client as k8s

from . import completions
from .kube import (
    _COMPLETIONS,
    COMPLETIONS_PATH,
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    ContextError,
    Target,
    _call,
    _read_completions,
    _ReadFailed,
    client_configuration,
)
from .model import Completion, ObserveProblem, Snapshot
from .owners import split


def record_completions(snap: Snapshot, targets: Sequence[Target], kubeconfig: str | None, *,
                       namespaces: Mapping[str, str] | None = None,
                       timeout_s: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)) -> Snapshot:
    """EFFECT: add each reachable cluster's new completion records (its finished Workloads, observe/
    completions.py; of the teams' own objects: `namespaces`, team -> namespace, observe/owners.py) to its
    `fleet-completions` ConfigMap by server-side apply, merged with what is there; the snapshot with the
    records it now holds. A cluster whose records are unknown (a failed read) gets no write; one whose write
    fails keeps its records and gets a problem (never an exception)."""
    by_name = {t.name: t for t in targets}
    owned = split(snap, namespaces).snapshot if namespaces is not None else snap
    clusters = []
    for c, mine in zip(snap.clusters, owned.clusters, strict=True):
        target = by_name.get(c.name)
        new = completions.finished_now(mine)
        if c.status == "unreachable" or c.completions_unknown is not None or target is None or not target.context \
                or not new:
            clusters.append(c)
            continue
        problem = _write_completions(target, kubeconfig, new, c.server or "", timeout_s)
        done = {"completions": completions.merged(c.completions, new)}
        failed = {"problems": (*c.problems, problem), "status": "degraded"}
        clusters.append(c.model_copy(update=done if problem is None else failed))
    return snap.model_copy(update={"clusters": tuple(clusters)})


def _write_completions(target: Target, kubeconfig: str | None, new: tuple[Completion, ...], server: str,
                       timeout_s: tuple[float, float], configmap: str = completions.CONFIGMAP,
                       manager: str = completions.FIELD_MANAGER, prefix: str = "") -> ObserveProblem | None:
    """Read the ConfigMap again and apply `new` into it (`completions.apply_patch`: this writer's own keys as
    they are plus the new ones, the resourceVersion read as a precondition, never forced); a problem, or None."""
    path = COMPLETIONS_PATH.replace(completions.CONFIGMAP, configmap)
    where = f"cluster `{target.name}` (context `{target.context}`, {server}{path})"
    try:
        cfg = client_configuration(target, kubeconfig)
    except ContextError as e:
        return e.problem.model_copy(update={"resource": "completions", "message": f"{where}: {e.problem.message}"})
    with k8s.ApiClient(cfg) as api:
        read = _read_completions(api, target, server, timeout_s, configmap)
        if read.unknown is not None:
            return ObserveProblem(resource="completions", kind="server-error",
                                  message=f"{where}: the records could not be read again before writing, so none "
                                          f"was written ({read.unknown})",
                                  hint="the next cycle reads and writes them again")
        body = json.dumps(completions.apply_patch(read.live, new, configmap, manager, prefix)).encode()
        try:
            _call(api, "PATCH", path, [("fieldManager", manager)], body, _COMPLETIONS,
                  where, timeout_s, content_type="application/apply-patch+yaml")
        except _ReadFailed as e:
            hint = e.problem.hint
            if e.problem.kind in ("forbidden", "not-found"):
                hint = (f"grant Fleet's identity `patch` on configmaps in namespace {completions.NAMESPACE} and make "
                        "sure the namespace exists")
            elif " HTTP 409" in e.problem.message:
                hint = completions.CONFLICT_HINT
            return e.problem.model_copy(update={"hint": hint})
    return None
