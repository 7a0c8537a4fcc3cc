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

Who writes them: `fleet observe --record-completions` and `fleet reconcile`'s loop (recording.record_completions):
every Workload that finished (Succeeded or Failed) and is its JobSet's (its owner reference names the JobSet's
uid) whose JobSet carries Fleet's labels and a digest and sits in its team's namespace (observe/owners.py: a
look-alike in another namespace records nothing).

How, so that no record is ever lost:
- A read that fails (an HTTP error other than 404, a body that is not a ConfigMap) means the records are
  unknown, not absent (`ClusterObservation.completions_unknown`): the loop starts no job that might have
  finished (decide.py) and writes no record to that cluster in that cycle.
- A key that is not a record costs only that key: the others are read, the bad one is reported (a problem
  naming it) and its job counts as unknown (`unreadable_records`: not started while it is bad).
- A write is a server-side apply, never forced, of the entries this writer owns (its field manager's
  `f:data` keys in `managedFields`, sent back as they are, bad ones included) plus the new records, with the
  `resourceVersion` read as its precondition: entries other managers own stay theirs and untouched, an entry
  another manager owns with another value is a conflict reported, not overwritten, and a ConfigMap changed
  since it was read is not written (409; the next cycle reads it again). Nothing is ever replaced whole.

Slurm clusters (slurm/records.py) have no ConfigMap of their own, and slurmctld forgets a finished job
(MinJobAge): their records live in the lease cluster (`reconcile.lease_cluster`, the Kubernetes cluster Fleet
already writes its Lease to), in a ConfigMap of their own, `fleet-completions-slurm` (field manager
`fleet-completions-slurm`), one key per job `<slurm cluster>.<team>.<job>` (`prefix`: cluster names are labels
too, so the first dot ends it). Not in that cluster's `fleet-completions`: every key there is read as a job
that finished on that Kubernetes cluster. The same functions read and write it, with the same rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .model import ClusterObservation, Completion, ObserveProblem

NAMESPACE = "fleet-system"
CONFIGMAP = "fleet-completions"
FIELD_MANAGER = "fleet-completions"
SLURM_CONFIGMAP = SLURM_FIELD_MANAGER = "fleet-completions-slurm"     # in the lease cluster (slurm/records.py)


MAX_PROBLEMS = 20               # bad keys named one by one
CONFLICT_HINT = ("not forced: the ConfigMap changed since it was read, or another field manager owns a key with "
                 "another value; the next cycle reads it again (`kubectl get configmap -o yaml "
                 "--show-managed-fields` shows who owns what)")


@dataclass(frozen=True)
class RecordsRead:
    """What a read of the completion records gave: the records, the jobs whose key holds no record, the
    problems to report, and why the records are unknown (None: read, or there is none yet)."""

    records: tuple[Completion, ...] = ()
    unreadable: tuple[str, ...] = ()
    problems: tuple[ObserveProblem, ...] = ()
    unknown: str | None = None
    live: Any = None                 # the ConfigMap as read (None: absent)


def read_body(body: bytes, where: str, prefix: str = "", configmap: str = CONFIGMAP) -> RecordsRead:
    """The answer to a read of the ConfigMap (200) as records (of its keys that start with `prefix`, less it):
    a body that is no ConfigMap makes them unknown; a key that holds no record costs only that key (a problem
    naming it; its job is `unreadable`)."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        return _malformed(where, e, configmap)
    return read_doc(doc, where, prefix, configmap)


def _malformed(where: str, e: ValueError, configmap: str) -> RecordsRead:
    message = f"{where}: not the completion records ({' '.join(str(e).split())[:300]}): they are unknown this cycle"
    return RecordsRead(problems=(ObserveProblem(
        resource="completions", kind="malformed", message=message,
        hint=f"check `kubectl -n {NAMESPACE} get configmap {configmap} -o yaml`"),), unknown=message)


def read_doc(doc: Any, where: str, prefix: str = "", configmap: str = CONFIGMAP) -> RecordsRead:
    """`read_body` of the ConfigMap already decoded (the Slurm clusters' one is read once, for every prefix)."""
    try:
        records, bad = parse_records(doc, prefix)
    except ValueError as e:
        return _malformed(where, e, configmap)
    hint = (f"fix or delete the key (`kubectl -n {NAMESPACE} edit configmap {configmap}`); until then that job is "
            "not started, and Fleet writes the key again from the Workloads it still sees")
    problems = tuple(ObserveProblem(resource="completions", kind="invalid-object", message=f"{where}: {b}", hint=hint)
                     for _, b in bad[:MAX_PROBLEMS])
    return RecordsRead(records, tuple(sorted({job_of(k[len(prefix):]) for k, _ in bad})), problems, None, doc)


def key_of(job: str) -> str:
    return job.replace("/", ".", 1)


def parse_records(obj: Any, prefix: str = "") -> tuple[tuple[Completion, ...], list[tuple[str, str]]]:
    """The records of a `fleet-completions` ConfigMap (its keys that start with `prefix`, read without it), and
    (key, message) per key that is not one. Raises
    `ValueError` when `obj` is not a ConfigMap whose `data` is a map (then no record can be known)."""
    if not isinstance(obj, dict):
        raise ValueError("not a ConfigMap object")
    data = obj.get("data")
    if data is not None and not isinstance(data, dict):
        raise ValueError(f"`data` is a {type(data).__name__}, not a map")
    out: list[Completion] = []
    bad: list[tuple[str, str]] = []
    for key, raw in sorted((data or {}).items()):
        if not str(key).startswith(prefix):
            continue
        team, _, name = str(key)[len(prefix):].partition(".")
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict):
                raise TypeError(f"a JSON {type(doc).__name__}, not an object")
            out.append(Completion(job=f"{team}/{name}", **doc))
        except (ValueError, TypeError, ValidationError) as e:
            bad.append((str(key), f"key `{key}`: not a completion record ({' '.join(str(e).split())[:200]})"))
    return tuple(out), bad


