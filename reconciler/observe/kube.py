"""`fleet observe`, the effect: every cluster's Kueue Workloads, JobSets, Nodes and Fleet's inference Deployments and
LeaderWorkerSets read into one snapshot.

EFFECT (network: each cluster's Kubernetes API; reads the kubeconfig). The pure parts are `model` (the snapshot, its
JSON Schema, `Workload.phase()`) and `parse` (one API object -> one model). How, and why:
- Each cluster is reached through the kubeconfig context its `kubernetes.context` names, never the current context
  (a wrong current context must not make Fleet read, or later write, another cluster). A cluster without one is a
  `no-context` fact pointing at its file and line.
- The official `kubernetes` client does the kubeconfig work (contexts, tokens, client certificates, exec and
  auth-provider plugins, TLS) and the HTTP (its `ApiClient`: `param_serialize` + `call_api`, so auth and TLS are
  exactly the client's). The body is not deserialized by the client: `wire.decode_page` decodes it in pydantic-core,
  keeping only the fields `parse` reads (a page it cannot take is decoded in full with `json.loads`, so each bad
  object is still named), then `parse` builds the models. Why: Workloads and JobSets have no typed API in the client
  (its CustomObjectsApi gives plain dicts anyway), so one path serves all three kinds; importing `CoreV1Api` costs
  ~1.7 s of CPU on the 2-core machine, paid by every `fleet observe`. The typed Node path is not the bottleneck
  either way (bench/bench_observe.py --typed, once, on a loaded machine: 2,000 Nodes in 0.19 s typed, 0.27 s by this
  path including loading the kubeconfig), so the import decides. Pages of `PAGE_SIZE` items (limit/continue) keep
  memory per request bounded; only the compact models are kept.
- Clusters are read in parallel (a thread each, up to `MAX_WORKERS`), each with a connect and read timeout per
  request and no client retries. Within a cluster, Nodes, Workloads, JobSets, ... are read one after another, so a
  cluster answering each request slowly but in time costs their sum (seven at 30 s: minutes); so the reconcile loop
  gives a deadline (`deadline_s`): a cluster not read whole within it is `slow` and skipped like an unreachable one,
  the others go on (observe/deadline.py). Threads, though decoding and parsing hold the GIL: a process pool (not
  tried) would have to send every model back to this process, and the 2-core machine has no spare core for it.
- Every failure is a fact in the snapshot (`ObserveProblem` with a message naming the cluster, context, server and
  API path, and a hint): connection refused, timeout, 401, 403, 404 (CRD not installed), 5xx, a body that is not
  JSON, objects that do not parse (skipped one by one). A failure to connect or authenticate stops that cluster
  (`unreachable`); a failed list of one resource leaves the others (`degraded`).
- The pods of Fleet's workloads (label `fleet.dev/job`, on every pod template render writes) are listed too, for the
  node each runs on: what every JobSet, Deployment and LeaderWorkerSet occupies (observe/occupancy.py).
- Inference services (render/service.py: a Deployment or a LeaderWorkerSet per pool) are listed with the label
  selector `fleet.dev/job` (Fleet's only; checked again when parsed), so the snapshot says which services run where
  and how many replicas are ready. A cluster without the LeaderWorkerSet CRD (404) has none: that is no problem
  (Fleet needs it only for multi-host replicas; `fleet apply` says so when it is missing). A forbidden or failing
  list is a problem like any other (`degraded`). Slurm clusters are read through slurmrestd (slurm/observe.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s
from pydantic import ValidationError

from ..models import Cluster
from . import completions
from . import kubeconfig as kubeconfig_files
from .deadline import Deadline, read_all, slow
from .files import read_snapshot as read_snapshot  # where `--observed` callers found it before
from .model import (
    ClusterObservation,
    Completion,
    JobSet,
    Node,
    ObserveProblem,
    Pod,
    ProblemKind,
    Resource,
    ServiceWorkload,
    Snapshot,
    Workload,
)
from .parse import BadObject
from .ray import merge as merge_ray
from .reads import READS, _Read
from .wire import decode_page

PAGE_SIZE = 500
MAX_WORKERS = 32
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0
MAX_OBJECT_PROBLEMS = 20          # per resource; the rest are counted, not listed
M = TypeVar("M", Workload, JobSet, Node, ServiceWorkload, Pod)


@dataclass(frozen=True)
class Target:
    """One cluster to observe: its Fleet name, kubeconfig context, and where the context is (or should be) set."""

    name: str
    context: str | None
    where: str            # `fleet/clusters/<name>.yaml:LINE` of `kubernetes.context` (or of `kubernetes`)


class _ReadFailed(Exception):
    def __init__(self, problem: ObserveProblem, fatal: bool) -> None:
        super().__init__(problem.message)
        self.problem, self.fatal = problem, fatal


def observe(targets: Sequence[Target], kubeconfig: str | None, observed_at: datetime, *,
            timeout_s: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
            page_size: int = PAGE_SIZE, deadline_s: float | None = None) -> Snapshot:
    """Read every target in parallel; never raises for a cluster's failure (it is in the snapshot). With
    `deadline_s`, a cluster not read whole within that many seconds is `slow` (observe/deadline.py)."""
    results = read_all(targets, lambda t, deadline, reading: observe_cluster(t, kubeconfig, timeout_s, page_size,
                                                                             deadline, reading),
                       deadline_s, MAX_WORKERS, READS[0].resource)
    return Snapshot(observed_at=observed_at, clusters=tuple(sorted(results, key=lambda c: c.name)))


class ContextError(Exception):
    """The cluster's kubeconfig context cannot be used: `problem` says why and how to fix it."""

    def __init__(self, problem: ObserveProblem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def client_configuration(target: Target, kubeconfig: str | None) -> k8s.Configuration:
    """The client configuration of the target's own kubeconfig context (never the current context), without
    client retries; `ContextError` when the cluster names no context or the kubeconfig cannot give it. The one
    place Fleet turns a cluster into an API client, for reading (`observe`) and writing (`apply.jobs`)."""
    if not target.context:
        raise ContextError(ObserveProblem(
            resource="kubeconfig", kind="no-context",
            message=f"{target.where}: cluster `{target.name}` names no kubeconfig context (kubernetes.context)",
            hint=f"set `kubernetes.context` in fleet/clusters/{target.name}.yaml to its context "
                 "(`kubectl config get-contexts` lists them); Fleet never uses the current context"))
    cfg = k8s.Configuration()
    try:
        kubeconfig_files.load(kubeconfig, target.context, cfg)   # parsed once while the files are unchanged
    except Exception as e:  # ConfigException, a missing or unparsable file: the client raises several kinds
        raise ContextError(ObserveProblem(
            resource="kubeconfig", kind="kubeconfig",
            message=f"cluster `{target.name}`: cannot use kubeconfig context `{target.context}` "
                    f"({kubeconfig or '~/.kube/config'}): {_one_line(e)}",
            hint=f"add the context to the kubeconfig (KUBECONFIG), or fix `kubernetes.context` at {target.where}")
        ) from None
    cfg.retries = False                      # a timeout is a fact, not something to wait out four times
    return cfg


def observe_cluster(target: Target, kubeconfig: str | None, timeout_s: tuple[float, float],
                    page_size: int, deadline: Deadline | None = None,
                    reading: MutableMapping[str, Resource] | None = None) -> ClusterObservation:
    """One cluster read; `deadline` bounds every request's timeouts, and no request is sent past it (the
    cluster is then `slow`); `reading[target.name]` says what is being read, for that message."""
    try:
        cfg = client_configuration(target, kubeconfig)
    except ContextError as e:
        return _unreachable(target, None, None, e.problem)
    server = cfg.host
    got: dict[str, tuple[Any, ...]] = {read.resource: () for read in READS}
    problems: list[ObserveProblem] = []
    failed_lists = 0

    def within(resource: Resource) -> tuple[float, float] | None:
        """This request's timeouts, or None when the deadline has passed."""
        if reading is not None:
            reading[target.name] = resource
        return timeout_s if deadline is None else deadline.timeouts(timeout_s)

    with k8s.ApiClient(cfg) as api:
        for read in READS:
            bounded = within(read.resource)
            if bounded is None:
                return slow(target, read.resource, deadline.seconds if deadline else 0, server)
            try:
                got[read.resource], bad = _list_all(api, read, target, server, bounded, page_size)
                problems += bad
            except _ReadFailed as e:
                failed_lists += 1
                if e.problem.kind == "timeout" and bounded != timeout_s:     # cut short by the deadline
                    return slow(target, read.resource, deadline.seconds if deadline else 0, server)
                if e.fatal:
                    return _unreachable(target, target.context, server, e.problem)
                if not (read.absent_ok and e.problem.kind == "not-found"):
                    problems.append(e.problem)
        records: tuple[Completion, ...] = ()
        unreadable: tuple[str, ...] = ()
        unknown: str | None = None
        if failed_lists < len(READS):
            bounded = within("completions")
            if bounded is None:
                return slow(target, "completions", deadline.seconds if deadline else 0, server)
            recs = _read_completions(api, target, server, bounded)
            if bounded != timeout_s and any(p.kind == "timeout" for p in recs.problems):
                return slow(target, "completions", deadline.seconds if deadline else 0, server)
            records, unreadable, unknown = recs.records, recs.unreadable, recs.unknown
            problems += recs.problems
    status = "unreachable" if failed_lists == len(READS) else "degraded" if problems else "ok"
    ray, workloads = merge_ray((*got["rayjobs"], *got["rayservices"]), got["rayclusters"], got["workloads"])
    return ClusterObservation(
        name=target.name, context=target.context, server=server, status=status, problems=tuple(problems),
        nodes=tuple(sorted(got["nodes"], key=lambda n: n.name)),
        workloads=tuple(sorted(workloads, key=lambda w: (w.namespace, w.name))),
        jobsets=tuple(sorted((*got["jobsets"], *ray), key=lambda j: (j.namespace, j.name))),
        services=tuple(sorted((*got["deployments"], *got["leaderworkersets"]),
                              key=lambda s: (s.namespace, s.name, s.kind))),
        pods=tuple(sorted(got["pods"], key=lambda p: (p.namespace, p.name))), completions=records,
        completions_unknown=unknown, unreadable_records=unreadable, services_read=True)


COMPLETIONS_PATH = f"/api/v1/namespaces/{completions.NAMESPACE}/configmaps/{completions.CONFIGMAP}"
_COMPLETIONS = _Read("completions", lambda raw: raw, COMPLETIONS_PATH)


def _read_completions(api: k8s.ApiClient, target: Target, server: str, timeout_s: tuple[float, float],
                      configmap: str = completions.CONFIGMAP) -> completions.RecordsRead:
    """The cluster's completion records (observe/completions.py; `configmap`: the Slurm clusters' ones, with the
    `live` object for their own prefixes). None yet (404) is no problem; a failed read or a body that is no
    ConfigMap makes them unknown (never "none"); a bad key costs only that key."""
    path = COMPLETIONS_PATH.replace(completions.CONFIGMAP, configmap)
    where = f"cluster `{target.name}` (context `{target.context}`, {server}{path})"
    try:
        body = _call(api, "GET", path, None, None, _COMPLETIONS, where, timeout_s)
    except _ReadFailed as e:
        if e.problem.kind == "not-found":
            return completions.RecordsRead()
        why = f"{e.problem.message}: the completion records are unknown this cycle (no job that may have " \
              "finished is started, no record written)"
        return completions.RecordsRead(problems=(e.problem.model_copy(update={"message": why}),),
                                       unknown=e.problem.message)
    return completions.read_body(body, where, configmap=configmap)


def _unreachable(target: Target, context: str | None, server: str | None,
                 problem: ObserveProblem) -> ClusterObservation:
    return ClusterObservation(name=target.name, context=context or target.context, server=server,
                              status="unreachable", problems=(problem,))


def _list_all(api: k8s.ApiClient, read: _Read, target: Target, server: str, timeout_s: tuple[float, float],
              page_size: int) -> tuple[tuple[Any, ...], list[ObserveProblem]]:
    """Every item of one resource, page by page; objects that do not parse are skipped and reported."""
    items: list[Any] = []
    bad: list[BadObject | str] = []
    cont: str | None = None
    where = f"cluster `{target.name}` (context `{target.context}`, {server}{read.path})"
    while True:
        body = _fetch(api, read, cont, where, timeout_s, page_size)
        assert read.resource != "completions"
        raw_items, cont = decode_page(read.resource, body) or _decode_in_full(read, body, where)
        for raw in raw_items:
            try:
                parsed = read.parse(raw)
                if parsed is not None:          # None: not Fleet's (a service workload without its label)
                    items.append(parsed)
            except BadObject as e:
                bad.append(e)
            except ValidationError as e:
                bad.append(f"{_name_of(raw)}: {_one_line(e)}")
        if not cont:
            break
    problems = [_bad_object(read, where, b) for b in bad[:MAX_OBJECT_PROBLEMS]]
    if len(bad) > MAX_OBJECT_PROBLEMS:
        problems.append(ObserveProblem(resource=read.resource, kind="invalid-object",
                                       message=f"{where}: {len(bad) - MAX_OBJECT_PROBLEMS} more objects skipped",
                                       hint="see the objects above"))
    return tuple(items), problems


def _decode_in_full(read: _Read, body: bytes, where: str) -> tuple[list[Any], Any]:
    """A page `decode_page` could not take: decoded in full, so each bad object is named by `parse`, or
    `_ReadFailed` when the answer is not a Kubernetes list at all."""
    try:
        doc = json.loads(body)
        raw_items, meta = doc["items"], doc.get("metadata") or {}
        if not isinstance(raw_items, list) or not isinstance(meta, dict):
            raise TypeError("items is not a list")
    except (ValueError, TypeError, KeyError) as e:
        raise _ReadFailed(ObserveProblem(
            resource=read.resource, kind="malformed",
            message=f"{where}: the answer is not a Kubernetes list ({_one_line(e)}; "
                    f"{len(body)} bytes starting {body[:40]!r})",
            hint="the server is not a Kubernetes API server, or a proxy in between answers: check the "
                 "context's server URL"), fatal=False) from None
    return raw_items, meta.get("continue") or None


def _bad_object(read: _Read, where: str, bad: BadObject | str) -> ObserveProblem:
    what = f"{bad.where}: field `{bad.field}`: {bad.detail}" if isinstance(bad, BadObject) else bad
    return ObserveProblem(resource=read.resource, kind="invalid-object",
                          message=f"{where}: skipped {read.resource[:-1]} {what}",
                          hint=f"`kubectl get {read.resource[:-1]} -o yaml` shows it; a controller or CRD version "
                               "other than the expected one wrote it (Kueue v1beta2, JobSet v1alpha2)")


def _name_of(raw: Any) -> str:
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict):
        return "?"
    return "/".join(str(meta[k]) for k in ("namespace", "name") if meta.get(k))


