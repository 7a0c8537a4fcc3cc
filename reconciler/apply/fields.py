"""Field paths as the API server's `managedFields` (fieldsV1) spell them, for server-side apply's decisions in
`jobs.py`: which fields each manager owns, and the leaves of a manifest under the same names.

A list that the server merges by keys (a list-map: `containers` and `env` by `name`, a container's `ports` by
`containerPort` and `protocol`, `volumeMounts` by `mountPath`) has one path per item. Which lists those are is
learned from the live object's own `managedFields`, not guessed from the items: keying every named list by
`name` made a service (its port is named) or a job with a volume never "unchanged" on a real API server, so
every apply re-sent it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

FieldPath = tuple[str, ...]

Keys = Mapping[FieldPath, tuple[str, ...]]
"""Where the API server merges a list by keys: the list's path -> its key fields (`("mountPath",)` for a
container's `volumeMounts`, `("containerPort", "protocol")` for its `ports`), or `()` for a set of values."""


def _segment(kind: str, value: Any) -> str:
    """A fieldsV1 segment in one spelling (keys sorted), so a path Fleet builds equals the server's."""
    return kind + json.dumps(value, separators=(",", ":"), sort_keys=True)


def learned_keys(paths: set[FieldPath]) -> dict[FieldPath, tuple[str, ...]]:
    """The keys each keyed list is merged by, as the server's own `managedFields` show them (`k:{...}` and `v:`
    segments), so no schema is needed here: a list the server keeps atomic, or one it has not seen, is a field."""
    out: dict[FieldPath, tuple[str, ...]] = {}
    for path in paths:
        for i, seg in enumerate(path):
            if seg[:2] in ("k:", "v:") and path[:i] not in out:
                out[path[:i]] = tuple(json.loads(seg[2:])) if seg.startswith("k:") else ()
    return out


def leaves(obj: Any, keys: Keys, prefix: FieldPath = ()) -> Iterator[tuple[FieldPath, Any]]:
    """Leaf fields of a manifest as fieldsV1 paths (`("f:spec", "f:suspend")`); a list the server merges by
    keys (`keys`) gives one path per item (`k:{"name":"workers"}`, `k:{"mountPath":"/data"}`, `v:"x"`), as
    JobSet's `replicatedJobs` and a Pod's `containers`, `env`, `ports` and `volumeMounts` are; other lists are
    one field."""
    if isinstance(obj, dict) and obj:
        for k, v in obj.items():
            if prefix == ("f:metadata",) and k in ("managedFields", "resourceVersion", "uid", "generation",
                                                    "creationTimestamp"):
                continue
            if not prefix and k == "status":
                continue
            yield from leaves(v, keys, (*prefix, f"f:{k}"))
    elif isinstance(obj, list) and obj and prefix in keys and _keyed(obj, keys[prefix]):
        names = keys[prefix]
        for item in obj:
            if names:
                yield from leaves(item, keys, (*prefix, _segment("k:", {n: item[n] for n in names})))
            else:
                yield (*prefix, _segment("v:", item)), item
    elif prefix:
        yield prefix, obj


def _keyed(items: list[Any], names: tuple[str, ...]) -> bool:
    """Every item carries the keys (a set's items are its keys), so each has its own path."""
    return all(isinstance(v, dict) and all(n in v for n in names) for v in items) if names else True


def owned(live: Mapping[str, Any], manager: str) -> dict[str, set[FieldPath]]:
    """Per field manager, the leaf fields it owns (from `metadata.managedFields`); `manager`'s Apply entry
    only, for it, since an Update by the same name (kubectl edit) is another owner."""
    out: dict[str, set[FieldPath]] = {}
    for entry in (live.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, dict):
            continue
        who = str(entry.get("manager", ""))
        if who == manager and entry.get("operation", "Apply") != "Apply":
            who = f"{manager} (Update)"
        out.setdefault(who, set()).update(_fields_v1_leaves(entry.get("fieldsV1") or {}))
    return out


def _fields_v1_leaves(tree: Mapping[str, Any], prefix: FieldPath = ()) -> Iterator[FieldPath]:
    children = [k for k in tree if k != "."]
    if not children and prefix:
        yield prefix
    for k in children:
        sub = tree[k]
        seg = _segment(k[:2], json.loads(k[2:])) if k[:2] in ("k:", "v:") and _json(k[2:]) else k
        yield from _fields_v1_leaves(sub if isinstance(sub, dict) else {}, (*prefix, seg))


def _json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def covers(owner_paths: set[FieldPath], path: FieldPath) -> bool:
    """`path` or one of its parents is among `owner_paths` (an owned atomic list covers what is inside)."""
    return any(path[:i] in owner_paths for i in range(1, len(path) + 1))


def without(obj: Any, path: FieldPath) -> None:
    """Remove one leaf (by fieldsV1 path) from a manifest, in place."""
    *parents, last = path
    cur = obj
    for seg in parents:
        cur = _step(cur, seg)
        if cur is None:
            return
    if isinstance(cur, dict) and last.startswith("f:"):
        cur.pop(last[2:], None)
    elif isinstance(cur, list) and last.startswith("v:"):
        cur[:] = [v for v in cur if _segment("v:", v) != last]


def _step(cur: Any, seg: str) -> Any:
    if seg.startswith("k:"):
        want = json.loads(seg[2:])
        return next((v for v in cur if isinstance(v, dict) and all(v.get(k) == x for k, x in want.items())),
                    None) if isinstance(cur, list) else None
    return cur.get(seg[2:]) if isinstance(cur, dict) else None
