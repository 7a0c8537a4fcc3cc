"""Preemption that costs little (issue 22): which running jobs may be victims, in what order, and when they stop.
Pure functions of a `PlanState`, used by preempt.py.

- Scope (Kueue's semantics: a ClusterQueue preempts within itself): a victim must free room, or quota, on the
  pool the preemptor lands on; a victim elsewhere is never evicted only to free the team's or the cohort's
  fleet-wide quota (preempt.py `_helps`). Victims whose team borrows their accelerator (lower classes running
  on idle headroom) are reclaimed first.
- Size (`snug`): victims no larger than twice the room the job needs first, the closest in size first (one
  just big enough, then the largest smaller ones); larger ones last, smallest first. A set of victims with one
  larger than twice the need ranks after any set without (preempt.py `rank`).
- Minimum runtime (`protected`, KAI's guarantee): a job of a class with `min_runtime_minutes` that ran fewer
  observed minutes (plan/live.py `run_minutes`) is no victim; the waiting job's reason says so.
- Checkpoints (`after_minutes`): planned from what runs, a victim whose next checkpoint comes within
  `preemption.checkpoint_window_minutes` keeps running until it; the plan's preemption carries `after_minutes`,
  and the reconcile loop stops it only once it checkpointed (reconcile/ckptwait.py). Until then it holds its
  quota and the units its preemptor does not take (`hold_until_checkpoint`), so nothing else starts into them.
  Such a victim loses about nothing but its restart: it ranks at that cost. One whose unit the job would share,
  taking fewer of its accelerators than it (`shares_unit`), cannot be held and stops at once: it ranks, and is
  weighed, at its work since its checkpoint too (preempt.py `_stopping`, from the units the job would take).
- Waiting instead (`cheaper_to_wait`): planned from what runs, the job waits when preempting would start it
  earlier by less than the victims lose. Its expected start as running work ends (counting only work that has
  not outrun its duration_hours: `reserve.credible_earliest`), less when the victims stop (`stop_hours`: at
  their checkpoint when they keep running until it, else now), times its need, is what the preemption buys;
  what they lose is their restart and their work since their checkpoint unless stopped at it; both in
  accelerator-minutes; a victim of the job's class or a higher one also costs its wait in the queue again, at
  least its restart time (`waits_again`: the preemption only swaps which job of a class waits). When work ends
  before the victims would stop, the preemption buys nothing. A large
  gang preempted for a small job goes back to a queue where its gang may not fit again for days: on 10,000
  jobs over 30 days a 256-GPU research gang was preempted 20 times, for one small job of its team after
  another, and did not finish (docs/benchmarks.md). Until 2026-12-05 only oversized victims were weighed so.
  A job that waits claims what it waits for (claims.py), so jobs alike behind it weigh their own wait.
"""

from __future__ import annotations

from typing import NamedTuple

from ..checkpoint import minutes_at_risk
from ..resolve import ResolvedOption
from .capacity import PoolState
from .reserve import credible_earliest
from .state import JobInfo, Live, PlanState, amount, qkey
from .types import nano


class Victim(NamedTuple):
    """A victim chosen for a job: its id, the rule that allows it, the accelerator-minutes it loses, and whether
    it stops at once though its checkpoint is near (`shares_unit`: the job takes part of its unit)."""

    job: str
    why: str
    lost: float
    at_once: bool = False


def class_of(st: PlanState, lv: Live) -> str:
    return lv.info.job.priority or st.fleet.prio.default


def protected(st: PlanState, lv: Live) -> str | None:
    """Why `lv` may not be preempted yet (its class's `min_runtime_minutes` not reached), or None. A job whose
    running time is not observed (planned from git alone) is not protected: nothing says it is young."""
    name = class_of(st, lv)
    cls = next((c for c in st.fleet.prio.classes if c.name == name), None)
    live = st.fleet.live
    if cls is None or cls.min_runtime_minutes is None or live is None or not lv.kept:
        return None
    ran = live.run_minutes.get(lv.info.parent)
    if ran is None or ran >= cls.min_runtime_minutes:
        return None
    return (f"{lv.info.parent} ran {ran:g} of the {cls.min_runtime_minutes:g} minutes class {name} runs before it "
            f"may be preempted (min_runtime_minutes)")


