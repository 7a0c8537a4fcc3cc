"""Stage 4, plan: where every job runs, what waits and why, what is preempted, how many units each pool
needs. Deterministic and pure: `plan(validated, base)` reads nothing else and returns a frozen `Plan`.

The algorithm is a priority-ordered greedy with explicit tie-breaks (Kueue's admission order, made global):

1. Index the pools (state per pool, units 0..min-1 already open) and the jobs' resolved options: a fresh
   `PlanState` (state.py: pools, quota ledger, live placements), which every step below takes as argument.
2. Stickiness (`sticky.py`): every job placed in the `base` plan keeps its exact units if its cluster is still active or
   cordoned and its pool and option still stand. Jobs in draining clusters try to move (at most
   `max_migrations_per_plan`); those that stay carry a quantified `reason` on their `kept` placement (what
   blocks every option elsewhere, or the migration limit). Jobs in down clusters, or whose pool or option
   changed, must move.
3. Order the rest: priority classes from high to low; within a class, teams take turns by weighted
   dominant share (DRF over accelerator types, recomputed after every placement), each team's jobs largest
   first (accelerators of the first option x replicas), ties by id.
4. For each class, jobs with a data_region first take room in their region (`locality.py`); then
   (`place.py`) pass A places jobs within their team's nominal quota, pass B lets the rest borrow in
   the cohort: nominal quota is guaranteed before anyone borrows it (Kueue's reclaim, without churn).
   A job takes the best candidate over its options and the pools that can hold it, by the key
   (outside data_region, new spend per unit of work, capacity preference, attributed $ per unit of work,
   option index, cluster/pool): cheapest useful work first, already-paid capacity first.
5. A job that still does not fit may preempt lower-priority kept work (`preempt.py`). Planned from what runs, a
   job the last plan stopped for a preemptor that has not started is tried only after that preemptor's class,
   and its stop stands while the preemptor is placed (`greedy.after_preemptors`).
6. One more pass over pending jobs (capacity freed by preemption), then scale pools to what is used.
7. Per-cluster quotas, cost (`summary.py`). Steps 2-7 are `greedy.run`.
8. On small and medium fleets, the improvement phase (improve.py, moves.py) runs the steps again under other orders
   (`Strategy`: largest first, first-fit decreasing, a re-pack of the best plan's jobs), moves placed jobs
   to make room for pending ones or to close capacity, and keeps the best plan by work per priority class
   (highest first), then work placed outside its data region, then capacity cost; this run wins ties.
   `locality.bring_home` then moves jobs still away from their data home where default-class work there fits
   elsewhere.
9. From what runs (`--observed`), `repack.py` moves running on-demand or spot jobs at their checkpoint onto idle
   reserved or owned units when the saving over their remaining time beats the restart cost.

Reclaim within the cohort, decided: the plan does not reclaim lent nominal quota from work it places itself.
Higher classes are placed first and may borrow what a lending team lends, even when that team's lower-class
jobs would need it within their nominal; those jobs then wait with the exact reason ("N of team T's nominal
A quota are lent to cohort-mates (U borrows M); reclaiming them needs preemption", `quota.why_short`).
Reclaiming at plan time as Kueue would under `reclaim_within_cohort: any` (all nominal work before any
borrowing) trades higher-class work for lower-class work, against the objective the improvement phase, the
exact mode (exact.py) and bench/bench_quality.py all share (work per class, highest first); doing it right
means changing all three together, not the greedy alone. Kept (running) borrowers are reclaimed by
preemption (step 5) as the policy allows.

Speed: candidates per option signature are computed once; a gang that found no room is remembered until
something is evicted; the search over candidates stops at the first pool over the team's budget, and once a
pool fits by opening units it visits only pools with free room on opened units (`place.best`).
"""

from __future__ import annotations

from dataclasses import replace

from ..gcpause import paused_gc
from ..validate import Validated
from . import workloads
from .greedy import place_all
from .improve import improve
from .live import LiveInputs, live_base, live_validated, lost_work
from .repack import repack
from .starts import annotate
from .state import Fleet, PlanState
from .summary import freeze
from .types import LiveSummary, Plan


def plan(v: Validated, base: Plan | None = None, live: LiveInputs | None = None, *,
         for_people: bool = True) -> Plan:
    """Plan the validated repository; `base` is the plan of the base commit, for stickiness; `live` what runs
    (plan/live.py), which beats the base. `for_people=False` leaves out what only people read of the pending
    jobs: their expected starts (`starts.annotate`) and the reasons measured when each was decided
    (`reasons.record_wait`; a pending job keeps only why it was stopped or preempted). The reconcile loop and
    the simulator decide from the placements, preemptions and pools alone, which are the same either way."""
    return plan_with_state(v, base, live, for_people=for_people)[0]


