"""Whose nominal quota a policy withheld, and from which jobs: `violations.nominal_withheld_accelerator_hours`
(reconciler/simulate/rules.py `withheld`) split by team, accelerator and the waiting jobs that wanted it. Not a
timing.

    python bench/withheld.py --jobs 10000 --days 30 --seed 1 [--policies fleet,cheapest] [--top 15]
    python bench/withheld.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace --seed 1

Runs each policy on the seed's trace as bench_simulate.py does (the same runs: the figure printed is the JSON's),
and at each loop interval, where a lending domain's accelerator has quota withheld, shares that withheld figure
among the waiting jobs that wanted it (in proportion to what each wanted, as `withheld` counts them). Prints,
per policy: the total; by team and accelerator; by the wanting job's class; and the --top jobs, each with its
accelerators, class, submission hour, first start hour (or never) and its share in accelerator-hours.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.simulate import rules
from reconciler.simulate.engine import Engine
from reconciler.simulate.policies import make
from reconciler.simulate.state import SimJob

T = TypeVar("T")


def watch(sim: Engine) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """Wrap the engine's `Watch.look` to share each interval's withheld figure among the jobs that wanted it:
    per job and per (team, accelerator), accelerator-hours, filled in as the run goes."""
    per_job: dict[str, float] = defaultdict(float)
    per_key: dict[tuple[str, str], float] = defaultdict(float)
    look = sim.watch.look

    def watched(waiting: Iterable[SimJob], could: rules.Could | None = None) -> None:
        jobs = list(waiting)
        look(jobs, could)      # the run's own rows, the priority row's condition too
        if not sim.watch.withheld:
            return
        by_dom: dict[tuple[str, str], list[rules.Want]] = defaultdict(list)
        for w in rules.wanting(sim.watch.ledger, jobs):
            by_dom[(w[2], w[1])].append(w)
        hours = sim.interval_s / 3600
        for group in by_dom.values():
            part = rules.held(sim.watch.ledger, group) * hours
            total = sum(w[3] for w in group)
            for j, acc, _, n in group:
                per_job[j.id] += part * n / total
                per_key[(j.team, acc)] += part * n / total

    sim.watch.look = watched  # type: ignore[method-assign]
    return per_job, per_key


def shares(sim: Engine, per_job: dict[str, float], per_key: dict[tuple[str, str], float], top: int) -> None:
    """Print accelerator-hours charged to waiting jobs: by team and accelerator, by the job's class, and the
    `top` jobs (accelerators, class, submitted, first start or never). bench/inverted.py prints its own this way."""
    print("\n| team | accelerator | accelerator-hours |\n|---|---|---:|")
    for (team, acc), h in sorted(per_key.items(), key=lambda kv: -kv[1]):
        print(f"| {team} | {acc} | {h:,.0f} |")
    by_cls: dict[str, float] = defaultdict(float)
    for job, h in per_job.items():
        by_cls[sim.by_id[job].cls] += h
    print("\n| class of the waiting job | accelerator-hours |\n|---|---:|")
    for cls, h in sorted(by_cls.items(), key=lambda kv: -kv[1]):
        print(f"| {cls} | {h:,.0f} |")
    print("\n| job | accelerators | class | submitted (h) | first start (h) | accelerator-hours |")
    print("|---|---:|---|---:|---:|---:|")
    for job, h in sorted(per_job.items(), key=lambda kv: -kv[1])[:top]:
        j = sim.by_id[job]
        start = "never" if j.first_start_s is None else f"{j.first_start_s / 3600:,.1f}"
        print(f"| {job} | {j.asked} | {j.cls} | {j.submit_s / 3600:,.1f} | {start} | {h:,.0f} |")


def each_policy(watch_fn: Callable[[Engine], T]) -> Iterator[tuple[str, Engine, T, argparse.Namespace]]:
    """Parse the command line (a seed's trace, --policies, --top), then run each policy on the trace with
    `watch_fn` wrapping its engine first: (policy, engine after the run, what `watch_fn` returned, arguments)."""
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, seed=1)
    ap.add_argument("--policies", default="fleet,cheapest")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    s, trace = bs.seed_trace(args)
    for name in args.policies.split(","):
        sim = Engine(trace, bs.faults_of(s), args.seed, s.days, s.interval)
        watched = watch_fn(sim)
        sim.run(make(name, sim))
        yield name, sim, watched, args


def main() -> None:
    for name, sim, (per_job, per_key), args in each_policy(watch):
        print(f"## `{name}`, seed {args.seed}: {sim.c.withheld_acc_h:,.0f} accelerator-hours of nominal quota "
              f"withheld (shared among the jobs: {sum(per_job.values()):,.0f})")
        shares(sim, per_job, per_key, args.top)
        print()

if __name__ == "__main__":
    main()
