"""What the reconcile loop's plans said about a few jobs over a window of simulated hours: `fleet` on
bench_simulate.py's trace of a seed (the same run, so the same figures). Not a timing.

    python bench/watch_plans.py --jobs 10000 --days 30 --seed 1 --from-hour 450.85 --to-hour 454.7 \
        --job foundation/pretrain-06138 --job serving/pretrain-03839 --job serving/pretrain-06132

For each loop cycle in the window: the plan's preemptions that name a followed job (victim, preemptor, minutes
to the victim's checkpoint), each followed job's placement (units, kept from what runs or new) or pending
reasons, and where the simulator has it (state, pool, units). It watches `planner.plan_with_state` (what the
loop's plan calls), asking for the reasons the loop's plan leaves out; the placements are the same either way
(tests/test_incremental.py). docs/benchmarks.md, "a preemptor's claim carried across cycles", used it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.plan import planner
from reconciler.simulate.policies import make


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, seed=1)
    ap.add_argument("--from-hour", type=float, required=True)
    ap.add_argument("--to-hour", type=float, required=True)
    ap.add_argument("--job", action="append", required=True, help="a job to follow (repeatable)")
    args = ap.parse_args()
    _, sim = bs.seed_engine(args)
    policy = make("fleet", sim)
    followed = set(args.job)
    planned = planner.plan_with_state

    def watch(*a: Any, **kw: Any) -> Any:
        plan, st = out = planned(*a, **{**kw, "for_people": True})
        hour = sim.now / 3600
        if not args.from_hour <= hour <= args.to_hour:
            return out
        print(f"hour {hour:.2f}")
        for p in plan.preemptions:
            if p.job in followed or p.by in followed:
                print(f"  preempt {p.job} for {p.by}, after {p.after_minutes} min")
        for pl in plan.placements:
            if pl.job in followed:
                lv = st.live.get(pl.job)
                print(f"  placed {pl.job} on {pl.cluster}/{pl.pool} {pl.units} "
                      f"({'kept' if lv is not None and lv.kept else 'new'})")
        for p in plan.pending:
            if p.job in followed:
                print(f"  pending {p.job}: {' | '.join(p.reasons)}")
        for j in sim.jobs:
            if j.id in followed:
                print(f"  simulator: {j.id} {j.state} {j.pool.key if j.pool else '-'} {j.units}")
        return out

    planner.plan_with_state = watch   # type: ignore[assignment]
    sim.run(policy)


if __name__ == "__main__":
    main()
