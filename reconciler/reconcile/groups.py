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
  The backoff restarts at most `Knobs.group_retry_limit` times (`reconcile.group_retry_limit`, as Kueue's
  `requeuingStrategy.backoffLimitCount` deactivates a Workload requeued that often): after that stop the
  members start again only with their group, once every other member is admitted, and the stop, the cycle's
  notes and `fleet status --memory` say so. Before, the loop stopped and restarted such a group every hour
  for ever, and nothing said how often it had. The count belongs to the members' specs: once a member's file is
  edited (its spec digest differs from the one remembered at the last stop), the group's tries start over, as a
  Workload created for a new spec starts with no requeue count (before, only a whole run or a memory file
  edited by hand reset it, and a group fixed in git still waited for its others with no backoff).
  Where the plan itself leaves a member waiting (it keeps the running members of a group it cannot complete:
  plan/workloads.py `withhold`), the group is said to run in part, and nothing is stopped: that is the plan's call.
Nothing is done while a member's cluster cannot be read, or while rule 2 already moves or stops a member (a group
that moves is in part for a cycle or two as its members come up again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class GroupView:
    """A job group as the plan and what runs show it: the one rule the loop (`partial_groups`) and `fleet status`
    both read (status had its own copy, which counted a member whose JobSet was being deleted as admitted)."""

    members: tuple[str, ...]            # the plan's members (placed or pending; a finished one is in neither)
    admitted: tuple[str, ...]           # a copy admitted or running, on a cluster read, not being deleted
    plan_waits: tuple[str, ...]         # members the plan itself keeps waiting (plan/workloads.py withhold)
    clusters: frozenset[str]            # where the plan places its members

    @property
    def waiting(self) -> tuple[str, ...]:
        return tuple(j for j in self.members if j not in self.admitted)

    @property
    def in_part(self) -> bool:
        return bool(self.admitted) and bool(self.waiting)


def is_admitted(c: Copy) -> bool:
    """Whether a copy counts as its member admitted: a stopped one going (deleting) does not."""
    return c.phase in ADMITTED and c.reachable and not c.deleting


def group_views(plan: Plan, found: Mapping[str, Sequence[Copy]]) -> dict[str, GroupView]:
    """`team/group` -> its view, for every group the plan places or keeps waiting."""
    members: dict[str, set[str]] = {}
    places: dict[str, set[str]] = {}
    for p in plan.placements:
        if p.group:
            members.setdefault(p.group, set()).add(p.job)
            places.setdefault(p.group, set()).add(p.cluster)
    for q in plan.pending:
        if q.group:
            members.setdefault(q.group, set()).add(q.job)
    waits = {q.job for q in plan.pending if q.group}
    return {g: view_of(jobs, found, waits, frozenset(places.get(g, ()))) for g, jobs in sorted(members.items())}


def view_of(jobs: Iterable[str], found: Mapping[str, Sequence[Copy]], waits: Container[str] = (),
            clusters: frozenset[str] = frozenset()) -> GroupView:
    """One group's view from its members (`waits`: the jobs the plan keeps waiting)."""
    mine = tuple(sorted(set(jobs)))
    return GroupView(mine, tuple(j for j in mine if any(map(is_admitted, found.get(j, ())))),
                     tuple(j for j in mine if j in waits), clusters)


def specs_of(members: Iterable[str], digests: Mapping[str, str | None]) -> str | None:
    """One digest of the members' spec digests (None: one is not known, so no edit can be told)."""
    mine = sorted(members)
    if any(digests.get(j) is None for j in mine):
        return None
    return hashlib.sha256("\n".join(f"{j} {digests[j]}" for j in mine).encode()).hexdigest()[:16]


def current(was: GroupTry, members: Iterable[str], digests: Mapping[str, str | None]) -> GroupTry:
    """The group's tries as they stand: none once a member's file was edited since the last stop (module
    docstring); as remembered when that cannot be told."""
    now = specs_of(members, digests) if was.specs is not None else None
    return GroupTry() if now is not None and now != was.specs else was


def retries_left(attempts: int, knobs: Knobs) -> bool:
    """Whether members stopped `attempts` times still start again when their backoff ends (None: no limit)."""
    return knobs.group_retry_limit is None or attempts <= knobs.group_retry_limit


def spent(was: GroupTry, knobs: Knobs) -> bool:
    """Whether a group's stopped members wait for their group alone: their last stop spent the restarts after a
    backoff (no `retry_at`), and the limit the file states now still does (a limit raised, or made null, since
    then restarts them: the file's word stands, not the memory's)."""
    return was.retry_at is None and not retries_left(was.attempts, knobs)


