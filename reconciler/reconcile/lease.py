"""One writer at a time: a coordination.k8s.io/v1 Lease in the `lease_cluster` elects the reconciler that acts.

EFFECT (network: the lease cluster's API).

The protocol is client-go's leader election (`tools/leaderelection`, resource lock `leases`), one step per
cycle instead of a background thread, since the loop acts only between two of these steps anyway:
- read the Lease; absent: create it holding it (a create that loses the race gets 409 AlreadyExists: not leader);
- held by us, or nobody holds it (`holderIdentity` empty: released), or it is expired: update it to hold it,
  with the `resourceVersion` read, so of two reconcilers updating at once the API server lets exactly one
  through (409 Conflict for the other: not leader this cycle);
- held by someone else and not expired: not leader; observe and report only.
A reconciler that cannot read or write the Lease is not leader (it cannot know that nobody else writes).

Expiry is measured on the candidate's own clock, never from the holder's timestamps (clocks of two machines
differ; a `renewTime` an hour ahead, or in 2099, must neither hand the Lease over early nor keep it forever).
As client-go does (`observedRecord`, `observedTime`), a candidate keeps the Lease's record as it last saw it
(`Observation`: the whole spec) and the reading of its local monotonic clock (`ticks`) when it saw that record
change; the Lease is expired when the record has not changed for its `leaseDurationSeconds` (at least this
reconciler's own duration, at most `MAX_LEASE_S`) on that clock. A holder that renews changes `renewTime`, so
a live holder's record keeps changing whatever its clock says. A candidate without an earlier observation (a
fresh process, every `--once` run) sees the record change "now", so it never takes a Lease someone holds in
its first cycle: only a reconciler that keeps running takes over from a holder that stopped renewing.
The holder's `renewTime` and `acquireTime` are written (the loop's clock, `now`, RFC 3339 MicroTime) for people
and for other tools, and never read back.
- `LeaseGuard` (the loop's act stage): renews the Lease every third of it between actions and before each
  request, and cuts each request's timeouts to what is left of it.
- `release` (after a `--once` cycle): client-go's `ReleaseOnCancel`: if we still hold it, update it with the
  `resourceVersion` read to no holder and `leaseDurationSeconds: 1`, so the next reconciler takes it at once
  instead of waiting for it to expire; a Lease someone else holds (or took meanwhile: 409 Conflict) is left as
  it is.
The lease lasts `duration_s`, which the loop sets to a few intervals so one slow cycle does not hand leadership
over.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .act import Outcome
from .decide import Action
from .kubeio import Client, Fenced

NAMESPACE = "fleet-system"
NAME = "fleet-reconciler"
PATH = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
MAX_LEASE_S = 3600        # a record that claims to last longer is read as lasting this long


@dataclass(frozen=True)
class Observation:
    """The Lease's record as this candidate last saw it, and when (its local monotonic clock) it saw it change."""

    record: str           # the spec, canonical JSON
    since: float          # `ticks()` when this record was first seen


@dataclass(frozen=True)
class Leadership:
    leader: bool
    holder: str | None
    message: str
    seen: Observation | None = None     # what to pass as `seen` next time
    fresh: bool = False                 # held by another, and first seen so in this very call (no history)


def micro_time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(spec: Any) -> str:
    return json.dumps(spec if isinstance(spec, dict) else {}, sort_keys=True, separators=(",", ":"), default=str)


def _lasts(spec: dict[str, Any], duration_s: int) -> int:
    """How long the observed record must stay unchanged to count as abandoned: its `leaseDurationSeconds`, but
    at least ours (a holder that renews more often loses nothing by it) and at most `MAX_LEASE_S`."""
    given = spec.get("leaseDurationSeconds")
    if not isinstance(given, int) or isinstance(given, bool):
        return duration_s
    return max(duration_s, min(given, MAX_LEASE_S))


def acquire(client: Client, identity: str, now: datetime, duration_s: int, *,
            ticks: Callable[[], float] = time.monotonic, seen: Observation | None = None,
            namespace: str = NAMESPACE, name: str = NAME) -> Leadership:
    """Try to hold (or renew) the Lease for `duration_s`; `seen` is what the previous call returned as `seen`
    (None: no history), `ticks` the local monotonic clock in seconds (module docstring)."""
    base = PATH.format(ns=namespace)
    where = f"Lease {namespace}/{name} on cluster {client.cluster}"
    got = client.request("GET", f"{base}/{name}")
    spec: dict[str, Any] = {"holderIdentity": identity, "leaseDurationSeconds": duration_s,
                            "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}
    if got.status == 404:
        made = client.request("POST", base, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                             "metadata": {"name": name, "namespace": namespace}, "spec": spec})
        if made.ok:
            return Leadership(True, identity, f"{where}: created, held by {identity}",
                              Observation(_record(spec), ticks()))
        return Leadership(False, None, f"{where}: not leader: {made.message}", seen)
    if not got.ok or not isinstance(got.body, dict):
        return Leadership(False, None, f"{where}: not leader, cannot read it: {_unread(got)}", seen)
    current = got.body
    given = current.get("spec")
    have: dict[str, Any] = given if isinstance(given, dict) else {}
    record = _record(have)
    fresh = seen is None or seen.record != record
    if fresh:
        seen = Observation(record, ticks())
    assert seen is not None
    holder = have.get("holderIdentity") or None
    if holder not in (None, identity):
        lasts = _lasts(have, duration_s)
        unchanged = ticks() - seen.since
        if unchanged < lasts:
            if fresh:
                why = (f"its record changed since this reconciler last read it (or it had not read it before); it "
                       f"counts as abandoned once it stays unchanged for {lasts} s")
            else:
                why = f"unchanged for {unchanged:.0f} s of the {lasts} s after which it counts as abandoned"
            return Leadership(False, holder, f"{where}: held by {holder} ({why}, on this reconciler's clock; the "
                                             "holder's renewTime is not trusted); observing only", seen,
                              fresh=fresh)
    transitions = have.get("leaseTransitions")
    transitions = transitions if isinstance(transitions, int) and not isinstance(transitions, bool) else 0
    if holder == identity:
        spec["acquireTime"] = have.get("acquireTime") or spec["acquireTime"]
        spec["leaseTransitions"] = transitions
    else:
        spec["leaseTransitions"] = transitions + 1
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace,
                         "resourceVersion": (current.get("metadata") or {}).get("resourceVersion")},
            "spec": spec}
    put = client.request("PUT", f"{base}/{name}", body)
    if put.ok:
        verb = "renewed" if holder == identity else \
            f"taken over from {holder} (its record unchanged for {ticks() - seen.since:.0f} s)" if holder else "taken"
        return Leadership(True, identity, f"{where}: {verb} by {identity}", Observation(_record(spec), ticks()))
    return Leadership(False, holder, f"{where}: not leader: {put.message}", seen)


