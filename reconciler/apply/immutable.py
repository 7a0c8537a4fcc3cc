"""What an existing JobSet cannot be changed in, for `jobs.apply_object`: the fields of Fleet's applied
configuration a cluster refuses to change in place. Pure.

A JobSet's pods are made from `spec.replicatedJobs`, and the JobSet validating webhook (kubernetes-sigs/jobset,
`ValidateUpdate`) refuses any change of it (and of `spec.managedBy`), except, while the stored or the new object
is suspended, in the pod template fields Kueue writes on admission (`metadata.annotations`, `metadata.labels`,
`spec.nodeSelector`, `spec.tolerations`, `spec.schedulingGates` of each replicatedJob's pod template, paired by
index as the webhook pairs them). The CRD's `self == oldSelf` rules make `spec.failurePolicy`, `successPolicy`,
`startupPolicy`, `network` and `volumeClaimPolicies` immutable once set (judged only where the live object and
the applied configuration both have the field, as the API server evaluates a transition rule). So a running
JobSet never takes a changed image, command, size or environment: the apply that sends one is refused, and even
accepted it would change no running pod; only deleting the JobSet and creating it again does (what `jobs.py`
does for a queued JobSet, and the plan for a running one).

`frozen_changes(body, live)` names, as dotted paths from `spec`, the fields whose value the apply of `body`
would change in those parts: a value it sends that the live object does not hold (lists of named items paired
by name, other lists by position and length; an absent field, null, `{}` and `[]` are one, as the webhook's
semantic equality has it), or a field only Fleet owns (its `managedFields`) that it no longer sends, which the
apply would remove (unless Fleet sends it, or a list holding it, whole). Fields another manager owns and Fleet leaves
out are not Fleet's to change and not looked at. Empty: the cluster takes the update.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from .fields import FieldPath, covers, learned_keys, leaves, owned

FROZEN = ("replicatedJobs", "managedBy")
"""Immutable by the webhook, whether set or not."""
SET_ONCE = ("failurePolicy", "successPolicy", "startupPolicy", "network", "volumeClaimPolicies")
"""Immutable by the CRD's transition rules, once the live object has them."""
KUEUE_MUTABLE = (("metadata", "annotations"), ("metadata", "labels"), ("spec", "nodeSelector"),
                 ("spec", "tolerations"), ("spec", "schedulingGates"))
"""The pod template fields of a suspended JobSet the webhook lets change (Kueue's, on admission)."""
SHOWN = 3


def suspended(body: Mapping[str, Any], live: Mapping[str, Any]) -> bool:
    """The webhook's condition for Kueue's fields to change: the live or the sent object has `suspend: true`."""
    return (live.get("spec") or {}).get("suspend") is True or (body.get("spec") or {}).get("suspend") is True


def frozen_changes(body: Mapping[str, Any], live: Mapping[str, Any], manager: str) -> list[str]:
    """The immutable fields the apply of `body` (by `manager`) would change on `live` (module docstring)."""
    spec, was = body.get("spec") or {}, live.get("spec") or {}
    judged = [k for k in (*FROZEN, *SET_ONCE) if k in FROZEN or (spec.get(k) is not None and was.get(k) is not None)]
    sent = {k: copy.deepcopy(spec[k]) for k in judged if k in spec}
    masked = suspended(body, live)
    if masked and isinstance(sent.get("replicatedJobs"), list) and isinstance(was.get("replicatedJobs"), list):
        for new_rj, old_rj in zip(sent["replicatedJobs"], was["replicatedJobs"], strict=False):    # by index
            for holder, key in KUEUE_MUTABLE:
                _as_before(new_rj, old_rj, holder, key)
    out = [path for k, v in sent.items() for path in _diff(v, was.get(k), k)]
    owners = owned(live, manager)
    others = set().union(*(p for who, p in owners.items() if who != manager))
    keys = learned_keys(set().union(*owners.values()))
    now, have = {p for p, _ in leaves(body, keys)}, dict(leaves(live, keys))
    for path in sorted(owners.get(manager, set())):
        if len(path) > 1 and path[0] == "f:spec" and path[1][2:] in judged and not covers(now, path) \
                and not covers(others, path) and have.get(path) not in (None, {}, []) \
                and not (masked and _kueues(path)):
            out.append(_dotted(path[1:]))
    return [p for p in dict.fromkeys(out) if not any(p.startswith((f"{q}.", f"{q}[")) for q in out)]


