"""Checkpoint-aware eviction in the reconcile loop (issue 22; plan/victims.py decides it). Pure.

A preemption the plan made with `after_minutes` (the victim's next checkpoint falls within
`preemption.checkpoint_window_minutes`) is not acted on at once: the victim keeps running, and the preemptor is
not started (its units are the victim's until then), until the first cycle after the victim's checkpoint. A
cycle stops it when it checkpointed less than one loop interval ago, or since the last cycle that held it, while
every plan since has preempted it and the copy held still runs (it then loses at most the minutes since;
`LoopMemory.held`, `still_held`), so the wait never passes the checkpoint by more than one cycle that can act,
whatever the cycles' spacing (a `--once` run every 10 minutes; before 2026-12-07 only within one interval, which
such runs could miss for good, holding the victim and its preemptor), and a cycle between that decided the stop
without carrying it out (a dry run, a paused loop, a refused stop) or could not read the victim's cluster does not
make the next hold it to a further checkpoint (before the thirty-eighth session, 2026-12-07, only the previous
cycle's holds were kept). A victim whose running time is not observed, or whose job states no checkpoint interval,
is stopped at once.

A preemption's victims stop together where that costs nothing: while one victim of a preemptor runs to its
checkpoint, its fellow victims that lose nothing by running on (a service that runs, `serving`; a job that
checkpoints continuously, `checkpoint_minutes: 0`) run on too, and stop with it. Stopped at once, they were
stopped for nothing whenever the next plan no longer made the preemption: on the Alibaba replay the four
stopped at once (three services among them) ended their team's borrowing, so the rule that let the preemptor
take a borrower's units no longer held, the two held victims were kept, and the preemptor waited 46 hours
(docs/benchmarks.md, "a preemption abandoned half-done"). Run on, the next plan sees what it saw. The plan makes
the same call (plan/victims.py `runs_on`) and says so: such a preemption carries its fellow's `after_minutes`. The
loop runs on only the fellows the plan so marks: one whose unit the preemptor shares the plan stops at once, and
counts its quota and spend freed (before the forty-first session, 2026-12-07, the loop ran it on regardless, on
what the plan had given to other work). Once no fellow is held, it stops, and its reason says why (before: that
its checkpoint interval was not known, and that it kept running).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime

from ..checkpoint import minutes_at_risk
from ..plan.preempt import UNTIL, WITH
from ..plan.types import Preemption
from .model import ACTIVE, Copy, JobFacts, LoopMemory


def deferred(preemptions: Iterable[Preemption], found: Mapping[str, list[Copy]], facts: Mapping[str, JobFacts],
             interval_minutes: float, now: datetime, serving: Collection[str] = (),
             memory: LoopMemory | None = None) -> dict[str, str]:
    """Victim or preemptor job -> why it is left as it is this cycle (module docstring). `serving`: the jobs whose
    services run on a reachable cluster; `memory`: the last cycle that held each victim."""
    out: dict[str, str] = {}
    preemptions = list(preemptions)
    last_held = memory.held if memory is not None else {}
    last: dict[str, tuple[float, str]] = {}       # preemptor -> (minutes, victim) of its last victim held
    for pre in preemptions:
        f = facts.get(pre.job)
        step = f.checkpoint_minutes if f is not None else None
        running = _running(found, pre.job)
        if pre.after_minutes is None or not step or not running:
            continue
        since_start = running[0].running_since
        assert since_start is not None
        ran = (now - since_start).total_seconds() / 60
        since = minutes_at_risk(ran, step)
        held_at = last_held.get(pre.job)
        spacing = (now - held_at).total_seconds() / 60 if held_at is not None and since_start < held_at else 0.0
        if since < max(interval_minutes, spacing):
            continue    # it checkpointed within the last interval, or since the last cycle that held this copy: stopped
        left = step - since
        out[pre.job] = (f"{pre.job} keeps running until its next checkpoint in {left:.0f} min, then it is stopped "
                        f"for {pre.by} (checkpoint-aware preemption)")
        last[pre.by] = max(last.get(pre.by, (left, pre.job)), (left, pre.job))
    for by, (left, job) in last.items():     # it starts once the last of its held victims stopped
        out.setdefault(by, f"{by} starts once {job} reached its checkpoint, in {left:.0f} min (its units are "
                           "reserved for it)")
    for pre in preemptions:
        if pre.by in last and pre.job not in out and pre.after_minutes is not None and _fellow(
                pre.job, facts.get(pre.job), found, serving):   # the plan stopped it at once (it shares a unit its
            out[pre.job] = (f"{pre.job} keeps running while {pre.by}'s other victims run to their checkpoints, and "
                            "stops with them (it loses nothing by running on)")     # preemptor takes): so does the loop
    return out


def released(preemptions: Iterable[Preemption], found: Mapping[str, list[Copy]], facts: Mapping[str, JobFacts],
             serving: Collection[str], waits: Mapping[str, str]) -> dict[str, str]:
    """Victim -> why the loop stops it now although its plan held it (`after_minutes`: to its checkpoint, or as a
    fellow of one so held), for each such victim `deferred` (`waits`) did not hold this cycle: what the loop saw,
    which its stop (or its move, where the plan places it again) says instead of the plan's "it keeps running
    until ..." (before the forty-first session, 2026-12-07, a fellow's stop said its checkpoint interval was not
    known, and a move said the victim kept running)."""
    out: dict[str, str] = {}
    for pre in preemptions:
        if pre.after_minutes is None or pre.job in waits:
            continue
        f = facts.get(pre.job)
        if f is not None and f.checkpoint_minutes and _running(found, pre.job):
            out[pre.job] = "it reached its checkpoint"
        elif _fellow(pre.job, f, found, serving):
            out[pre.job] = f"none of {pre.by}'s victims is held to its checkpoint any longer"
        elif f is None or (f.checkpoint_minutes is None and f.kind != "inference"):
            out[pre.job] = "its checkpoint interval is not known to the loop"
        elif f.kind == "inference" and f.checkpoint_minutes is None:
            out[pre.job] = "its service runs no replica on a reachable cluster"
        elif _runs(found, pre.job):
            out[pre.job] = "its running time is not known to the loop"     # running, with no start time read
        else:
            out[pre.job] = "it is not running now, so it waits for no checkpoint"
    return out


def said(pre: Preemption) -> str:
    """A preemption's reason naming its preemptor once: the plan's own ("preempted by X (priority N): why"), or
    one with the preemptor put before it (the loop's stop and apply's deletion say it so)."""
    return pre.reason if pre.reason.startswith(f"preempted by {pre.by} (") else f"preempted by {pre.by}: {pre.reason}"


def as_now(reason: str, now: str, append: bool = True) -> str:
    """A plan's reason for a victim it held (to its checkpoint, or beside one so held), as the loop stops or moves
    it now: its part saying that it keeps running (`preempt.UNTIL`, `preempt.WITH`) becomes `now`; `append`: a
    reason without such a part gets `now` at its end."""
    for mark in (UNTIL, WITH):
        if (i := reason.find(mark)) >= 0:
            j = reason.find(";", i + len(mark))
            return f"{reason[:i]}; {now}{reason[j:] if j >= 0 else ''}"
    return f"{reason}; {now}" if append else reason


def _fellow(job: str, f: JobFacts | None, found: Mapping[str, list[Copy]], serving: Collection[str]) -> bool:
    """A victim that loses nothing by running on: a service that runs (`serving`), or a job that checkpoints
    continuously and runs; one with a checkpoint interval that runs is held to its own checkpoint instead."""
    if f is None or (f.checkpoint_minutes and _running(found, job)):
        return False
    return (f.kind == "inference" and job in serving) or (f.checkpoint_minutes == 0 and (
        bool(_running(found, job)) or _runs(found, job)))


def _runs(found: Mapping[str, list[Copy]], job: str) -> bool:
    """Whether a copy of `job` runs where the loop sees it, read with or without a start time: a job that
    checkpoints continuously loses nothing by running on whatever its running time (before the forty-second
    session one whose start time was not read was stopped at once, told its running time was not known)."""
    return any(c.phase == "running" and c.reachable and not c.deleting for c in found.get(job, ()))


def still_held(preemptions: Iterable[Preemption], waits: Mapping[str, str], memory: LoopMemory,
               now: datetime) -> dict[str, datetime]:
    """`LoopMemory.held` after this cycle: each victim it left running for its checkpoint, at `now`; each victim an
    earlier cycle held, at that cycle's time, while this cycle's plan still preempts it (this cycle decided its stop,
    which a dry run, a paused loop or a refused stop did not carry out, or could not read its cluster). Preemptors
    are not kept: a preemptor that starts and is later a victim was never held for its own checkpoint (a cycle
    that kept them stopped such a job at once)."""
    victims = [p.job for p in preemptions]
    return {**{j: t for j, t in memory.held.items() if j in victims},
            **{j: now for j in victims if j in waits}}


def _running(found: Mapping[str, list[Copy]], job: str) -> list[Copy]:
    return [c for c in found.get(job, []) if c.phase in ACTIVE and c.reachable and not c.deleting
            and c.running_since is not None]
