"""Jobs by server-side apply: JobSets (and the Services, Deployments, LeaderWorkerSets render writes beside them)
sent to each cluster's API with field manager `fleet`, not through Pulumi (DESIGN 4b).

EFFECT (network: each cluster's Kubernetes API, read and write; reads the kubeconfig). The client comes from
`observe.kube.client_configuration`, the one place a cluster becomes an API client (its own kubeconfig
context, never the current one, no client retries).

The API the reconcile loop and `fleet apply` call; each returns an `ActionResult` saying what it did, or the
error with a hint, and never raises for an API failure:
- `apply_object(client, manifest, observed=None)`: server-side apply of one rendered object.
- `delete_object(client, kind, namespace, name, reason, uid=)`: only with the plan's reason (preempt or move),
  of the object observed (`uid`: its uid as the delete's precondition).
- `prune_job(client, namespace, team, job, keep, reason)`: deletes the job's service objects (Deployments,
  LeaderWorkerSets, Service) that carry its labels (`fleet.dev/team`, `fleet.dev/job`: DESIGN 4b) and are not
  in `keep`, found by label selector in the team's own namespace, never by a guessed name (a spread
  service's objects are `<job>-<pool>`, a single group's `<job>`: render/service.py); each deleted with the
  uid listed as its precondition.
- which live Fleet JobSets and service objects a plan deletes, and why, is `safety.decide` (pure).

Rules, and why:
- A new JobSet is created with `spec.suspend: true` (render writes it so): Kueue unsuspends it on admission.
- `spec.suspend` is sent only while Fleet owns it: on create, and while the JobSet is still suspended with
  Fleet's ownership of the field (queued, not admitted; omitting it then would unsuspend the job behind
  Kueue's back, since SSA removes a field its only owner stops applying). Once Kueue admits the job it
  writes `suspend: false` and takes the field over (an Update moves ownership), so from then on Fleet's
  applied configuration omits it: sending `true` would conflict (or, forced, stop the job), sending `false`
  would take the field from Kueue, which suspends the job again when it evicts it.
- Fields Kueue injects on admission (the flavor's node selectors and tolerations, scheduling gates, pod
  template labels and annotations): Fleet renders no tolerations and no scheduling gates, and for an admitted
  JobSet every field that another manager owns and Fleet does not is dropped from the applied configuration,
  so SSA never takes ownership of it (a node selector value Kueue set stays Kueue's).
- Never `force`: a conflict means someone else owns a field Fleet wants to change; it is reported with the
  fields and their owners, and nothing is overwritten.
- An object that is being deleted (`metadata.deletionTimestamp`: a move deletes the old copy with foreground
  propagation, so the JobSet stays until its Jobs and pods are gone) is never applied to: the result is
  `wait`, and the next run creates the new copy once the old one is gone. So a move within one cluster never
  has the old copy's pods still running (or writing the checkpoint) beside the new copy's.
- `create_only` (the reconcile loop's starts): a JobSet that already exists is left as it is (`keep`, one
  read): once Kueue admits it, `spec.suspend` and the scheduling fields are Kueue's.
- Idempotent: before applying, the live object is read; when every field Fleet would send has that value
  and Fleet owns exactly those fields (its `managedFields` entry), nothing is sent ("unchanged"). A rerun
  after a successful apply therefore makes no request that changes anything.
- A JobSet's pods never change in place (`immutable.py`: the JobSet webhook refuses a changed
  `spec.replicatedJobs`, and the CRD a changed failure policy). An admitted JobSet whose applied configuration
  would change them is `keep` ("kept": it runs, saying which fields the file changed) and gets no write at all,
  not even its labels and annotations: its `fleet.dev/spec-digest` keeps naming the spec its pods run, from
  which the plan knows it runs an earlier spec of its file; it changes only when the plan restarts or moves
  it (a disruption the plan shows and a review bounds). A queued one (never admitted: no pod ran) is deleted
  in the foreground, on the uid and resourceVersion read (one Kueue admitted since is not the one deleted:
  409, nothing deleted), and created again as new once gone (`wait` until then); a change only in the pod
  template fields Kueue may change while it is suspended is sent as an update.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import urllib3
from kubernetes import client as k8s

from ..observe.kube import (  # the same reading of a Status body and of an error
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    ContextError,
    Target,
    _one_line,
    _status_message,
    client_configuration,
)
from ..observe.model import JobSet
from ..render.facts import TEAM_LABEL
from .fields import FieldPath, covers, learned_keys, leaves, owned, without
from .immutable import frozen_changes, kept_reason, recreated_reason

MANAGER = "fleet"
JOB_LABEL = "fleet.dev/job"
APPLY_PATCH = "application/apply-patch+yaml"
Action = Literal["create", "update", "unchanged", "delete", "absent", "keep", "wait", "failed"]
INJECTED = ("tolerations", "schedulingGates")
"""Pod template fields only Kueue writes (from the flavor and admission checks); Fleet never sends them."""


@dataclass(frozen=True)
class ActionResult:
    """What one call did to one object: `action` (or `failed` with `error` and `hint`), and why."""

    cluster: str
    kind: str
    namespace: str
    name: str
    action: Action
    reason: str = ""
    error: str = ""
    hint: str = ""
    preview: bool = False
    sent: Mapping[str, Any] | None = field(default=None, compare=False)
    refused: bool = False   # failed: the API server answered and refused this object (`REFUSALS`)

    @property
    def ok(self) -> bool:
        return self.action != "failed"

    @property
    def ref(self) -> str:
        return f"{self.cluster}: {self.kind} {self.namespace}/{self.name}"

    def line(self) -> str:
        if not self.ok:
            return f"{self.ref}: FAILED: {self.error}" + (f"\n  hint: {self.hint}" if self.hint else "")
        verb = {"create": "created", "update": "updated", "delete": "deleted", "unchanged": "unchanged",
                "absent": "already absent", "keep": "kept", "wait": "not yet"}[self.action]
        if self.preview and self.action in ("create", "update", "delete"):
            verb = f"would {self.action}"
        return f"{self.ref}: {verb}" + (f" ({self.reason})" if self.reason else "")


@dataclass
class ClusterClient:
    """One cluster's API, through its own kubeconfig context. `open` raises `ContextError` (with a located
    message and hint) when the context cannot be used."""

    cluster: str
    context: str | None
    server: str
    api: k8s.ApiClient
    timeout_s: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)

    @classmethod
    def open(cls, target: Target, kubeconfig: str | None,
             timeout_s: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)) -> ClusterClient:
        cfg = client_configuration(target, kubeconfig)
        return cls(target.name, target.context, str(cfg.host), k8s.ApiClient(cfg), timeout_s)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Failed(Exception):
    def __init__(self, error: str, hint: str, refused: bool = False) -> None:
        super().__init__(error)
        self.error, self.hint, self.refused = error, hint, refused


# --- paths and the API --------------------------------------------------------------------------------------
def resource_path(api_version: str, kind: str, namespace: str, name: str) -> str:
    """`/apis/jobset.x-k8s.io/v1alpha2/namespaces/vision/jobsets/train` (core group: `/api/v1/...`)."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{prefix}/namespaces/{namespace}/{kind.lower()}s/{name}"


