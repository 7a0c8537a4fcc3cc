"""Writes to a cluster's API for the reconciler: one request, one answer, never an exception for the world.

EFFECT (network: a cluster's Kubernetes API; reads the kubeconfig).

The official `kubernetes` client does the kubeconfig (the context the cluster's YAML names, never the current
one), auth and TLS, exactly as `observe/kube.py` reads; the requests go through its `ApiClient`
(`param_serialize` + `call_api`), with a connect and read timeout and no retries (the next cycle is the retry).
A client given a `fence` (the loop's `LeaseGuard.fence`) asks it before every request, its own or one another
module sends over its `api` (apply/jobs.py): the fence renews the Lease when due and says how long the request
may take (its timeouts are cut to that, so no request outlives the Lease), or raises `Fenced` (no Lease: the
request is not sent, and fails as a request with no answer does).
Every failure (refused, timeout, 4xx, 5xx) comes back as a `Reply` with `ok=False`, a message naming the
cluster, method and path, and a hint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s

from ..observe.deadline import timeouts_within
from ..observe.kube import ContextError, Target, client_configuration  # the one builder of API clients

TIMEOUT_S = (5.0, 30.0)
Fence = Callable[[], float]        # seconds the next request may take; raises `Fenced` when it must not be sent


class Fenced(urllib3.exceptions.HTTPError):
    """A request refused before it was sent: this reconciler no longer holds the Lease (or too little of it is
    left for one request)."""


class _FencedApi(k8s.ApiClient):
    """The client's `ApiClient`, asking the fence before each request and cutting its timeouts to the answer."""

    def __init__(self, cfg: k8s.Configuration, fence: Fence) -> None:
        super().__init__(cfg)
        self.fence = fence

    def call_api(self, method: Any, url: Any, header_params: Any = None, body: Any = None, post_params: Any = None,
                 _request_timeout: Any = None) -> Any:
        left = self.fence()
        given = _request_timeout if isinstance(_request_timeout, tuple) else TIMEOUT_S
        return super().call_api(method, url, header_params, body, post_params,
                                _request_timeout=timeouts_within(left, (float(given[0]), float(given[1]))))


@dataclass(frozen=True)
class Reply:
    ok: bool
    status: int                 # HTTP status; 0 when no answer came
    body: Any = None            # decoded JSON (a dict), when there was one
    message: str = ""
    hint: str = ""


class Client:
    """One cluster's API through one kubeconfig context."""

    def __init__(self, cluster: str, context: str | None, kubeconfig: str | None,
                 timeout_s: tuple[float, float] = TIMEOUT_S, fence: Fence | None = None) -> None:
        self.cluster, self.context, self.timeout_s = cluster, context, timeout_s
        self.problem = ""
        self.server = ""
        self.api: k8s.ApiClient | None = None
        try:
            cfg = client_configuration(Target(cluster, context, f"fleet/clusters/{cluster}.yaml"), kubeconfig)
        except ContextError as e:
            self.problem = e.problem.message + ("; Fleet never writes through the current context" if not context
                                                else "")
            return
        self.server = cfg.host
        self.api = _FencedApi(cfg, fence) if fence is not None else k8s.ApiClient(cfg)

    def request(self, method: str, path: str, body: Any = None, query: tuple[tuple[str, Any], ...] = (),
                content_type: str = "application/json") -> Reply:
        where = f"cluster `{self.cluster}` (context `{self.context}`): {method} {path}"
        if self.api is None:
            return Reply(False, 0, None, self.problem, "add the context to the kubeconfig (KUBECONFIG)")
        headers = {"Accept": "application/json", "Content-Type": content_type}
        # JSON bodies as objects (the client encodes them); text (an apply patch) is sent as it is
        data = json.dumps(body) if body is not None and not isinstance(body, str) and \
            content_type != "application/json" else body
        try:
            req = self.api.param_serialize(method, path, query_params=list(query), header_params=headers,
                                           body=None, auth_settings=["BearerToken"])
            method_, url, hdrs, _, _ = req
            resp = self.api.call_api(method_, url, hdrs, data, None, _request_timeout=self.timeout_s)
            raw: bytes = resp.read()  # type: ignore[no-untyped-call]
            status = int(resp.status)
        except k8s.ApiException as e:
            raw, status = (e.body or b"") if isinstance(e.body, bytes) else str(e.body or "").encode(), e.status or 0
        except Fenced as e:
            return Reply(False, 0, None, f"{where}: not sent: {e}", "the next cycle elects again")
        except (urllib3.exceptions.HTTPError, OSError) as e:
            return Reply(False, 0, None, f"{where}: no answer: {_one_line(e)}",
                         "check that the API server is up and reachable from here; the next cycle tries again")
        decoded = _decode(raw)
        if 200 <= status < 300:
            return Reply(True, status, decoded)
        detail = decoded.get("message", "") if isinstance(decoded, dict) else raw[:200].decode(errors="replace")
        return Reply(False, status, decoded, f"{where}: HTTP {status}: {detail}", _hint(status))

    def close(self) -> None:
        if self.api is not None:
            self.api.close()  # type: ignore[no-untyped-call]


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _hint(status: int) -> str:
    if status == 401:
        return "the context's credentials are missing or expired: log in again"
    if status == 403:
        return "grant the reconciler's identity this verb on this resource (deploy/ has the Role it needs)"
    if status == 404:
        return "the object or its CRD (Kueue, JobSet, LeaderWorkerSet) is not on this cluster"
    if status == 409:
        return "someone else changed it first; the next cycle observes again and decides afresh"
    if status >= 500:
        return "the API server failed; the next cycle tries again (`kubectl get --raw /readyz` tells)"
    return ""


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300]
