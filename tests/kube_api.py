"""A real Kubernetes API server for tests and benchmarks: HTTP on 127.0.0.1, one server per cluster.

It speaks the Kubernetes REST protocol for the objects Fleet reads and writes, so the official client (and
anything later built on it: plan from what runs, server-side apply of JobSets) is tested over real sockets:
- Nodes (`/api/v1/nodes`), Kueue Workloads (`/apis/kueue.x-k8s.io/v1beta2/...workloads`) and JobSets
  (`/apis/jobset.x-k8s.io/v1alpha2/...jobsets`), cluster-wide or per namespace;
- list with `limit`/`continue` pagination (opaque continue tokens; an unknown token is 410 Gone, as the API
  server answers an expired one), items sorted by namespace then name;
- list with a `labelSelector` of `key=value` and `key` terms (comma-separated), on objects stored with `add`
  or applied;
- get, delete (404 Status when absent; DeleteOptions `preconditions` on uid and resourceVersion: 409 Conflict
  when the stored object has another);
- server-side apply: PATCH with `Content-Type: application/apply-patch+yaml` (JSON is YAML), `fieldManager`
  required, field ownership per leaf path (shared when managers apply equal values), 409 Conflict naming the
  other manager's fields unless `force=true`, and the manager's fields it no longer applies are removed; a
  `metadata.resourceVersion` in the patch is a precondition (409 Conflict when the object has another), and
  every apply sets a new one;
  `managedFields` lists each manager's fields in the API server's `fieldsV1` form (`f:<field>`, and
  `k:{...}` for the items of a list its schema merges by keys: `replicatedJobs`, `containers` and `env` by name,
  a container's `ports` by `containerPort` and `protocol`, `volumeMounts` by `mountPath`, read from the real
  schemas by kube_keys.py; other lists are atomic); Services, Deployments and
  LeaderWorkerSets are served like JobSets (the objects `fleet render` writes beside them);
- bearer-token auth (401 without the token), and fault injection per resource or for everything: `refuse`
  (the port is bound but not listening: connection refused), `hang` (never answers until stopped), `slow`
  (answers as usual, each answer `slow_s` seconds late), 401, 403, 404 (e.g. a CRD that is not installed),
  422 (an object refused), 500, `garbage` (200 with a body that is not JSON); a fault keyed
  `plural/namespace/name` hits only the requests that name that one object (e.g. the apply that creates one
  JobSet).
- Leases (`coordination.k8s.io/v1`) and Events (`events.k8s.io/v1`): create (POST; 409 AlreadyExists) and
  update (PUT; 409 Conflict unless `metadata.resourceVersion` is the stored one: optimistic concurrency, as
  leader election relies on); every create and update sets a new `resourceVersion`;
- JobSet applies that carry `spec.suspend` to a JobSet an admitted Workload owns are recorded in
  `suspend_violations` (Kueue owns that field once it admits: DESIGN 4b), for tests to assert none happen;
- an update (apply or PUT) of a stored object is judged as a real cluster judges it (kube_admission.py): the CRD's
  `self == oldSelf` rules (422 Invalid), then the JobSet webhook, for which `spec.replicatedJobs` never changes
  but for the pod template fields Kueue writes (annotations, labels, node selector, tolerations, scheduling
  gates) while the stored or the new JobSet is suspended (403 Forbidden, `admission webhook "vjobset.kb.io"
  denied the request: spec.replicatedJobs: ...: field is immutable`); nothing is stored then;
- delete removes the objects whose `ownerReferences` name the deleted one's uid, as the garbage collector does
  (a JobSet's Workload goes with it). With `graceful` set, deletion takes time as in a real cluster, until the
  test calls `finish_deletions()` (the pods' grace period): a background delete removes the object at once but
  its dependents (standing for its Jobs and pods) stay, terminating; a foreground delete
  (`propagationPolicy: Foreground`) keeps the object, with `deletionTimestamp` and the `foregroundDeletion`
  finalizer, until its dependents are gone.
- pod logs (`GET /api/v1/namespaces/NS/pods/NAME/log`, core/v1 `read_namespaced_pod_log`): the lines stored
  with `log(namespace, pod, *lines)` as text/plain, `tailLines` (the last N), `container` (one named container
  of the pod; a pod of several needs it, 400 otherwise, as the API server answers), 404 for a pod that is not
  stored; with `follow=true` the answer is chunked and stays open, sending lines as `log` adds them, until
  `end_log` (the container exited) or the server stops;
Every request is logged in `requests` (method, path, query, content type, body) so tests can assert what a
client sent, e.g. that an apply never carries `spec.suspend`.

Use `KubeCluster` as a context manager, and `write_kubeconfig` to point a kubeconfig context at each one.
"""