def _fetch(api: k8s.ApiClient, read: _Read, cont: str | None, where: str, timeout_s: tuple[float, float],
           page_size: int) -> bytes:
    """One page's body, or `_ReadFailed` with a message and a hint per failure class."""
    query: list[tuple[str, Any]] = [*([("labelSelector", read.selector)] if read.selector else []),
                                    ("limit", page_size), *([("continue", cont)] if cont else [])]
    return _call(api, "GET", read.path, query, None, read, where, timeout_s)


def _call(api: k8s.ApiClient, method: str, path: str, query: list[tuple[str, Any]] | None, body: bytes | None,
          read: _Read, where: str, timeout_s: tuple[float, float], content_type: str | None = None) -> bytes:
    """One request's answer body (200), or `_ReadFailed` with a message and a hint per failure class."""
    headers = {"Accept": "application/json", **({"Content-Type": content_type} if content_type else {})}
    try:
        request = api.param_serialize(method, path, query_params=query or [], header_params=headers, body=body,
                                      auth_settings=["BearerToken"])
        resp = api.call_api(*request, _request_timeout=timeout_s)
        data: bytes = resp.read()  # type: ignore[no-untyped-call]
        if resp.status != 200:
            raise _http_failure(resp.status, resp.reason or "", data, read, where)
        return data
    except k8s.ApiException as e:
        raise _http_failure(e.status or 0, e.reason or "", e.body, read, where) from None
    except urllib3.exceptions.NewConnectionError as e:     # before TimeoutError: urllib3 2 subclasses it
        return _raise(read, "refused", f"{where}: cannot connect: {_one_line(e)}",
                      "check the context's server URL and that the API server is up and reachable (VPN, "
                      "firewall, authorized networks)", True)
    except (urllib3.exceptions.TimeoutError, TimeoutError):
        return _raise(read, "timeout", f"{where}: no answer within {timeout_s[0]:g} s (connect) / "
                      f"{timeout_s[1]:g} s (read)", "check that the API server is up and reachable from here "
                      "(VPN, firewall, private endpoint); `kubectl --context ... get nodes` tells", True)
    except urllib3.exceptions.HTTPError as e:
        if isinstance(e, urllib3.exceptions.MaxRetryError) and isinstance(e.reason, urllib3.exceptions.TimeoutError):
            return _raise(read, "timeout", f"{where}: no answer within {timeout_s[0]:g} s (connect)",
                          "check that the API server is up and reachable from here", True)
        return _raise(read, "refused", f"{where}: cannot connect: {_one_line(e)}",
                      "check the context's server URL and that the API server is up and reachable (VPN, "
                      "firewall, authorized networks)", True)


