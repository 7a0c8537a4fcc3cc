"""How true the plan's expected starts are: `fleet` on bench_simulate.py's trace of a seed (or its Alibaba replay),
and for every job the loop's plan left pending, the start the plan first told it (`expected_start`, hours from
that plan) against the hour a plan first placed it. Not a timing.

    python bench/start_accuracy.py --jobs 10000 --days 30 --seed 1
    python bench/start_accuracy.py --alibaba openb_pod_list_default.csv --from-day 119 --days 30 --size-to-trace \
        --seed 1

Per class: the jobs told a start when they first waited, those told none ("cannot tell"), those never placed by
the trace's end; of the told ones placed, how late the placement came against what was told (placed - told, in
hours: median, mean of its size, p90, how many more than an hour late or early), and how many were told a start
within a quarter of an hour yet were placed more than an hour after it (a queue the reckoning does not see: each
pending job's start is reckoned apart, against running work and reservations only; docs/benchmarks.md). The
loop plans without expected starts (for_people=False); this asks for them, and the placements are the same
either way (tests/test_incremental.py), so the run is the one bench_simulate.py measures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_simulate as bs

from reconciler.plan import planner
from reconciler.simulate.engine import Engine
from reconciler.simulate.policies import make


@dataclass
class Told:
    """What the plans told: per job, (the hour it was first left pending, the expected start then in hours or
    None); and the hour a plan first placed it after that."""

    first: dict[str, tuple[float, float | None]] = field(default_factory=dict)
    placed: dict[str, float] = field(default_factory=dict)

    def late(self, job: str) -> float | None:
        """How many hours after the start it was told the job was placed (negative: earlier); None where it was
        told no start or never placed."""
        at, expected = self.first[job]
        if expected is None or job not in self.placed:
            return None
        return self.placed[job] - (at + expected)


def watch(sim: Engine) -> Told:
    """Wrap the planner so that each of the run's plans records what it tells its pending jobs and whom it
    places (module docstring); filled in as the run goes."""
    told = Told()
    planned = planner.plan_with_state

    def watched(*a: Any, **kw: Any) -> Any:
        plan, _ = out = planned(*a, **{**kw, "for_people": True})
        hour = sim.now / 3600
        for p in plan.pending:
            told.first.setdefault(p.job, (hour, p.expected_start))
        for pl in plan.placements:
            if pl.job in told.first:
                told.placed.setdefault(pl.job, hour)
        return out

    planner.plan_with_state = watched
    return told


def summary(told: Told, classes: dict[str, str]) -> list[dict[str, Any]]:
    """One row per class (`classes`: job id -> class name; jobs not in it are left out), as the module
    docstring lists."""
    rows = []
    for cls in sorted(set(classes.values())):
        jobs = [j for j in told.first if classes.get(j) == cls]
        pairs = [(told.first[j][1] or 0.0, x) for j in jobs if (x := told.late(j)) is not None]   # (told, late)
        late = sorted(x for _, x in pairs)
        rows.append({
            "class": cls, "waited": len(jobs), "told none": sum(told.first[j][1] is None for j in jobs),
            "never placed": sum(j not in told.placed for j in jobs), "told and placed": len(late),
            "median late (h)": round(statistics.median(late), 2) if late else None,
            "mean abs late (h)": round(statistics.fmean(abs(x) for x in late), 2) if late else None,
            "p90 late (h)": round(late[int(0.9 * (len(late) - 1))], 2) if late else None,
            "over 1 h late": sum(x > 1 for x in late), "over 1 h early": sum(x < -1 for x in late),
            "told <= 0.25 h, over 1 h late": sum(e <= 0.25 and x > 1 for e, x in pairs)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    bs.seed_args(ap, seed=1)
    args = ap.parse_args()
    _, sim = bs.seed_engine(args)
    told = watch(sim)
    sim.run(make("fleet", sim))
    rows = summary(told, {j.id: j.cls for j in sim.jobs})
    keys = list(rows[0]) if rows else []
    print(f"## `fleet`, seed {args.seed}: expected starts against placements\n")
    print("| " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * (len(keys) - 1))
    for r in rows:
        print("| " + " | ".join("-" if r[k] is None else f"{r[k]:,}" if isinstance(r[k], int) else str(r[k])
                                for k in keys) + " |")


if __name__ == "__main__":
    main()