def runs_on(st: PlanState, lv: Live) -> bool:
    """Whether a victim loses nothing by running on while a fellow victim of its preemptor runs to its checkpoint, so
    the reconcile loop lets it run on and stops it with that one (reconcile/ckptwait.py): a service whose
    Deployments / LeaderWorkerSets run replicas (`LiveInputs.serving`, the loop's `serving`), or a job (a
    service too: the simulator's, seen as JobSets) that checkpoints continuously (`checkpoint_minutes: 0`) and
    runs. Before the fortieth session (2026-12-07) the plan counted it stopped at once: a job of its team
    started on its spend and quota while it ran on."""
    live = st.fleet.live
    if live is None:
        return False
    if lv.info.job.kind == "inference" and any(n for _, _, n, _ in live.serving.get(lv.info.parent, ())):
        return True
    return lv.info.job.checkpoint_minutes == 0 and lv.info.parent in live.running


def after_minutes(st: PlanState, lv: Live) -> float | None:
    """Minutes until the victim's next checkpoint when that is within the window (it keeps running until
    then), else None (stopped at once). Only planned from what runs, for a job that checkpoints every N > 0
    minutes."""
    live = st.fleet.live
    window = st.fleet.prio.preemption.checkpoint_window_minutes
    step = lv.info.job.checkpoint_minutes
    if live is None or not lv.kept or not step or window <= 0:
        return None
    ran = live.run_minutes.get(lv.info.parent)
    if ran is None:
        return None
    since = minutes_at_risk(ran, step)
    if since <= 0:
        return None     # it just checkpointed: stopping it now loses nothing
    left = step - since
    return round(left, 1) if left <= window else None


def snug(need: int, size: int) -> tuple[bool, bool, int]:
    """The size order of victims for a job needing `need` (module docstring): not oversized first, then one
    at least the need, smallest such first, then smaller ones, largest first."""
    over = size > 2 * need
    return over, size < need, (-size if size < need and not over else size)


def oversized(st: PlanState, chosen: list[str], need: int, acc: str) -> bool:
    """A victim on the job's accelerator holds more than twice what the job needs."""
    return any(amount(lv.info, lv.option) > 2 * need for j in chosen
               if (lv := st.live.get(j)) is not None and lv.option.accelerator == acc)


def shares_unit(lv: Live, gang_accelerators: int, units: tuple[int, ...] | None, ps: PoolState) -> bool:
    """The job's gang, taking `units` of `ps` with `gang_accelerators` of each, shares a unit with the victim `lv`
    while taking fewer accelerators of it than the victim's: `hold_until_checkpoint` cannot hold the victim's
    part of that unit apart, so it stops at once, whatever its next checkpoint."""
    return lv.pool is ps and units is not None and gang_accelerators < lv.gang.accelerators \
        and not set(units).isdisjoint(lv.units)


def stop_hours(st: PlanState, chosen: list[Victim]) -> tuple[float, str | None]:
    """When the last of the victims `chosen` for a job stops, in hours from now, and which one that is: at its
    next checkpoint when it keeps running until it (`after_minutes`, unless it stops at once: `Victim.at_once`),
    else now (0, None). Before 2026-12-05 (twenty-first session) a victim on the job's pool was reckoned to stop
    at once wherever the job's gang took fewer accelerators of a unit than the victim's, on its unit or not, and
    its loss as its restart alone either way; now both follow the units the job takes (`shares_unit`)."""
    last: tuple[float, str | None] = (0.0, None)
    for c in chosen:
        after = after_minutes(st, st.live[c.job])
        if after is not None and not c.at_once and after / 60 > last[0]:
            last = (after / 60, c.job)
    return last


