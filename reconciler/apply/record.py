"""Plan files apply reads and writes: the reviewed plan (`--reviewed FILE`) and the record of the last plan
applied. EFFECT (file system).

The record is `<repo>/.fleet/last-applied-plan.json` (beside the local Pulumi file backend `.fleet/pulumi`,
git-ignored with it): the `fleet plan --format json` document of the last `fleet apply` whose stacks and
jobs all succeeded, written atomically through `safeio` only then. Without cluster access, apply plans
against it (jobs stay where it put them) and takes the jobs it placed as running. In CI, where every run
starts from a fresh checkout, apply.yml carries it from one apply run to the next as an artifact.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..plan.types import Plan, Review, plan_from_dict, review_from_dict
from ..problems import RejectedError, UsageError
from ..safeio import write_file

LAST_APPLIED = Path(".fleet/last-applied-plan.json")


def read_plan(path: Path, what: str, hint: str) -> Plan:
    """A plan JSON document, or a located error (file, line or field) with `hint`."""
    return read_plan_and_review(path, what, hint)[0]


def read_plan_and_review(path: Path, what: str, hint: str) -> tuple[Plan, Review]:
    """A plan JSON document and its `review` object (empty when it has none), or a located error."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {what} {path}: {getattr(e, 'strerror', None) or e}", hint) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise RejectedError(f"{path}:{e.lineno}:{e.colno}: {what} is not JSON: {e.msg}", hint) from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise RejectedError(f"{path}: field `version`: {what} must be a `fleet plan --format json` document "
                            "(version 1)", hint)
    try:
        return plan_from_dict(doc), review_from_dict(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise RejectedError(f"{path}: {what} lacks or mistypes a field ({type(e).__name__}: {e})", hint) from None


def read_last_applied(repo: Path) -> Plan | None:
    """The record of the last successful apply, or None when there is none yet."""
    path = repo / LAST_APPLIED
    if not path.exists():
        return None
    return read_plan(path, "the last applied plan", f"it is Fleet's own record: remove {LAST_APPLIED} to plan "
                     "without it (then only observed clusters tell what runs)")


def write_last_applied(repo: Path, plan: Plan) -> Path:
    path = repo / LAST_APPLIED
    write_file(path, plan.to_json())
    return path
