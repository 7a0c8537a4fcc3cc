"""After acting: the loop's memory when some of the cycle's actions did not get done. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from .model import Action, LoopMemory


def settle(before: LoopMemory, decided: LoopMemory, failed: Iterable[Action], *,
           refused: Iterable[tuple[Action, str]] = ()) -> LoopMemory:
    """The memory for the next cycle when some actions failed: what they would have recorded is taken back
    (a failed start leaves no fence, a failed Kueue update is tried again next cycle). A resize the actuator
    tried and refused (`refused`: the action and its failure) stays asked, with the failure: it is asked again
    after the backoff (`ask_again_at`), not in every cycle; one not tried (skipped, dry run) is taken back. A group
    whose member's stop failed (groups.py) is remembered as before it: still in part, since when it was."""
    moved, services, quotas, kueue = dict(decided.moved), dict(decided.services), dict(decided.quotas), \
        dict(decided.kueue)
    targets, groups = dict(decided.targets), dict(decided.groups)
    refusals = {f"{a.cluster}/{a.pool}": why for a, why in refused if a.kind == "resize"}
    for a in failed:
        if a.job and a.kind in ("move", "start"):
            if a.job in before.moved:
                moved[a.job] = before.moved[a.job]
            else:
                moved.pop(a.job, None)
            if a.service:
                if a.job in before.services:
                    services[a.job] = before.services[a.job]
                else:
                    services.pop(a.job, None)
        for g, tried in decided.groups.items():
            if a.kind == "stop" and a.job in tried.stopped and g in before.groups:
                groups[g] = before.groups[g]
        if a.kind == "resize" and f"{a.cluster}/{a.pool}" not in refusals:
            key = f"{a.cluster}/{a.pool}"
            if key in before.targets:
                targets[key] = before.targets[key]
            else:
                targets.pop(key, None)
        if a.kind == "kueue":
            for now_, then in ((quotas, before.quotas), (kueue, before.kueue)):
                if a.cluster in then:
                    now_[a.cluster] = then[a.cluster]
                else:
                    now_.pop(a.cluster, None)
    for key, why in refusals.items():
        if key in targets:
            targets[key] = targets[key].model_copy(update={"failed": why or "the actuator gave no reason"})
    return decided.model_copy(update={"moved": moved, "services": services, "quotas": quotas, "kueue": kueue,
                                      "targets": targets, "groups": groups})
