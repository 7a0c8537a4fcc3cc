"""Where a policy's work and money go: the probes behind docs/benchmarks.md's "checkpoint clock" section, on
bench_simulate.py's generated trace of a seed.

    python bench/trace_costs.py preemptions [--jobs 2000] [--days 7] [--seed 1] [--repo .]
    python bench/trace_costs.py held [--policies cheapest,fleet] [--jobs 2000] [--days 7] [--seed 1] [--repo .]

Not a timing. `preemptions` (policy `fleet`): every preemption the simulator carries out, with the plan's
preemption behind it: how many stopped their victim at once and how many at its checkpoint (`after_minutes`),
the accelerator-hours each kind lost to the preemption itself and to the victim's warm-up already spent, and
the victims preempted more than once. `held`: per policy, accelerator-hours held by running or starting gangs
and their dollars, by (capacity, accelerator, priority class, spot policy), dearest first. Both watch the run
(the loop's cycle, the engine's stops and accruals) without changing it, so the figures are those of the run
bench_simulate.py measures.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.simulate import loop as simloop
from reconciler.simulate.engine import Engine
from reconciler.simulate.policies import make


def _engine(args: argparse.Namespace) -> Engine:
    s = bs.Setup(repo=args.repo, jobs=args.jobs, days=args.days, load=0.9, interval=300, restart_minutes=None,
                 trace=None, alibaba=None, from_day=0, size_to_trace=False, size_load=0.9)
    trace, _ = bs._trace(s, args.seed)
    return Engine(trace, bs.faults_of(s), args.seed, s.days, s.interval)


def preemptions(args: argparse.Namespace) -> None:
    sim = _engine(args)
    planned: dict[str, Any] = {}
    step = simloop.step

    def watch_step(*a: Any, **k: Any) -> Any:
        thought = step(*a, **k)
        planned.clear()
        planned.update({p.job: p for p in thought.plan.preemptions})
        return thought

    stop = Engine.stop
    count: Counter[str] = Counter()
    lost: Counter[tuple[str, str]] = Counter()
    victims: Counter[str] = Counter()

    def watch_stop(self: Engine, j: Any, why: str) -> None:
        if why != "preempt" or j.state != "running":
            stop(self, j, why)
            return
        before = dict(self.c.lost_by)
        stop(self, j, why)
        p = planned.get(j.id)
        kind = "no plan preemption" if p is None else "at once" if p.after_minutes is None else "at its checkpoint"
        count[kind] += 1
        victims[j.id] += 1
        for cause in ("preempt", "restart"):
            lost[(kind, cause)] += self.c.lost_by.get(cause, 0.0) - before.get(cause, 0.0)

    simloop.step, Engine.stop = watch_step, watch_stop    # type: ignore[method-assign]
    try:
        sim.run(make("fleet", sim))
    finally:
        simloop.step, Engine.stop = step, stop            # type: ignore[method-assign]
    print(f"fleet, {args.jobs} jobs over {args.days:g} days, seed {args.seed}: {sum(count.values())} preemptions")
    for kind, n in sorted(count.items()):
        print(f"  stopped {kind}: {n}, lost {lost[(kind, 'preempt')]:,.1f} accelerator-hours to the preemption "
              f"and {lost[(kind, 'restart')]:,.1f} of warm-up already spent")
    again = sorted(((n, j) for j, n in victims.items() if n > 1), reverse=True)
    print(f"  {len(victims)} distinct victims; preempted more than once: "
          + (", ".join(f"{j} ({n})" for n, j in again) or "none"))


def held(args: argparse.Namespace) -> None:
    accrue = Engine._accrue
    for policy in args.policies.split(","):
        sim = _engine(args)
        acc: Counter[tuple[str, str, str, str]] = Counter()
        usd: Counter[tuple[str, str, str, str]] = Counter()

        def watch_accrue(self: Engine, t: int, acc: Counter[Any] = acc, usd: Counter[Any] = usd) -> None:
            hours = (t - self.last_s) / 3600
            if hours > 0:
                for j in self.active.values():
                    if j.state in ("starting", "running"):
                        for g in j.groups():
                            rp = g.pool.rp
                            key = (rp.capacity, rp.accelerator, j.cls, j.spot)
                            n = g.per_unit * len(g.units)
                            acc[key] += n * hours
                            usd[key] += n / rp.unit_accelerators * g.pool.unit_hourly_usd * hours
            accrue(self, t)

        Engine._accrue = watch_accrue                     # type: ignore[method-assign]
        try:
            sim.run(make(policy, sim))
        finally:
            Engine._accrue = accrue                       # type: ignore[method-assign]
        print(f"{policy}, {args.jobs} jobs over {args.days:g} days, seed {args.seed}: "
              f"{sum(acc.values()):,.0f} accelerator-hours held, ${sum(usd.values()):,.0f}")
        for key in sorted(acc, key=lambda k: (-usd[k], k))[:args.top]:
            print(f"  {' / '.join(key)}: {acc[key]:,.0f} accelerator-hours, ${usd[key]:,.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", choices=("preemptions", "held"))
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="cheapest,fleet", help="held: the policies to compare")
    ap.add_argument("--top", type=int, default=20, help="held: the dearest rows shown")
    ap.add_argument("--repo", type=Path, default=ROOT)
    args = ap.parse_args()
    (preemptions if args.report == "preemptions" else held)(args)


if __name__ == "__main__":
    main()