def _call(client: ClusterClient, method: str, path: str, *, query: Sequence[tuple[str, Any]] = (),
          body: Any = None, content_type: str | None = None, verb: str) -> tuple[int, Any]:
    """One request: (status, decoded JSON body) for 2xx and 404; `_Failed` for every other outcome."""
    where = f"cluster `{client.cluster}` (context `{client.context}`, {client.server}{path})"
    headers = {"Accept": "application/json", **({"Content-Type": content_type} if content_type else {})}
    try:
        request = client.api.param_serialize(method, path, query_params=list(query), header_params=headers,
                                             body=body, auth_settings=["BearerToken"])
        resp = client.api.call_api(*request, _request_timeout=client.timeout_s)
        data: bytes | str = resp.read()  # type: ignore[no-untyped-call]
        status = resp.status
    except k8s.ApiException as e:
        status, data = e.status or 0, e.body or b""
    except urllib3.exceptions.NewConnectionError as e:       # before TimeoutError: urllib3 2 subclasses it
        raise _Failed(f"{where}: cannot connect: {_one_line(e)}", _UNREACHABLE) from None
    except (urllib3.exceptions.TimeoutError, TimeoutError):
        raise _Failed(f"{where}: no answer within {client.timeout_s[0]:g} s (connect) / {client.timeout_s[1]:g} s "
                      "(read)", _UNREACHABLE) from None
    except urllib3.exceptions.HTTPError as e:
        raise _Failed(f"{where}: cannot connect: {_one_line(e)}", _UNREACHABLE) from None
    if 200 <= status < 300 or (status == 404 and method != "PATCH"):
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            raise _Failed(f"{where}: HTTP {status} with a body that is not JSON ({len(data)} bytes starting "
                          f"{data[:40]!r})", "the server is not a Kubernetes API server, or a proxy in between "
                          "answers: check the context's server URL") from None
    raise _http_failure(status, data, where, verb)


