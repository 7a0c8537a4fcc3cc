"""Completion records: the durable memory that a job finished. Pure (the read and the write are in kube.py).

Where they live, and why: in each cluster, the ConfigMap `fleet-completions` in namespace `fleet-system`, one
data key per job (`<team>.<job>`: names are RFC 1123 labels, so the dot is unambiguous) holding
`{"digest": ..., "result": "succeeded"|"failed", "finished_at": ...}`. The cluster is where the job ran and
where its Workload said it finished, so the record sits beside the evidence, is written with the same
credentials Fleet already uses there (server-side apply, field manager `fleet-completions`), survives the
deletion of the JobSet and Workload (Kueue and JobSet garbage-collect them; people delete them), and survives
Fleet restarting (nothing is kept on the reconciler's disk, and no git commit is needed). `digest` is the
`fleet.dev/spec-digest` of the JobSet that finished (models.spec_digest of the job file): a changed file has
another digest, so the job runs again (plan/live.py). While a cluster is unreachable, a snapshot file keeps the
records it had (model.carry_over), so a lost cluster's finished jobs are not started elsewhere.

Who writes them: `fleet observe --record-completions` and `fleet reconcile`'s loop (kube.record_completions):
every Workload that finished (Succeeded or Failed) whose JobSet carries Fleet's labels and a digest.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from .model import ClusterObservation, Completion

NAMESPACE = "fleet-system"
CONFIGMAP = "fleet-completions"
FIELD_MANAGER = "fleet-completions"


def key_of(job: str) -> str:
    return job.replace("/", ".", 1)


def parse_records(obj: Any) -> tuple[tuple[Completion, ...], list[str]]:
    """The records of a `fleet-completions` ConfigMap, and a message per key that is not one."""
    data = obj.get("data") if isinstance(obj, dict) else None
    out: list[Completion] = []
    bad: list[str] = []
    for key, raw in sorted((data or {}).items()) if isinstance(data, dict) else ():
        team, _, name = str(key).partition(".")
        try:
            doc = json.loads(raw)
            out.append(Completion(job=f"{team}/{name}", **doc))
        except (ValueError, TypeError, ValidationError) as e:
            bad.append(f"key `{key}`: not a completion record ({' '.join(str(e).split())[:200]})")
    return tuple(out), bad


def finished_now(c: ClusterObservation) -> tuple[Completion, ...]:
    """Every record the cluster should hold: those it has, plus the Workloads finished since (by job; a newer
    digest replaces an older record of the same job)."""
    records = {r.job: r for r in c.completions}
    jobsets = {(js.namespace, js.name): js for js in c.jobsets}
    for w in c.workloads:
        phase = w.phase()
        js = jobsets.get((w.namespace, w.jobset)) if w.jobset else None
        if phase not in ("succeeded", "failed") or js is None or js.job_id is None or not js.spec_digest:
            continue
        finished = w.condition("Finished")
        records[js.job_id] = Completion(job=js.job_id, digest=js.spec_digest, result=phase,
                                        finished_at=finished.since if finished else None)
    return tuple(records[k] for k in sorted(records))


def configmap(records: tuple[Completion, ...]) -> dict[str, Any]:
    """The ConfigMap (apply patch) holding `records`: every record each time, as server-side apply drops the
    keys a manager stops sending."""
    data = {key_of(r.job): json.dumps({"digest": r.digest, "result": r.result,
                                       "finished_at": r.finished_at.isoformat() if r.finished_at else None},
                                      sort_keys=True) for r in records}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "fleet"}},
            "data": data}
