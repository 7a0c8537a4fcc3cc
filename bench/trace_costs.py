"""Where a policy's work and money go: the probes behind docs/benchmarks.md's "checkpoint clock" section, on
bench_simulate.py's generated trace of a seed.

    python bench/trace_costs.py preemptions [--jobs 2000] [--days 7] [--seed 1] [--repo .]
    python bench/trace_costs.py migrations [--jobs 2000] [--days 7] [--seed 1] [--repo .]
    python bench/trace_costs.py held [--policies cheapest,fleet] [--jobs 2000] [--days 7] [--seed 1] [--repo .]
    python bench/trace_costs.py unfinished [--policies cheapest,fleet] [--jobs 2000] [--days 7] [--seed 1] [--large 256]

Not a timing. `preemptions` (policy `fleet`): every preemption the simulator carries out, with the plan's
preemption behind it: how many stopped their victim at once and how many at its checkpoint (`after_minutes`),
the accelerator-hours each kind lost to the preemption itself and to the victim's warm-up already spent, and
the victims preempted more than once. `held`: per policy, accelerator-hours held by running or starting gangs
and their dollars, by (capacity, accelerator, priority class, spot policy), dearest first. `unfinished`: per
policy, accelerator-hours completed against the work done counting the progress of jobs not finished, the
preemptions that stopped a running gang of `--large` accelerators or more, and the jobs preempted most; then
the jobs the first policy completed and the second did not, by (class, spot policy, accelerator, size), and
each of the largest with what the second policy made of it. Each watches the run
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


def migrations(args: argparse.Namespace) -> None:
    """Every job the engine stops to move (policy `fleet`), by the loop action that moved it: a `move` by the
    first words of its reason (re-pack, a preemption victim placed again, ...), or a `start` where the plan
    places a job that runs or is starting elsewhere (a service's groups, or a start still waiting for units)."""
    sim = _engine(args)
    acting: list[str] = []
    kinds: Counter[str] = Counter()
    move, start, stop = simloop.SimActuator.move, simloop.SimActuator.start, Engine.stop

    def watch(kind: str, act: Any) -> Any:
        def watched(self: Any, action: Any) -> Any:
            acting.append("start" if kind == "start" else _reason_kind(action.reason))
            try:
                return act(self, action)
            finally:
                acting.pop()
        return watched

    def watch_stop(self: Engine, j: Any, why: str) -> None:
        if why == "move" and j.state in ("starting", "running"):
            kind = acting[0] if acting else "other"    # a move starts its new copy through start: the outer one
            if kind == "start":
                kind = (f"start: {'a service' if j.job.kind == 'inference' else 'a job'} {j.state} elsewhere, "
                        "started where the plan places it")
            kinds[kind] += 1
        stop(self, j, why)

    simloop.SimActuator.move = watch("move", move)      # type: ignore[method-assign]
    simloop.SimActuator.start = watch("start", start)   # type: ignore[method-assign]
    Engine.stop = watch_stop                             # type: ignore[method-assign]
    try:
        sim.run(make("fleet", sim))
    finally:
        simloop.SimActuator.move, simloop.SimActuator.start, Engine.stop = move, start, stop  # type: ignore[method-assign]
    print(f"fleet, {args.jobs} jobs over {args.days:g} days, seed {args.seed}: {sim.c.migrations} migrations")
    for kind, n in kinds.most_common():
        print(f"  {n:5d}  {kind}")


def _reason_kind(reason: str) -> str:
    if reason.startswith("re-packed"):
        return "move: re-pack"
    if reason.startswith("preempted by"):
        return "move: a preemption victim placed again on another pool"
    return "move: " + " ".join(reason.split()[:4])


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


def unfinished(args: argparse.Namespace) -> None:
    policies = args.policies.split(",")
    stop = Engine.stop
    ended: dict[str, dict[str, Any]] = {}
    for policy in policies:
        sim = _engine(args)
        stops: Counter[str] = Counter()
        large = 0

        def watch_stop(self: Engine, j: Any, why: str, stops: Counter[str] = stops) -> None:
            nonlocal large
            if why == "preempt" and j.state == "running":
                stops[j.id] += 1
                large += j.accelerators >= args.large
            stop(self, j, why)

        Engine.stop = watch_stop                          # type: ignore[method-assign]
        try:
            sim.run(make(policy, sim))
        finally:
            Engine.stop = stop                            # type: ignore[method-assign]
        jobs = ended[policy] = {}
        for j in sim.jobs:
            size = j.asked
            jobs[j.id] = {"job": j, "size": size, "done": j.state == "done", "work": j.work_h * size,
                          "progress": (j.work_h if j.state == "done" else j.done_h) * size}
        completed = sum(r["work"] for r in jobs.values() if r["done"])
        print(f"{policy}, {args.jobs} jobs over {args.days:g} days, seed {args.seed}: {completed:,.0f} accelerator-hours "
              f"completed, {sum(r['progress'] for r in jobs.values()):,.0f} done counting unfinished jobs' progress; "
              f"{sum(stops.values())} preemptions of running work, {large} of a gang of {args.large} or more")
        most = ", ".join(f"{j} ({n})" for j, n in stops.most_common(5) if n > 1)
        print(f"  preempted most: {most or 'none more than once'}")
    if len(policies) < 2:
        return
    first, second = ended[policies[0]], ended[policies[1]]
    only = [r for job_id, r in first.items() if r["done"] and not second[job_id]["done"]]
    print(f"completed by {policies[0]}, not by {policies[1]}: {len(only)} jobs, "
          f"{sum(r['work'] for r in only):,.0f} accelerator-hours")
    groups: Counter[tuple[str, str, str, int]] = Counter()
    hours: Counter[tuple[str, str, str, int]] = Counter()
    for r in only:
        j = r["job"]
        key = (j.cls, j.spot, j.options[0].accelerator if j.options else "", r["size"])
        groups[key] += 1
        hours[key] += r["work"]
    for key in sorted(hours, key=lambda k: (-hours[k], k))[:args.top]:
        print(f"  {' / '.join(map(str, key))}: {groups[key]} jobs, {hours[key]:,.0f} accelerator-hours")
    for r in sorted(only, key=lambda r: (-r["work"], r["job"].id))[:args.top]:
        j, o = r["job"], second[r["job"].id]["job"]
        start = "never started" if o.first_start_s is None else f"started day {o.first_start_s / 86400:.1f}"
        print(f"  {j.id} ({r['size']} x {j.work_h:.1f} h, submitted day {j.submit_s / 86400:.1f}): under "
              f"{policies[1]} {o.state}, {start}, {o.done_h:.1f} h done, {o.interruptions} interruptions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", choices=("preemptions", "migrations", "held", "unfinished"))
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policies", default="cheapest,fleet", help="held, unfinished: the policies to compare")
    ap.add_argument("--large", type=int, default=256, help="unfinished: the gang size counted as large")
    ap.add_argument("--top", type=int, default=20, help="held: the dearest rows shown")
    ap.add_argument("--repo", type=Path, default=ROOT)
    args = ap.parse_args()
    {"preemptions": preemptions, "migrations": migrations, "held": held, "unfinished": unfinished}[args.report](args)


if __name__ == "__main__":
    main()