_UNREACHABLE = ("check the context's server URL and that the API server is up and reachable from here (VPN, "
                "firewall, authorized networks); nothing was changed on this cluster, rerun `fleet apply` when "
                "it answers")


def _http_failure(status: int, body: Any, where: str, verb: str) -> _Failed:
    detail = _status_message(body)
    what = f"{where}: HTTP {status}" + (f" {detail}" if detail else "")
    if status in REFUSALS:
        return _refusal(status, what, verb)
    return _api_failure(status, what)


REFUSALS = frozenset({400, 403, 409, 422})
"""The answers of an API server that works and refuses this one object (invalid, forbidden in its namespace, a
conflict, refused by admission): `ActionResult.refused`. Every other failure (no answer, 401, 404, 5xx) may be
the cluster's."""


def _refusal(status: int, what: str, verb: str) -> _Failed:
    if status == 403 and "admission webhook" in what:
        return _Failed(what, "an admission webhook refused the object (the JobSet webhook refuses any change of a "
                             "JobSet's pods while it exists): the change takes effect when the plan restarts or "
                             "moves the job", refused=True)
    if status == 403:
        return _Failed(what, f"grant Fleet's identity `{verb}` on this resource in the team's namespace (deploy/ "
                             "has the RBAC Fleet needs), or ask who runs the namespace's admission policy or "
                             "ResourceQuota", refused=True)
    if status == 409:
        return _Failed(f"{what}; not forced", "another field manager owns these fields: Fleet never forces. If "
                       "the change is wanted, find who writes them (`kubectl get -o yaml --show-managed-fields`) "
                       "and stop it, or let the plan move or restart the job", refused=True)
    if status == 422:
        return _Failed(what, "the cluster refused the object (JobSets refuse a changed pod template while "
                             "they run): the change takes effect when the plan restarts or moves the job",
                       refused=True)
    return _Failed(what, "the cluster refused the object (an admission webhook or policy, or a field it does "
                         "not take): read the message above, and the cluster's admission policies", refused=True)


def _api_failure(status: int, what: str) -> _Failed:
    if status == 401:
        return _Failed(what, "the context's credentials are missing or expired: log in again (e.g. `gcloud "
                             "container clusters get-credentials`, `aws eks update-kubeconfig`)")
    if status == 404:
        return _Failed(what, "the API is missing on this cluster: install the JobSet (v1alpha2) or "
                             "LeaderWorkerSet CRD, or check that the team's namespace exists (the kueue stack "
                             "creates it)")
    if status == 415 or status == 405:
        return _Failed(what, "the API server does not take server-side apply here (Kubernetes 1.22 or later "
                             "and the JobSet/LeaderWorkerSet CRDs are needed)")
    if status >= 500:
        return _Failed(what, "the API server failed; rerun `fleet apply` later (it converges), and check the "
                             "control plane's health")
    if status == 0:
        return _Failed(what, "check the context's server URL, its TLS settings and that the API server is "
                             "reachable")
    return _Failed(what, "an unexpected answer from the API server; rerun with FLEET_DEBUG=1 and check the "
                         "server's logs")


