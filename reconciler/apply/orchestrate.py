"""What `fleet apply` does with a list of stack specs, independent of Pulumi.

1. Select: every stack, or the one `--stack NAME` names (an unknown name is a usage error listing them all).
2. Confirm: `--preview` changes nothing and needs no confirmation; otherwise `--yes`, or a terminal where a
   person answers the prompt. Without either (CI without `--yes`) apply refuses: exit 2.
3. Run layer by layer: every `infra` stack, then every `kueue` stack, each layer in stack-name order (the
   `jobs` specs are no stacks: `select` leaves them out, and `fleet apply` sends their objects afterwards by
   server-side apply, `jobs.py`, only when every stack succeeded). Within a layer a failed stack does not
   stop its siblings (clusters are independent), but after a layer with a failure no later layer is
   applied: Kueue quotas for node pools that failed to resize, or JobSets whose queues or nodes are
   missing, would be wrong. A preview runs every layer, since it changes nothing and the reviewer wants
   the whole picture.
4. Report one line per stack: the change counts Pulumi reported, the error, or why it was skipped.

Fleet keeps no state of its own between runs: Pulumi's state is the only record, every stack is created or
selected by name, and the programs are functions of the specs, so rerunning after a failure converges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..problems import UsageError
from .specs import StackSpec

LAYERS = ("infra", "kueue")
"""The Pulumi layers, in order. JobSets are not in any stack (see `jobs.py`)."""
COUNT_ORDER = ("create", "update", "replace", "delete", "same")


class StackFailed(Exception):
    """A per-stack failure (locked stack, provider error, bad config): reported on its line, others go on."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class Engine(Protocol):
    """What apply needs from Pulumi. Both calls raise StackFailed for a failure of that stack alone, and
    UsageError for an environment problem that stops everything (e.g. no Pulumi CLI)."""

    def preview(self, spec: Mapping[str, Any]) -> dict[str, int]:
        """The changes an update would make, by operation (`create`, `update`, `delete`, `same`, ...)."""
        ...

    def up(self, spec: Mapping[str, Any]) -> dict[str, int]:
        """Apply the stack; the changes made, by operation."""
        ...


class Ui(Protocol):
    def echo(self, line: str) -> None: ...
    def interactive(self) -> bool: ...
    def confirm(self, question: str) -> bool: ...


@dataclass(frozen=True)
class StackResult:
    stack: str
    layer: str
    status: str  # "ok" | "failed" | "skipped"
    changes: dict[str, int] = field(default_factory=dict)
    error: str = ""
    hint: str = ""


def select(specs: Sequence[StackSpec], stack: str | None) -> list[StackSpec]:
    """All Pulumi stacks (never the `jobs` specs), or the one named; sorted by layer order, then name."""
    stacks = [s for s in specs if s.layer in LAYERS]
    chosen = stacks
    if stack is not None:
        chosen = [s for s in stacks if s.name == stack]
        if not chosen:
            known = ", ".join(sorted(s.name for s in stacks))
            raise UsageError(f"no stack named {stack!r}", f"known stacks: {known}")
    return sorted(chosen, key=lambda s: (LAYERS.index(s.layer), s.name))


def confirm(specs: Sequence[StackSpec], *, preview: bool, yes: bool, ui: Ui) -> None:
    """Return if apply may go ahead; raise UsageError (exit 2) if it must not."""
    if preview or yes:
        return
    if not ui.interactive():
        raise UsageError("refusing to apply without --yes: stdin is not a terminal, so nobody can confirm",
                         "review the changes with `fleet apply --preview`, then run `fleet apply --yes`")
    names = ", ".join(s.name for s in specs)
    if not ui.confirm(f"Apply {len(specs)} stack(s) in this order: {names}?"):
        raise UsageError("nothing applied: not confirmed", "`fleet apply --preview` shows what would change")


def run(specs: Sequence[StackSpec], engine: Engine, *, preview: bool, ui: Ui) -> list[StackResult]:
    """Preview or apply `specs` (already selected and confirmed) layer by layer; one result per stack."""
    results: list[StackResult] = []
    failed_layer: tuple[str, list[str]] | None = None
    for layer in LAYERS:
        for spec in (s for s in specs if s.layer == layer):
            if failed_layer is not None:
                which, names = failed_layer
                result = StackResult(spec.name, layer, "skipped",
                                     error=f"not applied: the {which} layer failed ({', '.join(names)})")
            else:
                result = _one(spec, engine, preview)
            results.append(result)
            ui.echo(format_result(result, preview))
        failures = [r.stack for r in results if r.layer == layer and r.status == "failed"]
        if failures and not preview and failed_layer is None:
            failed_layer = (layer, failures)
    return results


def _one(spec: StackSpec, engine: Engine, preview: bool) -> StackResult:
    call: Callable[[Mapping[str, Any]], dict[str, int]] = engine.preview if preview else engine.up
    try:
        changes = call(spec.spec)
    except StackFailed as e:
        return StackResult(spec.name, spec.layer, "failed", error=e.message, hint=e.hint)
    return StackResult(spec.name, spec.layer, "ok", changes=dict(changes))


def format_changes(changes: Mapping[str, int], preview: bool) -> str:
    """`{"create": 2, "same": 5}` -> `created 2, updated 0, deleted 0, same 5` (`to create 2, ...` for a preview).

    Operations other than the usual four (replace, import, ...) are listed only when they happened.
    """
    verbs = {"create": "created", "update": "updated", "replace": "replaced", "delete": "deleted"}
    order = [op for op in COUNT_ORDER if op != "replace" or changes.get(op)]
    order += sorted(op for op in changes if op not in COUNT_ORDER and changes[op])
    parts = []
    for op in order:
        label = op if op == "same" else (f"to {op}" if preview else verbs.get(op, op))
        parts.append(f"{label} {changes.get(op, 0)}")
    return ", ".join(parts)


def format_result(result: StackResult, preview: bool) -> str:
    if result.status == "ok":
        return f"{result.stack}: {'preview' if preview else 'ok'}: {format_changes(result.changes, preview)}"
    if result.status == "skipped":
        return f"{result.stack}: skipped: {result.error}"
    line = f"{result.stack}: FAILED: {result.error}"
    return line + (f"\n  hint: {result.hint}" if result.hint else "")


def changed(results: Sequence[StackResult]) -> list[str]:
    """The stacks whose preview (or update) has any operation other than `same`: for a refreshed preview,
    the stacks whose live state drifted from git (or that git changed and nobody applied yet)."""
    return [r.stack for r in results if r.status == "ok" and any(n for op, n in r.changes.items() if op != "same")]


def summary(results: Sequence[StackResult], preview: bool) -> str:
    failed = [r.stack for r in results if r.status == "failed"]
    skipped = [r.stack for r in results if r.status == "skipped"]
    what = "previewed" if preview else "applied"
    done = len(results) - len(failed) - len(skipped)
    text = f"{done} of {len(results)} stack(s) {what}"
    if failed:
        text += f"; failed: {', '.join(failed)}"
    if skipped:
        text += f"; skipped: {', '.join(skipped)}"
    if failed and not preview:
        text += ". Fix the errors and run `fleet apply` again: it picks up from Pulumi's state and converges"
    return text