from __future__ import annotations

import base64
import copy
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kube_admission
import kube_keys
import yaml

RESOURCES = {  # plural -> (api prefix, kind, namespaced)
    "nodes": ("/api/v1", "Node", False),
    "workloads": ("/apis/kueue.x-k8s.io/v1beta2", "Workload", True),
    "jobsets": ("/apis/jobset.x-k8s.io/v1alpha2", "JobSet", True),
    "leases": ("/apis/coordination.k8s.io/v1", "Lease", True),
    "events": ("/apis/events.k8s.io/v1", "Event", True),
    "services": ("/api/v1", "Service", True),
    "deployments": ("/apis/apps/v1", "Deployment", True),
    "leaderworkersets": ("/apis/leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", True),
    "pods": ("/api/v1", "Pod", True),
    "configmaps": ("/api/v1", "ConfigMap", True),     # fleet-system/fleet-completions (observe/completions.py)
    "rayjobs": ("/apis/ray.io/v1", "RayJob", True),   # KubeRay (issue 26, observe/ray.py)
    "rayservices": ("/apis/ray.io/v1", "RayService", True),
    "rayclusters": ("/apis/ray.io/v1", "RayCluster", True),
}
TOKEN = "fleet-test-token"
Key = tuple[str, str]          # (namespace, name)
Path_ = tuple[str, ...]        # a field path as fieldsV1 spells it: ("f:spec", "f:replicatedJobs", 'k:{"name":"w"}')


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any