def what(changes: list[str]) -> str:
    """`replicatedJobs[worker].template.spec.template.spec.containers[trainer].image` and a few more."""
    more = f" and {len(changes) - SHOWN} more" if len(changes) > SHOWN else ""
    return ", ".join(changes[:SHOWN]) + more


def kept_reason(changes: list[str]) -> str:
    """Why a running JobSet its file changed in such fields is left as it runs, with no write."""
    return (f"it runs, and its job file changes what a JobSet cannot change while it exists ({what(changes)}): "
            "nothing sent, not even its labels and annotations, which keep describing what runs; the change takes "
            "effect only when the plan restarts or moves it")


def recreated_reason(changes: list[str]) -> str:
    """Why a suspended JobSet (queued, or evicted by Kueue) its file changed in such fields is deleted and created
    again: no pod of it runs."""
    return (f"suspended (queued, or evicted by Kueue), and its job file changes what a JobSet cannot change while it "
            f"exists ({what(changes)}): deleted in the foreground and created again (no pod of it runs)")


def _as_before(new_rj: Any, old_rj: Any, holder: str, key: str) -> None:
    """The sent replicatedJob's pod template field takes the live one's value (or none), as the webhook munges."""
    def part(rj: Any, create: bool) -> dict[str, Any] | None:
        cur = rj
        for step in ("template", "spec", "template", holder):
            if not isinstance(cur, dict):
                return None
            if create and not isinstance(cur.get(step), dict):
                cur[step] = {}
            cur = cur.get(step)
        return cur if isinstance(cur, dict) else None

    before = part(old_rj, False)
    value = before.get(key) if before is not None else None
    target = part(new_rj, value is not None)
    if target is not None:
        target.pop(key, None)
        if value is not None:
            target[key] = copy.deepcopy(value)


def _kueues(path: FieldPath) -> bool:
    """A fieldsV1 path inside one of Kueue's pod template fields of a replicatedJob."""
    return len(path) >= 8 and path[1] == "f:replicatedJobs" and path[3:6] == ("f:template", "f:spec", "f:template") \
        and (path[6][2:], path[7][2:]) in KUEUE_MUTABLE


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def _diff(new: Any, old: Any, path: str) -> Iterator[str]:
    """Where the sent `new` is not held by the live `old` (see the module docstring)."""
    if (_empty(new) and _empty(old)) or new == {}:      # an empty map sent sets nothing in a merged map
        return
    if isinstance(new, dict) and new:
        for k, v in new.items():
            yield from _diff(v, old.get(k) if isinstance(old, dict) else None, f"{path}.{k}")
    elif isinstance(new, list) and new and isinstance(old, list) and len(new) == len(old):
        names = [_name(v) for v in new]
        if None not in names and sorted(map(str, names)) == sorted(str(_name(o)) for o in old) \
                and len(set(names)) == len(names):
            by_name = {_name(o): o for o in old}
            for item, name in zip(new, names, strict=True):
                yield from _diff(item, by_name[name], f"{path}[{name}]")
        else:
            for i, (item, was) in enumerate(zip(new, old, strict=True)):
                yield from _diff(item, was, f"{path}[{i}]")
    elif new != old:
        yield path


def _name(item: Any) -> Any:
    return item.get("name") if isinstance(item, dict) else None


def _dotted(path: FieldPath) -> str:
    """A fieldsV1 path as `replicatedJobs[worker].template...` (a keyed item by its key values)."""
    out = ""
    for seg in path:
        if seg.startswith("f:"):
            out += f".{seg[2:]}" if out else seg[2:]
        else:
            item = json.loads(seg[2:])
            out += "[" + ",".join(str(v) for v in item.values()) + "]" if isinstance(item, dict) else f"[{item}]"
    return out