def loop_does(view: GroupView, was: GroupTry, knobs: Knobs) -> str:
    """What the loop does of a group, in the words `fleet status` shows (the rule of `partial_groups`)."""
    limit = "no limit" if knobs.group_retry_limit is None else f"limit {knobs.group_retry_limit}"
    if was.stopped:
        then = "and restarts them no more " if spent(was, knobs) else ""
        at = "once the others are admitted" if spent(was, knobs) else \
            f"or at {was.retry_at.isoformat()}" if was.retry_at is not None else "or at the loop's next cycle"
        return (f"the reconcile loop stopped its admitted members {was.attempts} time(s) {then}({limit}): "
                f"{', '.join(was.stopped)} start(s) again with the group, {at}")
    if view.plan_waits:
        return "the plan keeps a member waiting, so the running members are kept"
    return (f"the reconcile loop stops its admitted members if it is not whole within {knobs.group_whole_minutes:g} "
            f"min, and restarts them after a backoff ({limit}" +
            (f"; stopped {was.attempts} time(s) so far)" if was.attempts else ")"))


def partial_groups(plan: Plan, snapshot: Snapshot, found: Mapping[str, Sequence[Copy]], tries: Mapping[str, GroupTry],
                   knobs: Knobs, reachable: set[str], now: datetime, acting: set[str],
                   digests: Mapping[str, str | None] | None = None,
                   ) -> tuple[list[tuple[Copy, str]], set[str], list[str], dict[str, GroupTry]]:
    """(the copies to stop, each with why; the members whose start waits for their group; notes; the memory's
    `groups`). `acting`: the jobs rule 2 already stops or moves this cycle; `digests`: each job's spec digest
    as its file has it now (None or absent: not known)."""
    digests = digests or {}
    pending = {q.job: q.reasons for q in plan.pending if q.group}
    bound = knobs.group_whole_minutes
    stops: list[tuple[Copy, str]] = []
    hold: set[str] = set()
    notes: list[str] = []
    out: dict[str, GroupTry] = {}
    for g, view in group_views(plan, found).items():
        jobs = list(view.members)
        was = current(tries.get(g, GroupTry()), jobs, digests)
        if not view.clusters <= reachable or acting & set(jobs):
            if g in tries:
                out[g] = was
            continue
        admitted, waiting = list(view.admitted), list(view.waiting)
        if not waiting:                               # whole: tries are forgotten
            continue
        held = [j for j in was.stopped if j in waiting and j not in pending]
        others = [j for j in waiting if j not in held]
        still: list[str] = []                         # stopped members still waiting for their group
        if held and others and (spent(was, knobs) or (was.retry_at is not None and now < was.retry_at)):
            hold.update(held)
            still = held
            then = f"or at {was.retry_at.isoformat()} (try {was.attempts + 1})" if was.retry_at is not None else \
                (f"and only then: stopped {was.attempts} time(s), and the `reconcile.group_retry_limit` "
                 f"({knobs.group_retry_limit}) restarts after a backoff are spent")
            notes.append(f"{', '.join(held)} stopped so that group {g} would not run in part: it starts again with "
                         f"its group once {', '.join(others)} is admitted, {then}")
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
        attempts = was.attempts + 1
        retry: datetime | None = None
        if retries_left(attempts, knobs):
            at = now + timedelta(minutes=min(GROUP_RETRY_CAP_MINUTES, bound * 2 ** was.attempts))
            retry, again = at, f"once {', '.join(waiting)} is admitted, or at {at.isoformat()}"
        else:
            again = (f"only once {', '.join(waiting)} is admitted: this is stop {attempts}, and "
                     f"`reconcile.group_retry_limit` ({knobs.group_retry_limit}) restarts after a backoff are spent")
        reason = (f"group {g} runs in part since {since.isoformat()} ({minutes:.0f} min, the bound is {bound:g}): "
                  f"{why}; the group starts all-or-nothing, so its admitted members stop and their units go back "
                  "(as Kueue's waitForPodsReady evicts a Workload that does not come up whole in time); each "
                  f"starts again with its group, {again}")
        if retry is None:
            notes.append(f"group {g}: {reason}")
        for j in admitted:
            stops += [(c, reason) for c in found.get(j, ()) if is_admitted(c)]
        out[g] = GroupTry(stopped=tuple(sorted({*admitted, *still})), attempts=attempts, retry_at=retry,
                          specs=specs_of(jobs, digests))
        hold.update(admitted)
    return stops, hold, notes, out