def plan_with_state(v: Validated, base: Plan | None = None, live: LiveInputs | None = None, *,
                    for_people: bool = True) -> tuple[Plan, PlanState]:
    """The plan and the final state of the run that made it, for `fleet explain`: the default run, or a
    strictly better alternative run of the improvement phase (improve.py)."""
    with paused_gc():
        if live is not None:                    # 0. what runs: finished jobs out, lost clusters down
            v = live_validated(v, live)
            base = live_base(v, base, live)
        result, final = _settle(v, base, live, for_people)  # 1.-8., with groups and elastic gangs (workloads.py)
        if for_people:
            result = annotate(final, result)    # every pending job's expected start (starts.py)
        if live is None:
            return result, final
        done = sorted(live.done.items())
        lost = dict(final.outcome.lost_work)
        for p in result.placements:     # a job re-created where it runs (sticky.restart_reason), not preempted after
            if p.status == "moved" and p.reason == final.outcome.restarts.get(p.job) and p.job in final.jobs:
                ran = live.running[p.job].units if p.job in live.running else ()   # what runs, before a resize
                lost[p.job] = lost_work(live, p.job, final.jobs[p.job].job.checkpoint_minutes,
                                        p.accelerators_per_unit * len(ran or p.units))
        summary = LiveSummary(tuple(j for j, r in done if r == "succeeded"), tuple(j for j, r in done if r == "failed"),
                              tuple(sorted(live.lost)), tuple(w for _, w in sorted(lost.items())))
        return replace(result, live=summary), final


def _run(v: Validated, base: Plan | None, live: LiveInputs | None,
         pins: dict[str, str] | None = None, for_people: bool = True) -> tuple[Plan, PlanState]:
    st = PlanState(replace(Fleet.of(v, live, pins), for_people=for_people), base)   # 1. pools, quota, jobs' options
    place_all(st)                                   # 2.-6. the greedy
    result, final = improve(st)                     # 8. other orders and moves; the best plan, frozen (7.)
    if repack(final):                               # 9. running work onto idle prepaid units (repack.py)
        result = freeze(final)
    return result, final


def _settle(v: Validated, base: Plan | None, live: LiveInputs | None,
            for_people: bool = True) -> tuple[Plan, PlanState]:
    """The plan, with job groups kept together and all-or-nothing and elastic gangs grown (workloads.py)."""
    jobs = v.loaded.jobs
    mins = {j.id: j.workers.min for j in jobs if j.workers is not None}
    maxes = {j.id: j.workers.max for j in jobs if j.workers is not None}
    full = base
    base = workloads.trim_base(base, maxes)     # a lowered `workers.max` cuts a running gang to it
    held = workloads.held_above_min(base, mins)
    if held:    # running above min: kept at that size unless waiting work of its class or higher needs the pool
        v_held = workloads.at_sizes(v, held)
        result, final = _run(v_held, base, live, None, for_people)
        if workloads.needs_room(final, result, held):
            held = {}
        else:
            v = v_held
    if not held:
        base = workloads.trim_base(base, mins)
        result, final = _run(v, base, live, None, for_people)
    groups = workloads.groups_of(final)
    why: dict[str, str] = {}
    running = set(live.running) if live is not None else {p.job for p in base.placements} if base else set()
    bad = workloads.broken(final, result, groups) if groups else {}
    unpinned = result
    pins: dict[str, str] = {}
    tried: dict[str, set[str]] = {}
    for _ in range(2):                  # a place for each broken group, then the next place (workloads.py)
        more = workloads.pins_for(final, result, groups, bad, running, tried) if bad else {}
        if not more:
            break
        pins.update(more)
        result, final = _run(v, base, live, pins, for_people)
        bad = workloads.broken(final, result, groups)
    if bad:                             # still incomplete: withheld (workloads.withhold)
        placed = {p.job for p in unpinned.placements}       # stopped by the plan, not by a pin try
        stopped = {m: m for m in running if m not in placed}
        more, why = workloads.withhold(result, groups, bad, running, stopped)
        held_back = {m for g in bad for m in groups[g]}      # a withheld group's pin tries are dropped
        result, final = _run(v, base, live, {**{m: x for m, x in pins.items() if m not in held_back}, **more},
                             for_people)
    grown = workloads.grow(final, full)
    if grown:
        result = freeze(final)
    result = workloads.resize_notes(result, full, grown, mins, maxes)
    return workloads.group_notes(result, groups, why, running), final