def _raise(read: _Read, kind: ProblemKind, message: str, hint: str, fatal: bool) -> bytes:
    raise _ReadFailed(ObserveProblem(resource=read.resource, kind=kind, message=message, hint=hint), fatal)


def _http_failure(status: int, reason: str, body: Any, read: _Read, where: str) -> _ReadFailed:
    detail = _status_message(body) or reason
    if status == 401:
        kind: ProblemKind = "unauthorized"
        hint, fatal = "the context's credentials are missing or expired: log in again (e.g. `gcloud container " \
                      "clusters get-credentials`, `aws eks update-kubeconfig`)", True
    elif status == 403:
        kind, fatal = "forbidden", False
        hint = (f"grant Fleet's identity `list` on {read.resource} (a ClusterRole bound to it; "
                "deploy/ has the RBAC Fleet needs)")
    elif status == 404:
        kind, fatal = "not-found", False
        hint = ("install the CRD: Kueue (v1beta2 API) or JobSet (v1alpha2 API) is missing or too old on this cluster"
                if read.resource in ("workloads", "jobsets")
                else "the context's server URL does not point at a Kubernetes API")
    elif status >= 500:
        kind, fatal = "server-error", False
        hint = "the API server failed; retry later, and check the control plane's health"
    elif status == 0:
        kind, fatal = "refused", True
        hint = "check the context's server URL, its TLS settings and that the API server is reachable"
    else:
        kind, fatal = "http-error", False
        hint = "an unexpected answer from the API server; rerun with FLEET_DEBUG=1 and check the server's logs"
    return _ReadFailed(ObserveProblem(resource=read.resource, kind=kind,
                                      message=f"{where}: HTTP {status} {detail}".rstrip(), hint=hint), fatal)


def _status_message(body: Any) -> str:
    """The `message` of a Kubernetes Status body, if it is one."""
    try:
        doc = json.loads(body) if body else None
    except (ValueError, TypeError):
        return ""
    return _one_line(doc.get("message", "")) if isinstance(doc, dict) else ""


def _one_line(e: object) -> str:
    return " ".join(str(e).split())[:300]


def targets(clusters: Sequence[Cluster],
            locate: Callable[[str, tuple[str | int, ...]], tuple[int, int]]) -> list[Target]:
    """A `Target` per cluster document, with the file:line of its `kubernetes.context` (or `kubernetes`)."""
    out = []
    for c in clusters:      # a Slurm cluster (no `kubernetes:`) is read through slurmrestd: slurm/observe.py
        if c.kubernetes is not None:
            path = f"fleet/clusters/{c.name}.yaml"
            line, _ = locate(path, ("kubernetes", "context") if c.kubernetes.context else ("kubernetes",))
            out.append(Target(c.name, c.kubernetes.context, f"{path}:{line}"))
    return out