def release(client: Client, identity: str, now: datetime, *, namespace: str = NAMESPACE, name: str = NAME) -> str:
    """Give the Lease back if `identity` holds it (module docstring); returns what happened, in a sentence."""
    base = PATH.format(ns=namespace)
    where = f"Lease {namespace}/{name} on cluster {client.cluster}"
    got = client.request("GET", f"{base}/{name}")
    if not got.ok or not isinstance(got.body, dict):
        return f"{where}: not released, cannot read it: {_unread(got)} (it expires on its own)"
    have = dict(got.body.get("spec") or {})
    holder = have.get("holderIdentity") or None
    if holder != identity:
        return f"{where}: held by {holder or 'nobody'}, not by {identity}: left as it is"
    have.update({"holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": micro_time(now)})
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace,
                         "resourceVersion": (got.body.get("metadata") or {}).get("resourceVersion")},
            "spec": have}
    put = client.request("PUT", f"{base}/{name}", body)
    if put.ok:
        return f"{where}: released by {identity}"
    return f"{where}: not released: {put.message} (it expires on its own)"


class LeaseGuard:
    """An actuator that renews the Lease every `every_s` seconds (of `ticks`, the loop's monotonic clock) of a
    long act stage (the first cycle after a start can take minutes), and refuses every action once the
    renewal fails: a reconciler that may have lost the Lease writes nothing more, so two reconcilers never
    write at once. `fence` is the same check for each request of the actuator's clients (kubeio.Client):
    it returns how long the request may take, so that it ends within two thirds of `lasts_s` (the Lease's
    duration) after the last renewal began: another reconciler takes the Lease only once it saw it unchanged
    for all of `lasts_s`, and the last third is the margin for the clocks' rates and the network."""

    def __init__(self, inner: Any, renew: Callable[[], bool], every_s: float, *,
                 ticks: Callable[[], float] = time.monotonic, since: float | None = None,
                 lasts_s: float | None = None) -> None:
        self.inner, self.renew, self.every_s, self.ticks = inner, renew, every_s, ticks
        self.since = ticks() if since is None else since      # when the last renewal began
        self.lasts_s = lasts_s if lasts_s is not None else every_s * 3
        self.lost = False

    def _renew_if_due(self) -> None:
        if not self.lost and self.ticks() - self.since >= self.every_s:
            began = self.ticks()
            if self.renew():
                self.since = began
            else:
                self.lost = True

    def fence(self) -> float:
        """Seconds the next request may take (renewing first when due); `Fenced` when it must not be sent."""
        self._renew_if_due()
        left = 0.0 if self.lost else self.since + self.lasts_s * 2 / 3 - self.ticks()
        if left < MIN_REQUEST_S:
            self.lost = True
            raise Fenced(REFUSED)
        return left

    def _held(self) -> Outcome | None:
        self._renew_if_due()
        if self.lost:
            return Outcome(False, REFUSED, "the next cycle elects again")
        return None

    def resize(self, cluster: str, actions: Sequence[Action]) -> Outcome:
        return self._held() or self.inner.resize(cluster, actions)

    def kueue(self, action: Action) -> Outcome:
        return self._held() or self.inner.kueue(action)

    def stop(self, action: Action) -> Outcome:
        return self._held() or self.inner.stop(action)

    def start(self, action: Action) -> Outcome:
        return self._held() or self.inner.start(action)

    def move(self, action: Action) -> Outcome:
        return self._held() or self.inner.move(action)


MIN_REQUEST_S = 1.0          # less of the Lease left than this: no request is sent
REFUSED = ("this reconciler could not renew the Lease during the cycle: it writes nothing more until it holds "
           "it again")


def _unread(got: Any) -> str:
    """Why a Lease read failed: the client's message, or (an answer of 2xx) that it was no Lease object."""
    return got.message or f"HTTP {got.status} with a body that is not a JSON object (no Lease in it)"
