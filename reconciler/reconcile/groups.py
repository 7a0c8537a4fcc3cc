"""Rule 2b of decide.py: a job group that runs in part. Pure.

The plan starts a group (docs/workloads.md, `group:`) all-or-nothing, but each member is its own JobSet with its
own Kueue Workload, and Kueue admits Workloads one by one: nothing in Kueue makes the members all-or-nothing. So
live a group can run in part: some members admitted (their units and quota taken), others pending in Kueue
(`QuotaReserved` False: quota borrowed meanwhile by another ClusterQueue, a node short), evicted, not created (an
API fault on their create), or left waiting by the plan. Then, each cycle:

- it is said at once, in the cycle's notes: which members are admitted, and why each other one is not (Kueue's
  own condition message where it has one); the loop remembers since when (`LoopMemory.groups`);
- a member not created is created again by rule 2 (a placed job with no copy starts), every cycle;
- after `Knobs.group_whole_minutes` in part, as Kueue's waitForPodsReady evicts a Workload whose pods do not all
  come up in time, the admitted members stop (a stop each, saying why), so their units and quota go back; the
  pending ones keep their place in Kueue's queue. A stopped member starts again with its group: once every
  other member is admitted, or when its backoff ends (the bound, doubling with each try, at most
  `GROUP_RETRY_CAP_MINUTES`: Kueue's requeuing backoff doubles too, at most an hour), whichever comes first.
  Where the plan itself leaves a member waiting (it keeps the running members of a group it cannot complete:
  plan/workloads.py `withhold`), the group is said to run in part, and nothing is stopped: that is the plan's call.
Nothing is done while a member's cluster cannot be read, or while rule 2 already moves or stops a member (a group
that moves is in part for a cycle or two as its members come up again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from ..observe.model import Snapshot
from ..plan.types import Plan
from .model import Copy, GroupTry, Knobs

GROUP_RETRY_CAP_MINUTES = 60.0
ADMITTED = ("admitted", "running")


def _why_waiting(job: str, mine: Sequence[Copy], snapshot: Snapshot, pending: Mapping[str, Sequence[str]]) -> str:
    """Why a member is not admitted, in Kueue's words where it has some."""
    if job in pending:
        return f"{job} waits in the plan ({'; '.join(pending[job][:1]) or 'no place for it now'})"
    live = [c for c in mine if c.phase in ("queued", "evicted", "unknown") and c.reachable]
    if not live:
        return f"{job} is not created (its start is tried again this cycle)"
    c = live[0]
    obs = next(o for o in snapshot.clusters if o.name == c.cluster)
    w = next((w for w in obs.workloads if (w.namespace, w.jobset) == (c.namespace, c.name)), None)
    said = None
    if w is not None:
        for kind in ("Evicted", "QuotaReserved", "Admitted"):
            cond = w.condition(kind)
            if cond is not None and (cond.status == "True") == (kind == "Evicted"):
                said = f"{kind} {cond.status}: {cond.message or cond.reason}"
                break
    return f"{job} is {c.phase} in Kueue on {c.cluster}" + (f" ({said})" if said else " (no Workload condition yet)")


def partial_groups(plan: Plan, snapshot: Snapshot, found: Mapping[str, Sequence[Copy]], tries: Mapping[str, GroupTry],
                   knobs: Knobs, reachable: set[str], now: datetime, acting: set[str],
                   ) -> tuple[list[tuple[Copy, str]], set[str], list[str], dict[str, GroupTry]]:
    """(the copies to stop, each with why; the members whose start waits for their group; notes; the memory's
    `groups`). `acting`: the jobs rule 2 already stops or moves this cycle."""
    members: dict[str, list[str]] = {}
    places: dict[str, set[str]] = {}
    for p in plan.placements:
        if p.group:
            members.setdefault(p.group, []).append(p.job)
            places.setdefault(p.group, set()).add(p.cluster)
    pending = {q.job: q.reasons for q in plan.pending if q.group}
    for q in plan.pending:
        if q.group:
            members.setdefault(q.group, []).append(q.job)
    bound = knobs.group_whole_minutes
    stops: list[tuple[Copy, str]] = []
    hold: set[str] = set()
    notes: list[str] = []
    out: dict[str, GroupTry] = {}
    for g, jobs in sorted(members.items()):
        jobs = sorted(set(jobs))
        was = tries.get(g, GroupTry())
        if not places.get(g, set()) <= reachable or acting & set(jobs):
            if g in tries:
                out[g] = was
            continue
        admitted = [j for j in jobs if any(c.phase in ADMITTED and c.reachable and not c.deleting   # a stopped one
                                           for c in found.get(j, ()))]                           # going: not in it
        waiting = [j for j in jobs if j not in admitted]
        if not waiting:                               # whole: tries are forgotten
            continue
        held = [j for j in was.stopped if j in waiting and j not in pending]
        others = [j for j in waiting if j not in held]
        still: list[str] = []                         # stopped members still waiting for their group
        if held and others and was.retry_at is not None and now < was.retry_at:
            hold.update(held)
            still = held
            notes.append(f"{', '.join(held)} stopped so that group {g} would not run in part: it starts again with "
                         f"its group once {', '.join(others)} is admitted, or at {was.retry_at.isoformat()} "
                         f"(try {was.attempts + 1})")
            waiting = others
        elif held:
            was = was.model_copy(update={"stopped": ()})
        if not admitted:
            out[g] = was.model_copy(update={"since": None})
            continue
        since = was.since or now
        why = "; ".join(_why_waiting(j, found.get(j, ()), snapshot, pending) for j in waiting)
        minutes = (now - since).total_seconds() / 60
        if any(j in pending for j in waiting):        # the plan's own call (plan/workloads.py withhold): said only
            notes.append(f"group {g} runs in part since {since.isoformat()}: {', '.join(admitted)} admitted, but "
                         f"{why}; the plan keeps running members of a group it cannot complete")
            out[g] = was.model_copy(update={"since": since})
            continue
        if minutes < bound:
            notes.append(f"group {g} runs in part since {since.isoformat()}: {', '.join(admitted)} admitted, but "
                         f"{why}; it starts all-or-nothing, so its admitted members stop if it is not whole by "
                         f"{(since + timedelta(minutes=bound)).isoformat()}")
            out[g] = was.model_copy(update={"since": since})
            continue
        backoff = min(GROUP_RETRY_CAP_MINUTES, bound * 2 ** was.attempts)
        retry = now + timedelta(minutes=backoff)
        reason = (f"group {g} runs in part since {since.isoformat()} ({minutes:.0f} min, the bound is {bound:g}): "
                  f"{why}; the group starts all-or-nothing, so its admitted members stop and their units go back "
                  "(as Kueue's waitForPodsReady evicts a Workload that does not come up whole in time); each "
                  f"starts again with its group, once {', '.join(waiting)} is admitted, or at {retry.isoformat()}")
        for j in admitted:
            stops += [(c, reason) for c in found.get(j, ()) if c.phase in ADMITTED and c.reachable and not c.deleting]
        out[g] = GroupTry(stopped=tuple(sorted({*admitted, *still})), attempts=was.attempts + 1, retry_at=retry)
        hold.update(admitted)
    return stops, hold, notes, out
