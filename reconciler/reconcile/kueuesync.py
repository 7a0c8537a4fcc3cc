"""Step 5 of the decision (decide.py): which clusters' Kueue stacks to update. Pure.

A cluster gets an update when what it should hold differs from what the loop last applied there (its memory):
- `quotas`: each team's part of the cluster (nominal, borrowing and lending limits, spot part) and, where the
  caller gives them (`flavors`: step.py, from `render.quota_digests`), a digest of each part's split over the
  cluster's flavors, so a split that moves between flavors of one cluster (work moved between its pools) is
  applied too. These follow the plan, so they move between merges.
- `kueue`: where the caller gives them (`objects`: the reconcile loop, from `render.kueue_config`), a digest of
  each other Kueue object of the cluster (namespaces, ResourceFlavors, Topologies, Cohorts, priority classes,
  admission checks, each team's ClusterQueue settings without its quotas, LocalQueues), of each flavor's terms
  in the queues (cpu, memory and EFA quotas, admission check) and of the stack's settings. Git alone decides
  them; `fleet apply` applies them on merge, and when that apply failed or never ran, the loop applies them
  once and, if that fails too, again in the next cycle. The simulator gives none: its repository never changes.
  With them, the memory forgets a cluster git no longer has, so one that comes back is applied afresh.

An update applies the cluster's whole Kueue stack (kube_act.py), so one action covers both; its reason names
what changed. Memories of older versions lack the flavor digests or the objects: such a cluster is applied
once, since the version that wrote it did not track them, so its queues may be stale (where they are not, the
stack's update changes nothing); the reason says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..plan.types import Plan
from .model import Action, LoopMemory

_FLAVORS = " flavors "      # in a digest line: `<team> <accelerator> flavors <digest>`
NAMED = 3                   # changes a reason names before "..."


def kueue_updates(plan: Plan, mem: LoopMemory, reachable: set[str], flavors: Mapping[str, list[str]],
                  objects: Mapping[str, list[str]] | None = None,
                  ) -> tuple[list[Action], dict[str, list[str]], dict[str, list[str]]]:
    """The Kueue actions, and the memory's `quotas` and `kueue` as if every one of them succeeds."""
    planned: dict[str, list[str]] = {}
    for q in plan.quotas:
        planned.setdefault(q.cluster, []).append(
            f"{q.team} {q.accelerator} nominal={q.nominal} borrowing={q.borrowing_limit} lending={q.lending_limit}"
            + (f" spot={q.spot}" if q.spot else ""))
    for cluster, lines in flavors.items():
        planned.setdefault(cluster, []).extend(lines)
    quotas, kueue = dict(mem.quotas), dict(mem.kueue)
    if objects is not None:
        for gone in (set(quotas) | set(kueue)) - set(objects):   # no longer in git: if it comes back, applied afresh
            quotas.pop(gone, None)
            kueue.pop(gone, None)
    actions = []
    for cluster in sorted(set(planned) | set(objects or {})):
        lines = sorted(planned.get(cluster, []))
        objs = sorted(objects[cluster]) if objects is not None and cluster in objects else None
        before, objs_before = mem.quotas.get(cluster, []), mem.kueue.get(cluster, [])
        if cluster not in reachable or (before == lines and objs in (None, objs_before)):
            continue
        quotas[cluster] = lines
        if objs is not None:
            kueue[cluster] = objs
        actions.append(Action(kind="kueue", cluster=cluster, reason=_why(before, lines, objs_before, objs)))
    return actions, quotas, kueue


def _why(before: list[str], lines: list[str], objs_before: list[str], objs: list[str] | None) -> str:
    if not before and not objs_before:
        return ("quotas" if lines else "Kueue objects") + " not applied yet by this reconciler"
    said: list[str] = []
    if before == lines:
        pass
    elif before and not any(_FLAVORS in x for x in before) and before == [x for x in lines if _FLAVORS not in x]:
        said.append("the quotas' split over the cluster's flavors is tracked now (an earlier version did not "
                    "re-apply it when it moved): applied once")
    else:
        parts = _changes(before, lines)
        said.append(f"{len(parts)} quota(s) changed: " + _named(parts))
    if objs is not None and objs != objs_before:
        if objs_before:
            changed = _object_changes(objs_before, objs)
            said.append(f"{len(changed)} other Kueue object(s) changed in git: " + _named(changed))
        else:
            said.append("the cluster's other Kueue objects are tracked now (an earlier version left them to "
                        "`fleet apply` on merge, and did not apply them again when that failed): applied once")
    return "; ".join(said)


def _named(said: list[str]) -> str:
    return "; ".join(said[:NAMED]) + (" ..." if len(said) > NAMED else "")


def _changes(before: list[str], lines: list[str]) -> list[str]:
    """What the reason names: the parts that changed, the splits over flavors that moved while their part did
    not (a digest known before: an older memory's missing digests are no move), the teams gone from here."""
    def team_acc(line: str) -> str:
        return line.split(" nominal=")[0].split(_FLAVORS)[0]

    new = sorted(set(lines) - set(before))
    parts = [x for x in new if _FLAVORS not in x]
    split_before = {team_acc(x) for x in before if _FLAVORS in x}
    splits = [f"{team_acc(x)} split over the cluster's flavors moved" if team_acc(x) in split_before
              else f"{team_acc(x)} now has quota in the cluster's flavors"
              for x in new if _FLAVORS in x and team_acc(x) not in {team_acc(y) for y in parts}
              and (split_before or team_acc(x) not in {team_acc(y) for y in before})]
    gone = sorted({team_acc(x) for x in before} - {team_acc(x) for x in lines})
    said = [*parts, *splits, *(f"{x} no longer has quota here" for x in gone)]
    return said or ["the quotas' split over the cluster's flavors changed"]    # a flavor's digest left alone


def _object_changes(before: list[str], lines: list[str]) -> list[str]:
    """`<Kind> <name> changed|added|removed` per object whose digest line (`<Kind> <name> <digest>`) differs."""
    def by_object(xs: list[str]) -> dict[str, str]:
        return {x.rsplit(" ", 1)[0]: x.rsplit(" ", 1)[-1] for x in xs}

    old, new = by_object(before), by_object(lines)
    return [f"{k} {'added' if k not in old else 'removed' if k not in new else 'changed'}"
            for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