def _pod_templates(manifest: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    spec = manifest.get("spec") or {}
    for rj in spec.get("replicatedJobs") or ():
        tpl = (((rj.get("template") or {}).get("spec") or {}).get("template"))
        if isinstance(tpl, dict):
            yield tpl
    for holder in (spec, spec.get("leaderWorkerTemplate") or {}):
        for key in ("template", "workerTemplate", "leaderTemplate"):
            if isinstance(holder.get(key), dict):
                yield holder[key]


SUSPENDED_KINDS = frozenset({"JobSet", "RayJob"})
"""Kinds created suspended whose `spec.suspend` Kueue owns once it admits them (a RayJob too: render/ray.py)."""


# --- the decisions on one object ----------------------------------------------------------------------------
def admitted(observed: JobSet | None, live: Mapping[str, Any] | None) -> bool:
    """Kueue admitted the JobSet: it runs (or ran) unsuspended, in the observation or in the live object."""
    if observed is not None and not observed.suspended:
        return True
    return live is not None and not bool((live.get("spec") or {}).get("suspend", False))


def applied_configuration(manifest: Mapping[str, Any], live: Mapping[str, Any] | None,
                          observed: JobSet | None = None) -> dict[str, Any]:
    """What Fleet sends for `manifest` given the live object (None: it does not exist): see the module rules."""
    body: dict[str, Any] = json.loads(json.dumps(manifest))      # a deep copy, of plain JSON
    for tpl in _pod_templates(body):
        for key in INJECTED:
            (tpl.get("spec") or {}).pop(key, None)
    if live is None or body.get("kind") not in SUSPENDED_KINDS:
        return body
    owners = owned(live, MANAGER)
    mine = owners.get(MANAGER, set())
    if admitted(observed, live) or ("f:spec", "f:suspend") not in mine:
        (body.get("spec") or {}).pop("suspend", None)
    if admitted(observed, live):
        others = set().union(*(p for who, p in owners.items() if who != MANAGER))
        for path, _ in list(leaves(body, learned_keys(mine | others))):
            if path not in mine and covers(others, path):
                without(body, path)
    return body


IDENTITY: frozenset[FieldPath] = frozenset({("f:apiVersion",), ("f:kind",), ("f:metadata", "f:name"),
                                             ("f:metadata", "f:namespace")})
"""Fields an apply sends but no API server records in `managedFields` (its field manager strips them)."""


def unchanged(body: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    """Applying `body` would change nothing: Fleet owns exactly its fields, and each has the value sent (the
    object's identity, which the API server never lists as anyone's field, left out on both sides)."""
    owners = owned(live, MANAGER)
    keys = learned_keys(set().union(*owners.values()))
    want = {p: v for p, v in leaves(body, keys) if p not in IDENTITY}
    have = dict(leaves(live, keys))
    mine = owners.get(MANAGER, set()) - IDENTITY
    return set(want) == mine and all(have.get(p) == v for p, v in want.items())


def _ident(manifest: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = manifest.get("metadata") or {}
    return (str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")), str(meta.get("namespace", "")),
            str(meta.get("name", "")))


def get_object(client: ClusterClient, api_version: str, kind: str, namespace: str,
               name: str) -> dict[str, Any] | None:
    """The live object, or None when absent; `_Failed` otherwise (callers turn it into an ActionResult)."""
    status, doc = _call(client, "GET", resource_path(api_version, kind, namespace, name), verb="get")
    return doc if status != 404 and isinstance(doc, dict) else None


def apply_object(client: ClusterClient, manifest: Mapping[str, Any], observed: JobSet | None = None, *,
                 preview: bool = False, create_only: bool = False, deleted: bool = False) -> ActionResult:
    """Server-side apply of one rendered object with field manager `fleet` (never forced). `observed`: the
    JobSet as the snapshot saw it, if any. With `preview`, reads only and says what it would send; `deleted`:
    the preview said this run deletes it first (a move onto its own units), so it would be created. With
    `create_only`, an object that exists is kept as it is. The live object is read once."""
    api_version, kind, namespace, name = _ident(manifest)
    path = resource_path(api_version, kind, namespace, name)
    try:
        live = None if preview and deleted else get_object(client, api_version, kind, namespace, name)
        if live is not None and (live.get("metadata") or {}).get("deletionTimestamp"):
            return ActionResult(client.cluster, kind, namespace, name, "wait", preview=preview,
                                reason="its old copy is still being deleted (its pods are stopping): the next "
                                       "run creates the new copy once it is gone")
        if live is not None and create_only:
            return ActionResult(client.cluster, kind, namespace, name, "keep", preview=preview,
                                reason="exists: left as it is")
        body = applied_configuration(manifest, live, observed)
        if live is not None and unchanged(body, live):
            return ActionResult(client.cluster, kind, namespace, name, "unchanged", preview=preview, sent=None)
        frozen = frozen_changes(body, live, MANAGER) if live is not None and kind == "JobSet" else []
        if frozen and live is not None:
            if admitted(observed, live):
                return ActionResult(client.cluster, kind, namespace, name, "keep", reason=kept_reason(frozen),
                                    preview=preview)
            return _recreate(client, manifest, live, frozen, preview)
        action: Action = "create" if live is None else "update"
        reason = "new: created suspended, Kueue admits it" if live is None and kind in SUSPENDED_KINDS else ""
        if live is not None and admitted(observed, live) and kind in SUSPENDED_KINDS:
            reason = "admitted: spec.suspend and Kueue's fields left to Kueue"
        if not preview:
            _call(client, "PATCH", path, query=[("fieldManager", MANAGER)], body=body, content_type=APPLY_PATCH,
                  verb="patch")
    except _Failed as e:
        return ActionResult(client.cluster, kind, namespace, name, "failed", error=e.error, hint=e.hint,
                            preview=preview, refused=e.refused)
    return ActionResult(client.cluster, kind, namespace, name, action, reason=reason, preview=preview, sent=body)


def _recreate(client: ClusterClient, manifest: Mapping[str, Any], live: Mapping[str, Any], frozen: list[str],
              preview: bool) -> ActionResult:
    """A queued JobSet whose pods the file changed: deleted in the foreground (the uid and resourceVersion read
    as preconditions), then created as new once gone (see the module rules)."""
    api_version, kind, namespace, name = _ident(manifest)
    why, meta = recreated_reason(frozen), live.get("metadata") or {}
    gone = delete_object(client, kind, namespace, name, why, api_version=api_version, preview=preview,
                         propagation="Foreground", uid=meta.get("uid"), resource_version=meta.get("resourceVersion"))
    if not gone.ok:
        return gone
    if preview:
        return ActionResult(client.cluster, kind, namespace, name, "create", reason=why, preview=True,
                            sent=applied_configuration(manifest, None))
    again = apply_object(client, manifest, create_only=True)
    if again.action == "wait":
        return replace(again, reason=f"{why}; it is still being deleted: the next run creates it once it is gone")
    return replace(again, reason=f"{why}; {again.reason}" if again.reason else why)


def apply_job(client: ClusterClient, manifest: Mapping[str, Any], observed: JobSet | None = None, *,
              preview: bool = False) -> ActionResult:
    """`apply_object` for a JobSet (the name the reconcile loop uses)."""
    return apply_object(client, manifest, observed, preview=preview)


def delete_object(client: ClusterClient, kind: str, namespace: str, name: str, reason: str, *,
                  api_version: str = "jobset.x-k8s.io/v1alpha2", preview: bool = False,
                  propagation: Literal["Background", "Foreground"] = "Background",
                  uid: str | None = None, resource_version: str | None = None) -> ActionResult:
    """Delete one object because the plan decided so; `reason` (the plan's) is required and reported. Its
    children (Jobs, pods) go with it: in the background (the object goes at once, its pods follow), or, for
    the old copy of a move within one cluster, in the foreground (the object stays, with a deletionTimestamp,
    until its pods are gone: the new copy of the same name is created only then, see `apply_object`).
    `uid`: the uid of the object observed, sent as the delete's precondition (`preconditions.uid`), so an
    object made since under that name is never the one deleted (the API answers 409: nothing deleted);
    `resource_version` likewise, for an object that must not have changed since it was read."""
    if not reason.strip():
        return ActionResult(client.cluster, kind, namespace, name, "failed", preview=preview,
                            error="refusing to delete without the plan's reason",
                            hint="a running job is stopped only by a plan that preempts or moves it")
    path = resource_path(api_version, kind, namespace, name)
    try:
        if preview:
            live = get_object(client, api_version, kind, namespace, name)
            return ActionResult(client.cluster, kind, namespace, name, "delete" if live else "absent",
                                reason=reason, preview=True)
        pre = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        options: dict[str, Any] = {"propagationPolicy": propagation, **({"preconditions": pre} if pre else {})}
        status, _ = _call(client, "DELETE", path, body=options, verb="delete", content_type="application/json")
    except _Failed as e:
        if uid and " HTTP 409" in e.error:
            seen = f"uid {uid}" + (f", resourceVersion {resource_version}" if resource_version else "")
            return ActionResult(client.cluster, kind, namespace, name, "failed", reason=reason, preview=preview,
                                error=f"{e.error}: the object there is not the one observed ({seen}), so "
                                      "nothing was deleted",
                                hint=f"it was {'changed or ' if resource_version else ''}replaced since it was "
                                     "observed; the next cycle observes it again",
                                refused=True)
        return ActionResult(client.cluster, kind, namespace, name, "failed", reason=reason, error=e.error,
                            hint=e.hint, preview=preview, refused=e.refused)
    return ActionResult(client.cluster, kind, namespace, name, "absent" if status == 404 else "delete",
                        reason=reason, preview=preview)


def delete_job(client: ClusterClient, namespace: str, name: str, reason: str, *,
               preview: bool = False) -> ActionResult:
    """`delete_object` for a JobSet (the name the reconcile loop uses)."""
    return delete_object(client, "JobSet", namespace, name, reason, preview=preview)


SERVICE_KINDS = (("apps/v1", "Deployment"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("v1", "Service"))
"""What an inference job is made of (render/service.py), in the order `prune_job` deletes them."""


def list_objects(client: ClusterClient, api_version: str, kind: str, namespace: str,
                 labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The objects of `kind` in `namespace` that carry every label of `labels` (a label selector, checked
    again here); none when the kind's API is not installed (a cluster without the LeaderWorkerSet CRD has
    no LeaderWorkerSet). `_Failed` for any other failure."""
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{prefix}/namespaces/{namespace}/{kind.lower()}s"
    out: list[dict[str, Any]] = []
    cont = ""
    while True:
        query = [("labelSelector", selector), ("limit", 500), *([("continue", cont)] if cont else [])]
        status, doc = _call(client, "GET", path, query=query, verb="list")
        if status == 404 or not isinstance(doc, dict):
            return out
        for item in doc.get("items") or ():
            have = ((item.get("metadata") or {}).get("labels") or {}) if isinstance(item, dict) else {}
            if all(have.get(k) == v for k, v in labels.items()):
                out.append(item)
        cont = str((doc.get("metadata") or {}).get("continue") or "")
        if not cont:
            return out


def prune_job(client: ClusterClient, namespace: str, team: str, job: str, keep: set[tuple[str, str]],
              reason: str, *, preview: bool = False) -> list[ActionResult]:
    """Delete the inference job's objects in `namespace` (found by the labels `fleet.dev/team` and
    `fleet.dev/job`, DESIGN 4b) whose (kind, name) is not in `keep`: after the objects of the job's new
    placement in this cluster are applied (`keep`: them), the old pools' Deployments and LeaderWorkerSets;
    with an empty `keep`, all of them and the Service. One result per deletion, or one failed result."""
    results: list[ActionResult] = []
    for api_version, kind in SERVICE_KINDS:
        try:
            found = list_objects(client, api_version, kind, namespace, {TEAM_LABEL: team, JOB_LABEL: job})
        except _Failed as e:
            return [*results, ActionResult(client.cluster, kind, namespace, f"-l {JOB_LABEL}={job}", "failed",
                                           reason=reason, error=e.error, hint=e.hint, preview=preview)]
        for obj in sorted(found, key=lambda o: str(o["metadata"].get("name", ""))):
            name = str(obj["metadata"].get("name", ""))
            if (kind, name) in keep:
                continue
            uid = obj["metadata"].get("uid")
            done = delete_object(client, kind, namespace, name, reason, api_version=api_version, preview=preview,
                                 uid=uid if isinstance(uid, str) and uid else None)
            results.append(done)
            if not done.ok:
                return results
    return results


def context_failed(target: Target, error: ContextError, kind: str = "JobSet") -> ActionResult:
    """The result of a cluster whose kubeconfig context cannot be used (nothing was sent to it)."""
    return ActionResult(target.name, kind, "*", "*", "failed", error=error.problem.message,
                        hint=error.problem.hint)