@dataclass
class KubeCluster:
    """One cluster's API server. `objects[plural][(namespace, name)]` is its state; `faults[plural or "*"]`
    its injected failure."""

    name: str
    token: str | None = TOKEN
    objects: dict[str, dict[Key, dict[str, Any]]] = field(default_factory=lambda: {r: {} for r in RESOURCES})
    faults: dict[str, str | int] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    suspend_violations: list[str] = field(default_factory=list)   # applies of spec.suspend to an admitted JobSet
    owners: dict[str, dict[Key, dict[Path_, list[str]]]] = field(default_factory=lambda: {r: {} for r in RESOURCES})
    _encoded: dict[str, dict[Key, bytes]] = field(default_factory=lambda: {r: {} for r in RESOURCES})
    _server: ThreadingHTTPServer | None = None
    _closed_socket: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _version: int = 1
    graceful: bool = False
    slow_s: float = 0.3                  # how late each answer is under the `slow` fault
    terminating: list[tuple[str, Key]] = field(default_factory=list)   # (plural, key) to go at finish_deletions
    logs: dict[Key, list[str]] = field(default_factory=dict)           # a pod's log lines (`log`)
    ended: set[Key] = field(default_factory=set)                       # pods whose log ends (`end_log`)

    # --- state ---------------------------------------------------------------------------------------------
    def add(self, *objs: dict[str, Any]) -> KubeCluster:
        """Store objects as they are (tests add malformed ones on purpose); the plural comes from `kind`."""
        for obj in objs:
            plural = next(p for p, (_, kind, _) in RESOURCES.items() if kind == obj.get("kind"))
            self._put(plural, obj)
        return self

    def log(self, namespace: str, pod: str, *lines: str) -> KubeCluster:
        """Append lines to a pod's log (a follower gets them as they come)."""
        with self._lock:
            self.logs.setdefault((namespace, pod), []).extend(lines)
        return self

    def end_log(self, namespace: str, pod: str) -> None:
        """The pod's container exited: a follower's answer ends after the lines it has."""
        with self._lock:
            self.ended.add((namespace, pod))

    def _put(self, plural: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        with self._lock:
            self._version += 1
            self.objects[plural][key] = obj
            self._encoded[plural][key] = json.dumps(obj, separators=(",", ":")).encode()

    def admitted(self, jobset: dict[str, Any]) -> bool:
        """Whether a Workload owned by `jobset` has Admitted=True (Kueue then owns its spec.suspend)."""
        uid = (jobset.get("metadata") or {}).get("uid")
        with self._lock:
            owned = [w for w in self.objects["workloads"].values()
                     if uid and any(r.get("uid") == uid for r in (w.get("metadata") or {}).get("ownerReferences", []))]
        return any(c.get("type") == "Admitted" and c.get("status") == "True"
                   for w in owned for c in (w.get("status") or {}).get("conditions", []))

    def collect_owned(self, owner: dict[str, Any]) -> None:
        """Delete what `owner` owns (ownerReferences by uid), as the garbage collector does after a delete."""
        uid = (owner.get("metadata") or {}).get("uid")
        if not uid:
            return
        with self._lock:
            for plural, objs in self.objects.items():
                for key in [k for k, o in objs.items()
                            if any(r.get("uid") == uid for r in (o.get("metadata") or {}).get("ownerReferences", []))]:
                    objs.pop(key)
                    self._encoded[plural].pop(key, None)
                    self.owners[plural].pop(key, None)

    def dependents(self, owner: dict[str, Any]) -> list[tuple[str, Key]]:
        uid = (owner.get("metadata") or {}).get("uid")
        with self._lock:
            return [(plural, k) for plural, objs in self.objects.items() for k, o in objs.items()
                    if uid and any(r.get("uid") == uid for r in (o.get("metadata") or {}).get("ownerReferences", []))]

    def finish_deletions(self) -> None:
        """The grace periods are over: terminating dependents go, and then their foreground-deleted owners."""
        with self._lock:
            for plural, key in self.terminating:
                obj = self.objects[plural].pop(key, None)
                self._encoded[plural].pop(key, None)
                self.owners[plural].pop(key, None)
                if obj is not None:
                    self._version += 1
            self.terminating.clear()

    def add_listed(self, plural: str, items: list[tuple[Key, bytes]]) -> None:
        """Objects already encoded as JSON, served by list only (no get/apply/delete): benchmarks hold hundreds
        of thousands of them, and one `json.dumps` per object would dominate their setup."""
        with self._lock:
            self._version += 1
            self._encoded[plural].update(items)

    # --- lifecycle -----------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("start the server first")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> KubeCluster:
        cluster = self
        for plural in RESOURCES:        # the schemas are read once per process, before the first request
            kube_keys.root(plural)

        class Handler(_Handler):
            api = cluster

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = _quiet_if_gone  # type: ignore[method-assign]
        self._server.request_queue_size = 128
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def refuse(self) -> None:
        """From now on the port refuses connections: it stays bound (so nothing else takes it) but listens no more."""
        assert self._server is not None
        port = self._server.server_address[1]
        self._server.shutdown()
        self._server.server_close()
        self._closed_socket = socket.socket()
        self._closed_socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._closed_socket.bind(("127.0.0.1", port))

    def stop(self) -> None:
        self._stop.set()
        if self._closed_socket is not None:
            self._closed_socket.close()
        elif self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> KubeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- list pages ----------------------------------------------------------------------------------------
    def page(self, plural: str, namespace: str | None, limit: int, token: str | None,
             selector: str = "") -> bytes | None:
        """A List body; None for an unknown continue token."""
        terms = [t.partition("=") for t in selector.split(",") if t]

        def chosen(k: Key) -> bool:
            labels = (self.objects[plural].get(k, {}).get("metadata") or {}).get("labels") or {}
            return all(labels.get(name) == value if eq else name in labels for name, eq, value in terms)

        with self._lock:
            keys = sorted(k for k in self._encoded[plural] if (namespace is None or k[0] == namespace)
                          and (not terms or chosen(k)))
            start = 0
            if token:
                try:
                    start = int(base64.urlsafe_b64decode(token.encode()).decode())
                except ValueError:
                    return None
            chunk = keys[start:start + limit] if limit > 0 else keys[start:]
            end = start + len(chunk)
            items = b",".join(self._encoded[plural][k] for k in chunk)
            version = self._version
        prefix, kind, _ = RESOURCES[plural]
        cont = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(keys) else ""
        meta = {"resourceVersion": str(version), **({"continue": cont} if cont else {})}
        head = json.dumps({"apiVersion": prefix.split("/", 2)[-1], "kind": f"{kind}List", "metadata": meta})
        return head[:-1].encode() + b',"items":[' + items + b"]}"


def _quiet_if_gone(request: Any, client_address: Any) -> None:
    """A client that gave up (its timeout) before the answer: not an error of the server; others are printed."""
    import sys

    if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
        ThreadingHTTPServer.handle_error(None, request, client_address)  # type: ignore[arg-type]


class _Handler(BaseHTTPRequestHandler):
    api: KubeCluster
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True   # TCP_NODELAY, as Go's net/http (the API server) sets: a reply's headers and
                                     # body go out at once, not 40 ms apart (Nagle against the client's delayed ACK)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _status(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                "reason": reason, **({"details": details} if details else {}), "code": code}
        self._send(code, json.dumps(body).encode())

    def _admits(self, plural: str, key: Key, old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
        """Whether the cluster takes this update (kube_admission.py); the refusal is answered when it does not."""
        if not old:
            return True
        prefix, kind, _ = RESOURCES[plural]
        group = prefix.split("/")[2] if prefix.startswith("/apis/") else ""
        refused = kube_admission.refuse_update(plural, kind, group, key[1], old, new)
        if refused is None:
            return True
        self._status(*refused)
        return False

    def _route(self) -> tuple[str, str | None, str | None, dict[str, str]] | None:
        """(plural, namespace, name, query) of the request path, or None if it is no resource of ours."""
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        for plural, (prefix, _, namespaced) in RESOURCES.items():
            if not url.path.startswith(prefix + "/"):
                continue
            rest = url.path[len(prefix) + 1:].split("/")
            if rest[0] == plural and len(rest) <= 2:
                return plural, None, rest[1] if len(rest) == 2 else None, query
            if namespaced and len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] == plural:
                return plural, rest[1], rest[3] if len(rest) == 4 else None, query
        return None

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self, method: str) -> None:
        api = self.api
        raw = self._body()
        route = self._route()
        ctype = self.headers.get("Content-Type", "")
        body: Any = None
        if raw:
            try:
                body = yaml.safe_load(raw)
            except yaml.YAMLError:
                body = raw.decode(errors="replace")
        api.requests.append(Request(method, urlsplit(self.path).path, route[3] if route else {}, ctype, body))
        fault = api.faults.get(route[0] if route else "*", api.faults.get("*"))
        if route is not None and route[2] is not None:      # one object's fault: `plural/namespace/name`
            fault = api.faults.get(f"{route[0]}/{route[1] or ''}/{route[2]}", fault)
        if fault == "hang":
            api._stop.wait(60)
            return
        if fault == "slow":
            api._stop.wait(api.slow_s)
        if api.token and self.headers.get("Authorization") != f"Bearer {api.token}":
            return self._status(401, "Unauthorized", "Unauthorized")
        if fault == "garbage":
            return self._send(200, b'{"kind": "WorkloadList", "items": [{"metadata": ')
        if isinstance(fault, int):
            reasons = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 422: "Invalid", 500: "InternalError"}
            msg = {403: 'workloads.kueue.x-k8s.io is forbidden: User "fleet" cannot list resource',
                   404: "the server could not find the requested resource"}.get(fault, "internal error")
            return self._status(fault, reasons.get(fault, "Error"), msg)
        if route is None:
            return self._status(404, "NotFound", "the server could not find the requested resource")
        plural, namespace, name, query = route
        if method == "GET" and name is None:
            limit = int(query.get("limit", "0") or 0)
            page = api.page(plural, namespace, limit, query.get("continue"), query.get("labelSelector", ""))
            if page is None:
                return self._status(410, "Expired", "the provided continue parameter is too old or malformed")
            return self._send(200, page)
        key = (namespace or "", name or "")
        if method == "GET":
            obj = api.objects[plural].get(key)
            return self._send(200, json.dumps(obj).encode()) if obj else self._not_found(plural, name)
        if method == "DELETE" and (failed := self._precondition_failed(plural, key, body)):
            return self._status(409, "Conflict", failed)
        if method == "DELETE" and api.graceful:
            return self._delete_gracefully(plural, key, body)
        if method == "DELETE":
            with api._lock:
                obj = api.objects[plural].pop(key, None)
                api._encoded[plural].pop(key, None)
                api.owners[plural].pop(key, None)
            if obj is None:
                return self._not_found(plural, name)
            api.collect_owned(obj)
            return self._send(200, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success"}).encode())
        if method == "PATCH":
            return self._apply(plural, key, query, ctype, body)
        if method in ("POST", "PUT"):
            return self._write(method, plural, namespace, name, body)
        return self._status(405, "MethodNotAllowed", f"{method} is not supported")

    def _precondition_failed(self, plural: str, key: Key, body: Any) -> str:
        """DeleteOptions `preconditions` (uid, resourceVersion) the stored object does not meet: the API
        server's message; "" when met, or when there is no object (404 follows)."""
        pre = body.get("preconditions") if isinstance(body, dict) else None
        with self.api._lock:
            obj = self.api.objects[plural].get(key)
        if not isinstance(pre, dict) or obj is None:
            return ""
        meta = obj.get("metadata") or {}
        for field_, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if pre.get(field_) is not None and pre[field_] != meta.get(field_):
                return (f"Precondition failed: {label} in precondition: {pre[field_]}, {label} in object meta: "
                        f"{meta.get(field_)}")
        return ""

    def _delete_gracefully(self, plural: str, key: Key, body: Any) -> None:
        api = self.api
        with api._lock:
            obj = api.objects[plural].get(key)
        if obj is None:
            return self._not_found(plural, key[1])
        deps = api.dependents(obj)
        policy = body.get("propagationPolicy") if isinstance(body, dict) else None
        api.terminating += [d for d in deps if d not in api.terminating]
        if policy == "Foreground" and deps:
            meta = obj["metadata"]
            meta.setdefault("deletionTimestamp", "2026-11-23T00:00:00Z")
            meta["finalizers"] = sorted({*meta.get("finalizers", []), "foregroundDeletion"})
            api._put(plural, obj)
            if (plural, key) not in api.terminating:
                api.terminating.append((plural, key))
        else:
            with api._lock:
                api.objects[plural].pop(key, None)
                api._encoded[plural].pop(key, None)
                api.owners[plural].pop(key, None)
        return self._send(200, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success"}).encode())

    def _not_found(self, plural: str, name: str | None) -> None:
        self._status(404, "NotFound", f'{plural} "{name}" not found')

    def _apply(self, plural: str, key: Key, query: dict[str, str], ctype: str, body: Any) -> None:
        if ctype.split(";")[0].strip() != "application/apply-patch+yaml":
            return self._status(415, "UnsupportedMediaType", f"only server-side apply is served, not {ctype}")
        manager = query.get("fieldManager")
        if not manager:
            return self._status(400, "BadRequest", "fieldManager is required for apply patch")
        if not isinstance(body, dict):
            return self._status(400, "BadRequest", "the apply patch is not an object")
        api = self.api
        force = query.get("force") == "true"
        body = copy.deepcopy(body)
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        precondition = meta.pop("resourceVersion", None)       # a precondition, never an owned field
        applied = dict(_leaves(body, kube_keys.root(plural)))
        with api._lock:
            owners = {p: set(m) for p, m in api.owners[plural].get(key, {}).items()}
            stored = api.objects[plural].get(key)
            current = copy.deepcopy(stored or {})
        if precondition is not None and (current.get("metadata") or {}).get("resourceVersion") != precondition:
            if not current:
                return self._not_found(plural, key[1])
            return self._status(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{key[1]}": the object '
                                "has been modified; please apply your changes to the latest version and try again")
        have = dict(_leaves(current, kube_keys.root(plural)))
        if plural == "jobsets" and current and ("f:spec", "f:suspend") in applied and api.admitted(current):
            api.suspend_violations.append("/".join(key))
        conflicts = sorted(p for p, v in applied.items() if owners.get(p, set()) - {manager} and have.get(p) != v)
        if conflicts and not force:
            who = ", ".join(f'{_dotted(p)} (owned by "{",".join(sorted(owners[p] - {manager}))}")' for p in conflicts)
            return self._status(409, "Conflict", f"Apply failed with {len(conflicts)} conflict(s): {who}")
        for path in conflicts:                       # forced: the others lose what they owned there
            owners[path] = set()
        for path in [p for p, m in owners.items() if manager in m and p not in applied]:
            owners[path].discard(manager)
            if not owners[path]:
                _drop(current, path)
        if not current:                              # created by this apply: the server names it (uid)
            current = {"metadata": {"uid": f"uid-{plural}-{key[0]}-{key[1]}-{api._version + 1}"}}
        for path, value in applied.items():
            _set(current, path, value)
            owners.setdefault(path, set()).add(manager)
        if not self._admits(plural, key, stored, current):
            return None
        owners = {p: m for p, m in owners.items() if m}
        managers = sorted(set().union(*owners.values())) if owners else []
        with api._lock:
            current.setdefault("metadata", {})["resourceVersion"] = str(api._version + 1)
        current["metadata"]["managedFields"] = [     # as a real server lists them: without the object's identity
            {"manager": m, "operation": "Apply", "fieldsType": "FieldsV1",
             "fieldsV1": _fields_v1(sorted(p for p, o in owners.items() if m in o and p not in STRIPPED))}
            for m in managers]
        api._put(plural, current)
        with api._lock:
            api.owners[plural][key] = {p: sorted(m) for p, m in owners.items()}
        self._send(200, json.dumps(current).encode())

    def _write(self, method: str, plural: str, namespace: str | None, name: str | None, body: Any) -> None:
        """POST (create) to the collection, PUT (update) to the object, with resourceVersion checks."""
        api = self.api
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            return self._status(400, "BadRequest", "the body is not an object with metadata")
        meta = body["metadata"]
        name = name if method == "PUT" else meta.get("name")
        if not name or (method == "PUT" and meta.get("name") != name):
            return self._status(400, "BadRequest", "metadata.name is required and must match the path")
        key = (namespace or "", str(name))
        with api._lock:
            current = api.objects[plural].get(key)
        if method == "POST" and current is not None:
            return self._status(409, "AlreadyExists", f'{plural} "{name}" already exists')
        if method == "PUT":
            if current is None:
                return self._not_found(plural, name)
            if meta.get("resourceVersion") != current["metadata"].get("resourceVersion"):
                return self._status(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{name}": the '
                                    "object has been modified; please apply your changes to the latest version "
                                    "and try again")
        obj = copy.deepcopy(body)
        obj["metadata"]["namespace"] = namespace or ""
        if method == "PUT" and not self._admits(plural, key, current, obj):
            return None
        with api._lock:
            obj["metadata"]["resourceVersion"] = str(api._version + 1)
        api._put(plural, obj)
        self._send(201 if method == "POST" else 200, json.dumps(obj).encode())

    def do_GET(self) -> None:
        parts = urlsplit(self.path).path.split("/")
        if len(parts) == 8 and parts[1:4] == ["api", "v1", "namespaces"] and parts[5] == "pods" and parts[7] == "log":
            return self._log(parts[4], parts[6])
        self._handle("GET")

    def _log(self, namespace: str, pod: str) -> None:
        """A pod's log (module docstring), after the auth and fault checks every request has."""
        api = self.api
        query = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
        api.requests.append(Request("GET", urlsplit(self.path).path, query, "", None))
        fault = api.faults.get("log", api.faults.get("*"))
        if api.token and self.headers.get("Authorization") != f"Bearer {api.token}":
            return self._status(401, "Unauthorized", "Unauthorized")
        if isinstance(fault, int):
            return self._status(fault, "Forbidden" if fault == 403 else "Error", f"pods \"{pod}\" log: {fault}")
        obj = api.objects["pods"].get((namespace, pod))
        if obj is None:
            return self._not_found("pods", pod)
        containers = [c.get("name") for c in (obj.get("spec") or {}).get("containers") or []]
        if len(containers) > 1 and query.get("container") not in containers:
            return self._status(400, "BadRequest", f"a container name must be specified for pod {pod}, choose one "
                                f"of: [{' '.join(map(str, containers))}]")
        with api._lock:
            lines = list(api.logs.get((namespace, pod), []))
        tail = int(query["tailLines"]) if "tailLines" in query else None
        sent = len(lines)
        lines = lines[-tail:] if tail is not None else lines
        if query.get("follow") != "true":
            return self._send(200, "".join(f"{x}\n" for x in lines).encode(), "text/plain")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                if lines:
                    data = "".join(f"{x}\n" for x in lines).encode()
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                with api._lock:
                    lines = api.logs.get((namespace, pod), [])[sent:]
                    sent += len(lines)
                    done = (namespace, pod) in api.ended and not lines
                if done or api._stop.wait(0.02):
                    break
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


STRIPPED = frozenset({("f:apiVersion",), ("f:kind",), ("f:metadata", "f:name"), ("f:metadata", "f:namespace"),
                      ("f:metadata", "f:uid"), ("f:metadata", "f:resourceVersion"),
                      ("f:metadata", "f:creationTimestamp"), ("f:metadata", "f:generation")})
"""Fields an API server never lists in `managedFields` (its field manager strips them: stripmeta.go)."""


def _leaves(obj: Any, schema: kube_keys.Schema | None, prefix: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Leaf paths of a manifest (`("f:spec", "f:suspend")`); a list its schema marks as a list-map is merged by
    its keys (`k:{"mountPath":"/data"}`), every other list is atomic (kube_keys.py)."""
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            if prefix == ("f:metadata",) and k == "managedFields":
                continue
            yield from _leaves(v, kube_keys.child(schema, k, len(prefix)), (*prefix, f"f:{k}"))
    elif isinstance(obj, list) and obj and prefix and (keys := kube_keys.list_keys(schema)) \
            and all(isinstance(v, dict) for v in obj):
        for item in obj:
            yield from _leaves(item, (schema or {}).get("items"), (*prefix, kube_keys.item_key(item, keys)))
    elif prefix:
        yield prefix, obj


def _dotted(path: Path_) -> str:
    """`.spec.replicatedJobs[name=w].replicas`, as a conflict message names a field."""
    out = ""
    for seg in path:
        out += f".{seg[2:]}" if seg.startswith("f:") else \
            "[" + ",".join(f"{k}={v}" for k, v in json.loads(seg[2:]).items()) + "]"
    return out


def _child(obj: Any, seg: str, create: bool) -> Any:
    """The value under one path segment (a key, or the keyed item of a list), created on the way if asked."""
    if seg.startswith("k:"):
        found = next((v for v in obj if kube_keys.matches(v, seg)), None) if isinstance(obj, list) else None
        if found is None and create:
            found = dict(json.loads(seg[2:]))
            obj.append(found)
        return found
    if not isinstance(obj, dict):
        return None
    if create and not isinstance(obj.get(seg[2:]), (dict, list)):
        obj[seg[2:]] = {}
    return obj.get(seg[2:])


def _set(obj: dict[str, Any], path: Path_, value: Any) -> None:
    *parents, last = path
    cur: Any = obj
    for i, seg in enumerate(parents):
        nxt = path[i + 1]
        if not seg.startswith("k:") and nxt.startswith("k:") and not isinstance(cur.get(seg[2:]), list):
            cur[seg[2:]] = []
        cur = _child(cur, seg, True)
    if last.startswith("k:"):
        _child(cur, last, True)
    else:
        cur[last[2:]] = copy.deepcopy(value)


def _drop(obj: dict[str, Any], path: Path_) -> None:
    *parents, last = path
    cur: Any = obj
    for seg in parents:
        cur = _child(cur, seg, False)
        if cur is None:
            return
    if last.startswith("k:") and isinstance(cur, list):
        cur[:] = [v for v in cur if not kube_keys.matches(v, last)]
    elif isinstance(cur, dict):
        cur.pop(last[2:], None)


def _fields_v1(paths: list[Path_]) -> dict[str, Any]:
    """Leaf paths -> the nested `fieldsV1` map (`{"f:spec": {"f:suspend": {}}}`), with `"."` for a list item
    itself, as the API server writes it."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for seg in path:
            node = node.setdefault(seg, {})
            if seg.startswith("k:"):
                node.setdefault(".", {})
    return tree


def write_kubeconfig(path: Path, contexts: dict[str, str], token: str | None = TOKEN,
                     current: str | None = None) -> Path:
    """A kubeconfig with one context (and cluster and user) per `{context: server url}`."""
    doc = {"apiVersion": "v1", "kind": "Config", "preferences": {},
           "clusters": [{"name": c, "cluster": {"server": url}} for c, url in sorted(contexts.items())],
           "users": [{"name": c, "user": {"token": token} if token else {}} for c in sorted(contexts)],
           "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in sorted(contexts)],
           "current-context": current or ""}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@contextmanager
def clusters(*names: str) -> Iterator[dict[str, KubeCluster]]:
    """Several started servers, stopped on exit."""
    started = {n: KubeCluster(n).start() for n in names}
    try:
        yield started
    finally:
        for c in started.values():
            c.stop()
