"""Whose quota a team's own lower-class work held from its higher-class waiting jobs, under each policy:
`violations.priority_inverted_accelerator_hours` (reconciler/simulate/rules.py `inverted`) split by team,
accelerator and waiting job. Not a timing.

    python bench/inverted.py --jobs 10000 --days 30 --seed 1 [--policies fleet,cheapest] [--top 15]
    python bench/inverted.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace --seed 1

Runs each policy on the seed's trace as bench_simulate.py does (the same runs: the figure printed is the JSON's)
and, at each loop interval, charges each waiting job what `inverted` counts for it. Prints, per policy: the total;
by team and accelerator; by the waiting job's class; the --top jobs, each with its accelerators, class, submission
hour, first start hour (or never) and its accelerator-hours; and by how long the job had waited when counted
(under 1 hour, 1-6, 6-24, over 24).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from withheld import each_policy, shares

from reconciler.simulate import rules
from reconciler.simulate.engine import Engine
from reconciler.simulate.state import SimJob

WAITED = ((1, "under 1 h"), (6, "1-6 h"), (24, "6-24 h"), (float("inf"), "over 24 h"))


def watch(sim: Engine) -> tuple[dict[str, float], dict[tuple[str, str], float], dict[str, float]]:
    """Wrap the engine's `Watch.look` to charge each interval's inverted accelerators to their waiting jobs:
    per job, per (team, accelerator) and per time waited so far, accelerator-hours, filled in as the run goes."""
    per_job: dict[str, float] = defaultdict(float)
    per_key: dict[tuple[str, str], float] = defaultdict(float)
    per_wait: dict[str, float] = defaultdict(float)
    look = sim.watch.look

    def watched(waiting: Iterable[SimJob], could: rules.Could | None = None) -> None:
        jobs = list(waiting)
        look(jobs, could)
        if not sim.watch.inverted:
            return
        hours = sim.interval_s / 3600
        for j, acc, n in rules.inverted_for(sim.watch.ledger, sim.watch.low, jobs, could):
            per_job[j.id] += n * hours
            per_key[(j.team, acc)] += n * hours
            waited = (sim.now - j.submit_s) / 3600
            per_wait[next(name for bound, name in WAITED if waited < bound)] += n * hours

    sim.watch.look = watched  # type: ignore[method-assign]
    return per_job, per_key, per_wait


def main() -> None:
    for name, sim, (per_job, per_key, per_wait), args in each_policy(watch):
        print(f"## `{name}`, seed {args.seed}: {sim.c.inverted_acc_h:,.0f} accelerator-hours of priority inverted "
              f"within a team (charged to the jobs: {sum(per_job.values()):,.0f})")
        shares(sim, per_job, per_key, args.top)
        print("\n| waited so far when counted | accelerator-hours |\n|---|---:|")
        for _, label in WAITED:
            print(f"| {label} | {per_wait.get(label, 0.0):,.0f} |")
        print()

if __name__ == "__main__":
    main()
