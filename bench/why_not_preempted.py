"""Why the planner's preemption step (plan/preempt.py `try_preempt`) did not start one waiting job: `fleet` on
bench_simulate.py's trace of a seed (the same run, so the same figures), watched over a window of simulated
hours. Not a timing.

    python bench/why_not_preempted.py --jobs 10000 --days 30 --seed 1 --job serving/pretrain-07485 \
        --from-hour 542 --to-hour 607 --every 24
    python bench/why_not_preempted.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 \
        --size-to-trace --seed 1 --job alpha/openb-pod-5198 --from-hour 485 --to-hour 495 --every 8

For every --every-th time the step weighs the job in the window, per option: the quota it lacks (and whether it
fits its nominal quota), the victims the rules allow it (`_victim_groups`: how many per class, and how much of
its accelerator they hold), its team's budget room now and with every allowed victim's spend freed against the
job's charge on each candidate pool, each candidate pool's room (`may_fit` / `find`) and what holds it (team,
class value, kept from what runs, whether that team borrows the accelerator: accelerators), and, per pool
searched, the victims found (None: none make it fit). Then whether the job was placed, and the reason if it
judged waiting cheaper. The run stops after --to-hour.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.plan import greedy, preempt
from reconciler.plan.capacity import PoolState
from reconciler.plan.state import JobInfo, PlanState, amount, qkey
from reconciler.plan.victims import Victim
from reconciler.resolve import ResolvedOption
from reconciler.simulate.policies import make


def weighed(st: PlanState, job: JobInfo) -> None:
    """Print what the preemption step reads of `job` now (module docstring), before it runs."""
    for opt in job.options:
        need, acc = amount(job, opt), qkey(job, opt)
        nominal = not st.quota.needs_borrow(job.team, acc, need)
        print(f"  option {opt.index} {acc} x{need}: lacks {st.quota.shortfall(job.team, acc, need)} of its quota"
              f" ({'within' if nominal else 'beyond'} nominal)")
        for ids, p, why in preempt._victim_groups(st, job, opt, need, nominal):
            held = sum(amount(st.live[j].info, st.live[j].option) for j in ids
                       if qkey(st.live[j].info, st.live[j].option) == acc)
            print(f"    may preempt {len(ids)} of class {p} holding {held} {acc}: {why}")
        found = preempt._victim_pools(st, job, opt, need, nominal)
        if found is None:
            print("    no victims")
            continue
        _, freed_usd, young, _ = found
        now, freed = st.budget_room(job.team), st.budget_room(job.team, freed_usd)
        print(f"    budget room ${now:,.0f}/h now, ${freed:,.0f}/h with every victim's spend freed"
              + (f"; too young: {young}" if young else ""))
        for ps in st.candidates(job, opt):
            gang = st.gang(opt, ps)
            charge = ps.least_charge(gang, job.job.replicas)
            room = ps.may_fit(gang, job.job.replicas) and ps.find(gang, job.job.replicas) is not None
            held_by: Counter[tuple[str, int, bool, bool]] = Counter()
            for lv in st.live.values():
                if lv.pool is ps:
                    held_by[(lv.info.team, lv.info.priority, lv.kept,
                             st.quota.is_borrowing(lv.info.team, qkey(lv.info, lv.option)))] += amount(lv.info, lv.option)
            print(f"    pool {ps.pool.key}: charge ${charge:,.0f}/h, room now {room}, held by "
                  + ", ".join(f"{t}/{p}{' kept' if k else ''}{' borrowing' if b else ''}: {n}"
                              for (t, p, k, b), n in sorted(held_by.items())))


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, seed=1)
    ap.add_argument("--job", required=True)
    ap.add_argument("--from-hour", type=float, required=True)
    ap.add_argument("--to-hour", type=float, required=True)
    ap.add_argument("--every", type=int, default=1, help="print every N-th weighing in the window")
    args = ap.parse_args()
    _, sim = bs.seed_engine(args)
    if args.job not in sim.by_id:
        sys.exit(f"error: --job {args.job}: no job of that id in the seed's trace (ids are team/name)")
    policy = make("fleet", sim)
    step, search = preempt.try_preempt, preempt._victims_for     # greedy.py calls the first by its own name
    seen = {"n": 0, "on": False}

    def searched(st: PlanState, job: JobInfo, opt: ResolvedOption, ps: PoolState,
                 allowed_here: list[tuple[float, int, str, str]]) -> list[Victim] | None:
        chosen = search(st, job, opt, ps, allowed_here)
        if seen["on"]:
            print(f"    searched {ps.pool.key} ({len(allowed_here)} victims): "
                  f"{None if chosen is None else [(v.job, round(v.lost)) for v in chosen]}")
        return chosen

    def watched(st: PlanState, job: JobInfo) -> bool:
        hour = sim.now / 3600
        if hour > args.to_hour:
            raise SystemExit(0)
        if job.id != args.job or hour < args.from_hour:
            return step(st, job)
        seen["n"] += 1
        if (seen["n"] - 1) % args.every:
            return step(st, job)
        print(f"hour {hour:.2f}: {job.id}, class {job.priority}")
        weighed(st, job)
        seen["on"] = True
        try:
            placed = step(st, job)
        finally:
            seen["on"] = False
        print(f"  placed: {placed}" + (f"; waits: {w}" if (w := st.outcome.spared.get(job.id)) else ""))
        return placed

    greedy.try_preempt = watched  # type: ignore[attr-defined]
    preempt._victims_for = searched     # try_preempt calls it through the module
    sim.run(policy)


if __name__ == "__main__":
    main()
