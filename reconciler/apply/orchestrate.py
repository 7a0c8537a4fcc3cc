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

Before any update, every `infra` stack is previewed, and when a preview would replace, re-create the nodes of,
or delete a node pool that no `--allow-replace CLUSTER/POOL` names (pool_guard.py: the plan never models a
replacement, and it stops every job on the pool), nothing is applied: the refused stacks fail with the pools,
operations and forcing properties, the rest are skipped. A preview (`--preview`) lists those pools under its
stack's line.

Fleet keeps no state of its own between runs: Pulumi's state is the only record, every stack is created or
selected by name, and the programs are functions of the specs, so rerunning after a failure converges.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..problems import UsageError
from .pool_guard import Disruption, Preview, disruptions, refusal
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

    def preview_steps(self, spec: Mapping[str, Any]) -> Preview:
        """`preview`'s counts, with the step of each resource (op, urn, type, the keys forcing a replacement)."""
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
    disruptions: tuple[Disruption, ...] = ()   # the pools the update replaces or deletes (infra stacks)


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


def run(specs: Sequence[StackSpec], engine: Engine, *, preview: bool, ui: Ui,
        allow: Collection[str] = frozenset()) -> list[StackResult]:
    """Preview or apply `specs` (already selected and confirmed) layer by layer; one result per stack. An apply
    first previews every infra stack and applies nothing when one replaces, rolls or deletes a pool `allow` does
    not name (`CLUSTER/POOL`); an allowance that names no pool the previews disrupt is said, not used."""
    seen: set[str] = set()
    checked = {} if preview else _check_pools(specs, engine, allow, seen)
    for ref in sorted(set(allow) - seen) if not preview else ():
        ui.echo(f"note: --allow-replace {ref} names no node pool this apply would replace, re-create or delete: it "
                "allows nothing (check the name against `fleet apply --preview`)")
    held = sorted(r.stack for r in checked.values() if r.status == "failed" and r.disruptions)
    results: list[StackResult] = []
    failed_layer: tuple[str, list[str]] | None = None
    for layer in LAYERS:
        for spec in (s for s in specs if s.layer == layer):
            if held:
                why = f"not applied: node pool replacement refused ({', '.join(held)})"
                result = checked[spec.name] if spec.name in held else StackResult(spec.name, layer, "skipped",
                                                                                  error=why)
            elif failed_layer is not None:
                which, names = failed_layer
                result = StackResult(spec.name, layer, "skipped",
                                     error=f"not applied: the {which} layer failed ({', '.join(names)})")
            elif spec.name in checked and checked[spec.name].status == "failed":
                result = checked[spec.name]
            else:
                result = _one(spec, engine, preview)
            results.append(result)
            ui.echo(format_result(result, preview))
        failures = [r.stack for r in results if r.layer == layer and r.status == "failed"]
        if failures and not preview and failed_layer is None:
            failed_layer = (layer, failures)
    return results


def _check_pools(specs: Sequence[StackSpec], engine: Engine, allow: Collection[str],
                 seen: set[str]) -> dict[str, StackResult]:
    """Preview each infra stack: a failed result for each whose preview fails, or replaces or deletes a pool
    `allow` does not name (its `disruptions` those pools); an ok one for the rest. `seen` gains every pool the
    previews replace, re-create or delete."""
    out: dict[str, StackResult] = {}
    for spec in (s for s in specs if s.layer == "infra"):
        try:
            found = _preview_infra(spec, engine)
        except StackFailed as e:
            out[spec.name] = StackResult(spec.name, spec.layer, "failed", error=e.message, hint=e.hint)
            continue
        seen.update(d.ref for d in found.disruptions)
        bad = tuple(d for d in found.disruptions if d.ref not in allow)
        if bad:
            message, hint = refusal(spec.name, bad)
            found = StackResult(spec.name, spec.layer, "failed", error=message, hint=hint, disruptions=bad)
        out[spec.name] = found
    return out


def _preview_infra(spec: StackSpec, engine: Engine) -> StackResult:
    got = engine.preview_steps(spec.spec)
    return StackResult(spec.name, spec.layer, "ok", changes=dict(got.counts),
                       disruptions=tuple(disruptions(spec.spec, got.steps)))


def _one(spec: StackSpec, engine: Engine, preview: bool) -> StackResult:
    try:
        if preview and spec.layer == "infra":
            return _preview_infra(spec, engine)
        changes = engine.preview(spec.spec) if preview else engine.up(spec.spec)
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
        line = f"{result.stack}: {'preview' if preview else 'ok'}: {format_changes(result.changes, preview)}"
        return "".join([line, *(f"\n  !! {d.describe()}" for d in result.disruptions)])
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
    pools = [d.ref for r in results for d in r.disruptions]
    if pools and preview:
        text += (f"; {len(pools)} node pool(s) replaced, re-created or deleted: {', '.join(pools)} (`fleet apply` "
                 "refuses unless `--allow-replace CLUSTER/POOL` names each one)")
    elif pools:
        text += (f"; nothing applied: {len(pools)} node pool(s) would be replaced, re-created or deleted: "
                 f"{', '.join(pools)}")
    if failed and not preview and not pools:
        text += ". Fix the errors and run `fleet apply` again: it picks up from Pulumi's state and converges"
    return text