def job_of(key: str) -> str:
    """The job id a data key names (`<team>.<job>` -> `team/job`)."""
    team, _, name = key.partition(".")
    return f"{team}/{name}"


def owned_keys(obj: Any, manager: str = FIELD_MANAGER) -> set[str]:
    """The `data` keys the field manager's Apply entry owns (`managedFields[].fieldsV1` `f:data` `f:<key>`)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    entries = meta.get("managedFields") if isinstance(meta, dict) else None
    out: set[str] = set()
    for e in entries if isinstance(entries, list) else ():
        if not isinstance(e, dict) or e.get("manager") != manager or e.get("operation", "Apply") != "Apply":
            continue
        fields = e.get("fieldsV1")
        data = fields.get("f:data") if isinstance(fields, dict) else None
        if isinstance(data, dict):
            out.update(k[2:] for k in data if isinstance(k, str) and k.startswith("f:"))
    return out


def finished_now(c: ClusterObservation) -> tuple[Completion, ...]:
    """The records the cluster does not hold yet: the Workloads finished whose owner reference names their
    JobSet's uid (the JobSet with Fleet's labels and a digest), by job, less those already recorded as they
    are. `c` is an owned observation (observe/owners.py: the teams' objects only)."""
    have = {r.job: r for r in c.completions}
    jobsets = {(js.namespace, js.name): js for js in c.jobsets}
    new: dict[str, Completion] = {}
    for w in c.workloads:
        phase = w.phase()
        js = jobsets.get((w.namespace, w.jobset)) if w.jobset else None
        if phase not in ("succeeded", "failed") or js is None or js.job_id is None or not js.spec_digest:
            continue
        if js.uid is None or w.jobset_uid != js.uid:        # not provably this JobSet's Workload
            continue
        finished = w.condition("Finished")
        record = Completion(job=js.job_id, digest=js.spec_digest, result=phase,
                            finished_at=finished.since if finished else None)
        if have.get(record.job) != record:
            new[record.job] = record
    return tuple(new[k] for k in sorted(new))


def merged(records: tuple[Completion, ...], new: tuple[Completion, ...]) -> tuple[Completion, ...]:
    """`records` with `new` in (a new record of a job replaces its old one), by job."""
    out = {r.job: r for r in records}
    out.update((r.job, r) for r in new)
    return tuple(out[k] for k in sorted(out))


def entry(r: Completion) -> str:
    """One record as its data value."""
    return json.dumps({"digest": r.digest, "result": r.result,
                       "finished_at": r.finished_at.isoformat() if r.finished_at else None}, sort_keys=True)


def apply_patch(live: Any, new: tuple[Completion, ...], configmap: str = CONFIGMAP, manager: str = FIELD_MANAGER,
                prefix: str = "") -> dict[str, Any]:
    """The server-side apply patch that adds `new` (keys `prefix` + `<team>.<job>`) to the live ConfigMap (None:
    there is none yet): every key `manager` owns, sent back as it is (server-side apply drops the keys a manager
    stops sending), and the new records; with the live `resourceVersion` as a precondition."""
    data: dict[str, str] = {}
    meta: dict[str, Any] = {"name": configmap, "namespace": NAMESPACE,
                            "labels": {"app.kubernetes.io/managed-by": "fleet"}}
    if isinstance(live, dict):
        raw, live_meta = live.get("data"), live.get("metadata")
        have: dict[str, Any] = raw if isinstance(raw, dict) else {}
        data.update((k, have[k]) for k in sorted(owned_keys(live, manager)) if isinstance(have.get(k), str))
        version = live_meta.get("resourceVersion") if isinstance(live_meta, dict) else None
        if isinstance(version, str) and version:
            meta["resourceVersion"] = version
    data.update((prefix + key_of(r.job), entry(r)) for r in new)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(sorted(data.items()))}
