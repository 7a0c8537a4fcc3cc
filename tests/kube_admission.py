"""What a real cluster refuses in an update of an object it stores, for `kube_api.py`: the CRD's transition rules
and the JobSet validating webhook, judged on the object as the update would leave it (the server-side apply's
merge, or a PUT's body) against the stored one. Creates are not judged here.

- Transition rules (apiextensions-apiserver's CEL validation, before any admission webhook): every
  `x-kubernetes-validations` rule `self == oldSelf` of the kind's real CRD schema (kube_keys.py; for a JobSet:
  `spec.failurePolicy`, `successPolicy`, `startupPolicy`, `network`, `volumeClaimPolicies` and a replicatedJob's
  `dependsOn`), evaluated only where the old and the new object both have the field (a list-map's items paired by
  their keys, as the API server correlates them; an atomic list's items are not). The API server answers HTTP 422
  `Invalid`, e.g. `JobSet.jobset.x-k8s.io "a" is invalid: spec.failurePolicy: Invalid value: "object": Value is
  immutable` (the rule's message; several errors in brackets), with `details.causes`.
- The JobSet webhook (`vjobset.kb.io`; kubernetes-sigs/jobset, pkg/webhooks/jobset_webhook.go `ValidateUpdate`):
  `spec.replicatedJobs` and `spec.managedBy` are immutable (`ValidateImmutableField`: semantic equality, where an
  absent field, null, an empty map and an empty list are equal). Only when the stored or the new object has
  `spec.suspend: true` (queued, or being suspended by Kueue) are the fields Kueue writes on admission left out of
  the comparison: in each replicatedJob's pod template (paired by index with the stored one, as the webhook
  does) `metadata.annotations`, `metadata.labels`, `spec.nodeSelector`, `spec.tolerations` and
  `spec.schedulingGates`. So a running JobSet's pods cannot change at all (not its image, not its size), and a
  queued one's only in those fields. A webhook's error is no API status, so controller-runtime answers `Denied`
  (403 Forbidden) and the API server prefixes the webhook's name: HTTP 403 `Forbidden`, `admission webhook
  "vjobset.kb.io" denied the request: spec.replicatedJobs: Invalid value: []v1alpha2.ReplicatedJob{...}: field is
  immutable` (the real value is the Go `%#v` dump of the whole new list; here it names its items only).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import kube_keys

Refusal = tuple[int, str, str, dict[str, Any] | None]
"""(HTTP code, Status reason, Status message, Status details) of a refused update."""
WEBHOOK = "vjobset.kb.io"
KUEUE_MUTABLE = (("metadata", "annotations"), ("metadata", "labels"), ("spec", "nodeSelector"),
                 ("spec", "tolerations"), ("spec", "schedulingGates"))
"""The pod template fields of a replicatedJob the webhook lets change while the JobSet is (or becomes) suspended."""


def refuse_update(plural: str, kind: str, group: str, name: str, old: dict[str, Any],
                  new: dict[str, Any]) -> Refusal | None:
    """Why the cluster refuses to turn the stored `old` into `new`, or None when it takes the update."""
    schema = kube_keys.root(plural) if plural in kube_keys.CRD_FILES else None
    errors = _transitions(schema, old, new, "")
    if errors:
        causes = [{"reason": "FieldValueInvalid", "message": f'Invalid value: "{t}": {m}', "field": p}
                  for p, t, m in errors]
        text = [f'{c["field"]}: {c["message"]}' for c in causes]
        message = f'{kind}.{group} "{name}" is invalid: {_aggregate(text)}'
        return 422, "Invalid", message, {"name": name, "group": group, "kind": kind, "causes": causes}
    if plural == "jobsets" and (denied := _jobset_webhook(old, new)):
        return 403, "Forbidden", f'admission webhook "{WEBHOOK}" denied the request: {_aggregate(denied)}', None
    return None


def _aggregate(errors: list[str]) -> str:
    """An ErrorList's aggregate: one error as it is, several in brackets."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def _transitions(schema: dict[str, Any] | None, old: Any, new: Any, path: str) -> list[tuple[str, str, str]]:
    """(field path, schema type, message) of each `self == oldSelf` rule `new` breaks (old and new both set)."""
    if schema is None or old is None or new is None:
        return []
    out = [(path, str(schema.get("type", "object")), str(rule.get("message") or "failed rule: self == oldSelf"))
           for rule in schema.get("x-kubernetes-validations") or ()
           if rule.get("rule") == "self == oldSelf" and old != new]
    if isinstance(new, dict) and isinstance(old, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in new and key in old:
                out += _transitions(sub, old[key], new[key], f"{path}.{key}" if path else key)
    elif isinstance(new, list) and isinstance(old, list) and (keys := kube_keys.list_keys(schema)):
        for i, item in enumerate(new):
            was = next((o for o in old if isinstance(item, dict) and isinstance(o, dict)
                        and all(o.get(k) == item.get(k) for k in keys)), None)
            out += _transitions(schema.get("items"), was, item, f"{path}[{i}]")
    return out


def _jobset_webhook(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The webhook's errors for an update of a JobSet (see the module docstring)."""
    before, after = old.get("spec") or {}, new.get("spec") or {}
    jobs = copy.deepcopy(after.get("replicatedJobs"))
    was = before.get("replicatedJobs")
    if (before.get("suspend") is True or after.get("suspend") is True) and isinstance(jobs, list):
        for i, rj in enumerate(jobs):
            if isinstance(was, list) and i < len(was) and isinstance(rj, dict):
                for holder, key in KUEUE_MUTABLE:
                    _mask(rj, was[i], holder, key)
    errors = []
    if not _same(jobs, was):
        items = ", ".join(f'v1alpha2.ReplicatedJob{{Name:"{rj.get("name", "")}", ...}}' for rj in jobs
                          if isinstance(rj, dict)) if isinstance(jobs, list) else ""
        shown = f"[]v1alpha2.ReplicatedJob{{{items}}}" if isinstance(jobs, list) else "[]v1alpha2.ReplicatedJob(nil)"
        errors.append(f"spec.replicatedJobs: Invalid value: {shown}: field is immutable")
    if not _same(after.get("managedBy"), before.get("managedBy")):
        errors.append(f"spec.managedBy: Invalid value: {json.dumps(after.get('managedBy') or 'null')}: field is "
                      "immutable")
    return errors


def _mask(new_rj: dict[str, Any], old_rj: Any, holder: str, key: str) -> None:
    """The new replicatedJob's pod template field takes the stored one's value (or none), as the webhook munges."""
    def template(rj: Any, create: bool) -> dict[str, Any] | None:
        cur = rj
        for step in ("template", "spec", "template", holder):
            if not isinstance(cur, dict):
                return None
            if create and not isinstance(cur.get(step), dict):
                cur[step] = {}
            cur = cur.get(step)
        return cur if isinstance(cur, dict) else None

    was = template(old_rj, False)
    value = was.get(key) if was is not None else None
    target = template(new_rj, value is not None)
    if target is not None:
        target.pop(key, None)
        if value is not None:
            target[key] = copy.deepcopy(value)


def _same(a: Any, b: Any) -> bool:
    """apimachinery's semantic equality on decoded objects: absent, null, {} and [] are one (nil and empty)."""
    if a in (None, {}, []) and b in (None, {}, []):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return all(_same(a.get(k), b.get(k)) for k in a.keys() | b.keys())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
