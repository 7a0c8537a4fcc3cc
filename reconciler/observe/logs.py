"""`fleet logs TEAM/JOB`: a job's pod logs through each cluster's Kubernetes API.  EFFECT (network).

How, and why:
- The same client and the same context rule as `fleet observe` (kube.py: `client_configuration`, the context the
  cluster's YAML names, never the current one; its request helper and failure classes, so a refused connection,
  a 401 or a 403 reads the same as there).
- A job's pods are the ones with Fleet's labels `fleet.dev/team` and `fleet.dev/job` (render puts them on every
  pod template: JobSets, Deployments, LeaderWorkerSets), listed in the team's namespace on every cluster with
  a context: a job may run on several (a service's replicas, a move in progress).
- The leader comes first: LeaderWorkerSet worker 0, then a JobSet's `leader`/`head`/`driver`/`launcher` replicated
  job, then the lowest job index and completion index (rank 0 of a JobSet of indexed Jobs); then by name. Without
  `--all` only that pod is shown; with it, every pod, each line prefixed `[cluster/pod]`.
- `--follow` streams (the API's `follow=true`; no read timeout, the stream ends when the container exits or on
  Ctrl-C); several pods are followed together, a thread each, lines written whole under one lock.
- The job running nowhere (no pod on any cluster that answered) is a message, exit 1; a cluster that could not
  be read is named with its error and hint, and when no cluster could be read the command exits 2.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s

from ..load import Loaded
from ..problems import RejectedError, UsageError
from .kube import (
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    ContextError,
    Target,
    _call,
    _http_failure,
    _ReadFailed,
    client_configuration,
    targets,
)
from .model import ObserveProblem
from .parse import JOB_LABEL, TEAM_LABEL, parse_pod
from .reads import _Read

LEADER_ROLES = ("leader", "head", "driver", "launcher")
LWS_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
JOBSET_ROLE = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_INDEX = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True, order=True)
class JobPod:
    """One pod of the job; ordered leader first (module docstring)."""

    rank: tuple[int, int, int, int]
    cluster: str
    name: str
    namespace: str
    container: str | None       # the first container, named when the pod has several
    target: Target

    @property
    def label(self) -> str:
        return f"{self.cluster}/{self.name}"


def rank(labels: dict[str, str]) -> tuple[int, int, int, int]:
    """The leader-first sort key of a pod from its labels (unknown indexes sort last)."""
    def num(key: str) -> int:
        value = labels.get(key, "")
        return int(value) if value.isdigit() else 1 << 30
    role = 0 if labels.get(JOBSET_ROLE, "") in LEADER_ROLES else 1
    return num(LWS_INDEX), role, num(JOBSET_INDEX), num(COMPLETION_INDEX)


@dataclass
class Found:
    pods: list[JobPod]
    problems: list[str]           # one line per cluster that could not be read
    read: int                     # clusters that answered
    slurm: tuple[str, ...] = ()   # Slurm clusters: no pods there, their jobs' output is Slurm's


def find_pods(loaded: Loaded, team: str, name: str, kubeconfig: str | None) -> Found:
    """Every pod of TEAM/NAME on every cluster with a context, leader first; the clusters that failed."""
    teams = {t.name: t for t in loaded.teams.teams} if loaded.teams else {}
    namespace = teams[team].queue_namespace if team in teams else team
    selector = f"{TEAM_LABEL}={team},{JOB_LABEL}={name}"
    path = f"/api/v1/namespaces/{namespace}/pods"
    found = Found([], [], 0, tuple(c.name for c in loaded.clusters if c.provider == "slurm"))
    for target in targets(loaded.clusters, loaded.locate):
        if not target.context:
            continue
        try:
            api = k8s.ApiClient(client_configuration(target, kubeconfig))
            where = f"cluster `{target.name}` (context {target.context}) GET {path}"
            body = _call(api, "GET", path, [("labelSelector", selector)], None, _Read("pods", parse_pod, path),
                         where, (CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
            items = json.loads(body).get("items") or []
        except ContextError as e:
            found.problems.append(f"{e.problem.message} (hint: {e.problem.hint})")
            continue
        except _ReadFailed as e:
            found.problems.append(f"{e.problem.message} (hint: {e.problem.hint})")
            continue
        except (ValueError, AttributeError):
            found.problems.append(f"cluster `{target.name}`: the pod list is not JSON")
            continue
        found.read += 1
        for item in items:
            meta = item.get("metadata") or {}
            labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
            if labels.get(TEAM_LABEL) != team or labels.get(JOB_LABEL) != name:
                continue      # the selector asked for them: checked again, as parse does
            containers = [c.get("name") for c in (item.get("spec") or {}).get("containers") or [] if c.get("name")]
            found.pods.append(JobPod(rank(labels), target.name, str(meta.get("name", "")), namespace,
                                     containers[0] if len(containers) > 1 else None, target))
    found.pods.sort()
    return found


def chosen(job_id: str, found: Found, every: bool) -> list[JobPod]:
    """The pods to show: the leader, or every pod; a clear failure when there is none."""
    if not found.pods:
        failed = "".join(f"\n  {p}" for p in found.problems)
        if found.read == 0 and found.problems:
            raise UsageError(f"no cluster could be read, so the logs of {job_id} are unknown:{failed}",
                             "fix the kubeconfig contexts or the clusters' access (`fleet observe` shows each)")
        if found.slurm:
            raise RejectedError(f"{job_id} has no pod on any Kubernetes cluster that answered; `fleet logs` does not "
                                f"read Slurm clusters ({', '.join(found.slurm)}), where it may run"
                                + (f"; not read:{failed}" if failed else ""),
                                f"`fleet status {job_id}` says where it runs; on Slurm its output is the job's "
                                "StdOut file (`scontrol show job`)")
        raise RejectedError(f"{job_id} runs nowhere: no pod of it on any cluster that answered"
                            + (f"; not read:{failed}" if failed else ""),
                            f"`fleet status {job_id}` says where the plan puts it and why it waits")
    return found.pods if every else found.pods[:1]


def stream(pods: Sequence[JobPod], kubeconfig: str | None, *, tail: int | None, follow: bool, prefix: bool,
           write: Callable[[str], None]) -> list[str]:
    """Write each pod's log lines (leader first; several followed pods together); the failures, one line each."""
    lock = threading.Lock()
    failures: list[str] = []

    def one(pod: JobPod) -> None:
        lead = f"[{pod.label}] " if prefix else ""
        try:
            for line in _lines(pod, kubeconfig, tail, follow):
                with lock:
                    write(lead + line)
        except (_ReadFailed, ContextError) as e:
            with lock:
                failures.append(f"{pod.label}: {e.problem.message} (hint: {e.problem.hint})")
        except (urllib3.exceptions.HTTPError, OSError) as e:    # the stream broke (API server restart, reset)
            with lock:
                failures.append(f"{pod.label}: the log stream broke off: {e} (hint: run `fleet logs` again; "
                                "`--tail N` resumes near the end)")

    if follow and len(pods) > 1:
        threads = [threading.Thread(target=one, args=(p,), daemon=True) for p in pods]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for p in pods:
            one(p)
    return failures