def cheaper_to_wait(st: PlanState, job: JobInfo, opt: ResolvedOption, chosen: list[Victim]) -> str | None:
    """Why `job` waits rather than preempt `chosen` to run with `opt`, the best set of victims (module
    docstring), or None: preempt them."""
    if st.fleet.live is None or job.siblings:
        return None     # a spread replica's start is not reckoned (its siblings' domains are not)
    start = credible_earliest(st, job)
    if start is None or start <= 0:
        return None     # 0: the reckoning says it fits now, yet it did not: it knows no better than the search
    need = amount(job, opt)
    lost = sum(c.lost for c in chosen)
    stop, last = stop_hours(st, chosen)
    gain = max(0.0, round((start - stop) * 60, 6)) * need    # minutes; rounded: both are minutes in hours
    again = waits_again(st, job, chosen)
    if gain >= lost + again:
        return None
    big = oversized(st, [c.job for c in chosen], need, opt.accelerator)
    head = (f"waiting is cheaper than preempting {', '.join(c.job for c in chosen)}"
            + (f" (more than twice the {need} {opt.accelerator} it needs)" if big else "")
            + f": it is expected to start in {_hours(start)} h as running work ends")
    if not gain:
        return (f"{head}, before {last} stops at its checkpoint in {stop * 60:g} min; preempting would start it "
                f"no sooner, and lose {lost / 60:,.1f} accelerator-hours")
    then = f", and {last} stops at its checkpoint in {stop * 60:g} min" if stop else ""
    more = (f", and {again / 60:,.1f} accelerator-hours its victims of its class or a higher one would wait again, "
            "at least") if again else ""
    return (f"{head}{then}; preempting would start it {_hours(start - stop)} h sooner, {gain / 60:,.1f} "
            f"accelerator-hours, against {lost / 60:,.1f} accelerator-hours the preemption would lose{more}")


def _hours(h: float) -> str:
    """Hours as a reason says them: two significant digits under 10 (0.42, 2.5), whole hours above (123, not the
    `1.2e+02` that `.2g` wrote before the forty-first session's review)."""
    return f"{h:.2g}" if h < 10 else f"{h:,.0f}"


def restart_cost(st: PlanState, lv: Live) -> float:
    """Accelerator-minutes a running victim spends restoring and warming up before it progresses again, even
    when stopped at a checkpoint: `repack.restart_minutes` (policies/placement.yaml, the restart cost re-pack
    weighs too) x its accelerators. Planned from what runs only (0 from git, where victims rank by count). A
    just-checkpointed 512-chip gang is not free to preempt: it costs 512 x 10 accelerator-minutes, more than
    a 16-chip job 30 minutes past its checkpoint (issue 22: victims 8x the size of the job that needs room)."""
    if not lv.kept or st.fleet.live is None:
        return 0.0
    return st.fleet.placement.repack.restart_minutes * amount(lv.info, lv.option)


def waits_again(st: PlanState, job: JobInfo, chosen: list[Victim]) -> float:
    """Accelerator-minutes the victims of `job`'s class or a higher one are reckoned to wait again once stopped:
    their restart time (`repack.restart_minutes`) x their accelerators. Such a preemption only swaps which job of
    the class waits: the victim goes back to the queue, and the room it gets again is, at the nearest, room the
    job itself would have waited for, and the job preempts only to gain more than the victim's restart. So the
    victim's wait is charged at least that, beside its lost work; a victim of a lower class is not (its class
    waits for the higher one: that is what priorities say). Measured (docs/benchmarks.md, thirty-second
    session; `bench/preempt_victims.py`, "waited again"): on the Alibaba trace, seed 1, before this rule, 40 of
    the 60 victims of a preemptor of their class or a lower one waited again at least their 10 restart minutes,
    the median 15."""
    return sum(restart_cost(st, lv) for c in chosen if (lv := st.live[c.job]).info.priority >= job.priority)


def hold_until_checkpoint(st: PlanState, lv: Live, by: Live) -> bool:
    """A victim evicted for `by` that keeps running until its next checkpoint (`after_minutes`) keeps until then
    its quota and its spend (charged again to its team) and the units `by` does not take (taken again in its
    pool), so that nothing else starts now into what it still uses; `by` starts only once it stopped. False
    (and nothing held) where `by` shares a unit with it without taking all it uses there: the rest of that
    unit could not be held apart, so the victim stops at once."""
    if shares_unit(lv, by.gang.accelerators, by.units, by.pool):
        return False
    mine = set(by.units) if by.pool is lv.pool else set()
    rest = tuple(u for u in lv.units if u not in mine)
    if rest and not lv.pool.take(rest, lv.gang):
        return False
    st.draining[lv.info.id] = lv
    st.quota.add(lv.info.team, qkey(lv.info, lv.option), amount(lv.info, lv.option))
    st.team_hourly[lv.info.team] += nano(lv.hourly_usd)    # and it still spends its team's budget
    st.version += 1
    return True
