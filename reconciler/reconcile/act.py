"""Carrying out a decision: the `Actuator` protocol and the one order every actuator is driven in. Pure.

An actuator is what changes the world: `kube_act.ClusterActuator` talks to the real clusters (jobs by
server-side apply and delete, pools and Kueue objects through the Pulumi stacks), `fleet simulate` implements
the same five calls against its simulated clusters. `execute` drives either one; it owns the rules that must
not differ between the two:

- Actions run in the decision's order (`decide.ORDER`: pools grow, Kueue, stops, moves, starts, pools shrink).
  All resizes of one cluster and stage go in one call (one infra stack per cluster).
- A cluster whose API failed earlier in the cycle (a stop, start or move that failed) is not acted on again
  in this cycle, and nothing elsewhere that assumes it acted happens: a move out of it is skipped (its new
  copy would run beside the old one), and so is any release of its capacity. A failed stack (Pulumi: a
  resize or a Kueue update) blocks nothing: a JobSet started on a pool still growing waits in Kueue's
  queue. What was skipped is reported as skipped, with the failure that caused it; the next cycle observes
  again and decides afresh.
- A cluster that answered and refused one job's object (`Outcome.refused`: invalid, forbidden in its
  namespace, a conflict, an admission webhook's no) has a working API: only what assumes that job's action
  happened waits, the job's later actions and the release of the cluster's capacity (a stop refused leaves
  the victim on units a shrink would take). Other jobs' actions go on. Before, one refusal held back every
  later action on the cluster, cycle after cycle while the refusal stood: one team's object that its
  namespace's admission policy refused stopped every other team's starts there.
- An actuator never raises for a failure of the world (refused, 409, 500, a failed stack): it returns an
  `Outcome` that says what failed and how to fix it. An exception from an actuator is a bug and propagates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .decide import Action, Decision


@dataclass(frozen=True)
class Outcome:
    ok: bool
    message: str = ""
    hint: str = ""
    refused: bool = False   # failed: the cluster answered and refused this job's object (module docstring)


class Actuator(Protocol):
    """The five things the reconciler does to clusters. Each returns an `Outcome`, never raises for the world."""

    def resize(self, cluster: str, actions: Sequence[Action]) -> Outcome:
        """Set the unit counts of the pools in `actions` (all of one cluster; each `action.target`)."""
        ...

    def kueue(self, action: Action) -> Outcome:
        """Bring the cluster's Kueue objects (quotas) to the plan."""
        ...

    def stop(self, action: Action) -> Outcome:
        """Delete the job's copy on `action.from_cluster` (its JobSet, or its service objects)."""
        ...

    def start(self, action: Action) -> Outcome:
        """Create the job on `action.cluster`/`action.pool` (server-side apply of a JobSet Kueue admits)."""
        ...

    def move(self, action: Action) -> Outcome:
        """Stop the copy on `from_cluster` and start one on `cluster`: a JobSet old copy first, and the new
        one only once the old is gone; a service the new copy first, the old one after."""
        ...


@dataclass(frozen=True)
class Result:
    action: Action
    status: str            # done | failed | skipped
    message: str = ""
    hint: str = ""


def execute(decision: Decision, actuator: Actuator,
            on_result: Callable[[Result], None] | None = None) -> tuple[Result, ...]:
    """Run the decision's actions through `actuator` in order; see the module docstring for the rules."""
    failed: dict[str, str] = {}              # cluster -> the first failure of its API this cycle
    refused: dict[str, str] = {}             # job -> the first refusal of its object this cycle
    unshrunk: dict[str, str] = {}            # cluster -> a refusal there: its capacity is not released
    results: list[Result] = []

    def record(r: Result, was_refused: bool = False) -> None:
        results.append(r)
        if r.status == "failed" and r.action.kind in ("stop", "start", "move"):
            why = f"{r.action.describe()}: {r.message}"
            if was_refused:                  # the API works: the job, and the release of capacity, wait
                refused.setdefault(r.action.job or "", why)
                for c in (r.action.cluster, r.action.from_cluster):
                    if c:
                        unshrunk.setdefault(c, why)
            else:                            # the cluster's API failed
                for c in (r.action.cluster, r.action.from_cluster):
                    if c:
                        failed.setdefault(c, why)
        if on_result is not None:
            on_result(r)

    actions = list(decision.actions)
    i = 0
    while i < len(actions):
        a = actions[i]
        if a.kind == "resize":
            group = [a]
            while i + 1 < len(actions) and actions[i + 1].kind == "resize" and \
                    actions[i + 1].cluster == a.cluster and actions[i + 1].stage == a.stage:
                i += 1
                group.append(actions[i])
            blocked = _blocked(a, failed, refused, unshrunk)
            if blocked:
                for g in group:
                    record(Result(g, "skipped", blocked))
            else:
                out = actuator.resize(a.cluster, group)
                for g in group:
                    record(Result(g, "done" if out.ok else "failed", out.message, out.hint))
            i += 1
            continue
        blocked = _blocked(a, failed, refused, unshrunk)
        if blocked:
            record(Result(a, "skipped", blocked))
        else:
            out = {"kueue": actuator.kueue, "stop": actuator.stop, "start": actuator.start,
                   "move": actuator.move}[a.kind](a)
            record(Result(a, "done" if out.ok else "failed", out.message, out.hint), out.refused)
        i += 1
    return tuple(results)


def _blocked(a: Action, failed: dict[str, str], refused: dict[str, str], unshrunk: dict[str, str]) -> str:
    """Why `a` must not run after this cycle's failures and refusals, or ''."""
    for c in (a.from_cluster, a.cluster):
        if c and c in failed:
            return f"skipped: cluster {c} failed earlier in this cycle ({failed[c]})"
    if a.job and a.job in refused:
        return f"skipped: an action of {a.job} was refused earlier in this cycle ({refused[a.job]})"
    if a.stage == "resize-down" and a.cluster in unshrunk:
        return (f"skipped: cluster {a.cluster} refused an action earlier in this cycle, and its capacity is not "
                f"released while it stands ({unshrunk[a.cluster]})")
    return ""