def _lines(pod: JobPod, kubeconfig: str | None, tail: int | None, follow: bool) -> Any:
    """The pod's log, line by line (a generator; following, as the API sends them)."""
    api = k8s.ApiClient(client_configuration(pod.target, kubeconfig))
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/log"
    query: list[tuple[str, Any]] = [*([("container", pod.container)] if pod.container else []),
                                    *([("tailLines", tail)] if tail is not None else []),
                                    *([("follow", "true")] if follow else [])]
    read = _Read("pods", parse_pod, path)
    where = f"cluster `{pod.cluster}` (context {pod.target.context}) GET {path}"
    if not follow:
        body = _call(api, "GET", path, query, None, read, where, (CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
        yield from body.decode("utf-8", "replace").splitlines()
        return
    request = api.param_serialize("GET", path, query_params=query, header_params={"Accept": "*/*"},
                                  auth_settings=["BearerToken"])
    try:
        resp = api.call_api(*request, _request_timeout=(CONNECT_TIMEOUT_S, None))
    except urllib3.exceptions.HTTPError as e:
        raise _ReadFailed(ObserveProblem(resource="pods", kind="refused", message=f"{where}: cannot connect: {e}",
                                         hint="check the context's server URL and that the API server is up"),
                          True) from None
    if resp.status != 200:
        raise _http_failure(resp.status, resp.reason or "", resp.read(), read, where)  # type: ignore[no-untyped-call]
    rest = b""
    for chunk in resp.response.stream(4096, decode_content=True):
        rest += chunk
        *done, rest = rest.split(b"\n")
        for line in done:
            yield line.decode("utf-8", "replace")
    if rest:
        yield rest.decode("utf-8", "replace")
