"""One writer at a time: a coordination.k8s.io/v1 Lease in the `lease_cluster` elects the reconciler that acts.

EFFECT (network: the lease cluster's API).

The protocol is client-go's leader election (`tools/leaderelection`, resource lock `leases`), one step per
cycle instead of a background thread, since the loop acts only between two of these steps anyway:
- read the Lease; absent: create it holding it (a create that loses the race gets 409 AlreadyExists: not leader);
- held by us, or its `renewTime + leaseDurationSeconds` has passed (the holder stopped renewing), or nobody
  holds it: update it to hold it, with the `resourceVersion` read, so of two reconcilers updating at once the
  API server lets exactly one through (409 Conflict for the other: not leader this cycle);
- held by someone else and not expired: not leader; observe and report only.
A reconciler that cannot read or write the Lease is not leader (it cannot know that nobody else writes).
- `release` (after a `--once` cycle): client-go's `ReleaseOnCancel`: if we still hold it, update it with the
  `resourceVersion` read to no holder and `leaseDurationSeconds: 1`, so the next reconciler takes it at once
  instead of waiting for it to expire; a Lease someone else holds (or took meanwhile: 409 Conflict) is left as
  it is.
Times are the loop's clock (`now`), written as RFC 3339 MicroTime. The lease lasts `duration_s`, which the loop
sets to a few intervals so one slow cycle does not hand leadership over.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .kubeio import Client

NAMESPACE = "fleet-system"
NAME = "fleet-reconciler"
PATH = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


@dataclass(frozen=True)
class Leadership:
    leader: bool
    holder: str | None
    message: str


def micro_time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def acquire(client: Client, identity: str, now: datetime, duration_s: int, *, namespace: str = NAMESPACE,
            name: str = NAME) -> Leadership:
    """Try to hold (or renew) the Lease for `duration_s` from `now`."""
    base = PATH.format(ns=namespace)
    where = f"Lease {namespace}/{name} on cluster {client.cluster}"
    got = client.request("GET", f"{base}/{name}")
    spec: dict[str, Any] = {"holderIdentity": identity, "leaseDurationSeconds": duration_s,
                            "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}
    if got.status == 404:
        made = client.request("POST", base, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                             "metadata": {"name": name, "namespace": namespace}, "spec": spec})
        if made.ok:
            return Leadership(True, identity, f"{where}: created, held by {identity}")
        return Leadership(False, None, f"{where}: not leader: {made.message}")
    if not got.ok or not isinstance(got.body, dict):
        return Leadership(False, None, f"{where}: not leader, cannot read it: {got.message}")
    current = got.body
    have = current.get("spec") or {}
    holder = have.get("holderIdentity") or None
    renewed = _parse(have.get("renewTime"))
    given = have.get("leaseDurationSeconds")
    lasts: int = given if isinstance(given, int) else duration_s
    expired = renewed is None or renewed + timedelta(seconds=lasts) <= now
    if holder not in (None, identity) and not expired:
        until = (renewed + timedelta(seconds=lasts)).isoformat() if renewed else "?"
        return Leadership(False, holder, f"{where}: held by {holder} until {until}; observing only")
    transitions = int(have.get("leaseTransitions") or 0)
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
        verb = "renewed" if holder == identity else f"taken over from {holder}" if holder else "taken"
        return Leadership(True, identity, f"{where}: {verb} by {identity}")
    return Leadership(False, holder, f"{where}: not leader: {put.message}")


def release(client: Client, identity: str, now: datetime, *, namespace: str = NAMESPACE, name: str = NAME) -> str:
    """Give the Lease back if `identity` holds it (module docstring); returns what happened, in a sentence."""
    base = PATH.format(ns=namespace)
    where = f"Lease {namespace}/{name} on cluster {client.cluster}"
    got = client.request("GET", f"{base}/{name}")
    if not got.ok or not isinstance(got.body, dict):
        return f"{where}: not released, cannot read it: {got.message} (it expires on its own)"
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
