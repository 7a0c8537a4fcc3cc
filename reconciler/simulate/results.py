"""What a simulation measured: the JSON of DESIGN 4c, Markdown, and the series the HTML report draws. Pure.

Definitions (DESIGN 4c): `allocation` = accelerator-hours occupied by running gangs / accelerator-hours paid;
`goodput` = accelerator-hours of work that counted toward a job's completion (checkpointed or finished; work
redone after a fault or a move counts once) / accelerator-hours paid; `lost_accelerator_hours` = work lost
since the last checkpoint on interruptions, plus each interruption's restart time spent (restore and warm-up,
faults.py). `accelerator_hours_completed`: the work of the completed jobs (duration x accelerators of the
first option), so finishing one large job counts as much as many small ones; `usd_per_kept_accelerator_hour`:
dollars paid over accelerator-hours kept (goodput's numerator), idle spend included. `violations`: accelerator-
hours over quota (beyond borrowing limits, or borrowed beyond what the cohort lends) and team-hours over the
hourly budget, and accelerator-hours of a team's nominal quota its waiting jobs wanted while its cohort-mates
borrowed it, where the policies state `reclaim_within_cohort: any` (nominal quota is then a guarantee),
integrated over the run (rules.py). `queue_wait_minutes` per priority class: from submission to the
job's first start; a job that never started counts with its wait so far at the end of the simulation (so a
policy that starves a class cannot look good by never starting it), and `never_started` counts such jobs (a
p99 over thousands of jobs does not show a few that starve); `mean` is the mean wait, and `p99_by_accelerator`
the p99 of the wait each requested accelerator saw (a job weighs as many accelerators as its first option asks
for all its replicas: a policy that starves the few 8-GPU jobs of a class among thousands of 1-GPU ones keeps a
short plain p99, since those jobs are under 1% of the class, but not a short p99 by accelerator). `jct_hours`:
submission to completion of completed jobs. Percentiles are nearest-rank. Every float is rounded (4 decimals for
ratios, 2 for hours, minutes and dollars) so the JSON is byte-identical for equal inputs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .engine import Engine
from .state import Sample


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of the values; 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def weighted_percentile(values: Sequence[tuple[float, float]], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of (value, weight) pairs: the smallest value such that the values
    up to it weigh at least q% of the total weight (equal weights: `percentile`); 0.0 for none or no weight."""
    total = sum(w for _, w in values)
    if total <= 0:
        return 0.0
    need, seen = q / 100 * total, 0.0
    ordered = sorted(values)
    for value, weight in ordered:
        seen += weight
        if seen >= need - 1e-9 * total:
            return value
    return ordered[-1][0]


@dataclass(frozen=True)
class Result:
    policy: str
    days: float
    seed: int
    doc: dict[str, Any]
    samples: tuple[Sample, ...]
    lost_by: tuple[tuple[str, float], ...] = ()     # accelerator-hours lost per cause (Markdown only)

    def to_json(self) -> str:
        return json.dumps(self.doc, indent=2) + "\n"


def _days(days: float) -> float | int:
    return int(days) if float(days).is_integer() else round(days, 4)


def result(sim: Engine, policy: str, days: float, seed: int) -> Result:
    submitted = [j for j in sim.jobs if j.submit_s < sim.end_s]
    completed = [j for j in submitted if j.state == "done"]
    waits: dict[str, list[float]] = {c: [] for c in sim.class_order}
    weighted: dict[str, list[tuple[float, float]]] = {c: [] for c in sim.class_order}
    never: dict[str, int] = {c: 0 for c in sim.class_order}
    for j in submitted:
        start = j.first_start_s if j.first_start_s is not None else sim.end_s
        waits[j.cls].append((start - j.submit_s) / 60)
        weighted[j.cls].append(((start - j.submit_s) / 60, float(j.asked)))
        never[j.cls] += j.first_start_s is None
    jct = [(j.finish_s - j.submit_s) / 3600 for j in completed if j.finish_s is not None]
    c = sim.c
    paid = c.paid_acc_h
    doc: dict[str, Any] = {
        "policy": policy, "days": _days(days), "seed": seed,
        "jobs": {"submitted": len(submitted), "completed": len(completed), "failed": 0,
                 "unfinished": len(submitted) - len(completed)},
        "jct_hours": {"mean": round(sum(jct) / len(jct), 2) if jct else 0.0,
                      "p50": round(percentile(jct, 50), 2), "p99": round(percentile(jct, 99), 2)},
        "queue_wait_minutes": {cls: {"p50": round(percentile(w, 50), 2), "p99": round(percentile(w, 99), 2),
                                     "max": round(max(w, default=0.0), 2), "never_started": never[cls],
                                     "mean": round(sum(w) / len(w), 2) if w else 0.0,
                                     "p99_by_accelerator": round(weighted_percentile(weighted[cls], 99), 2)}
                               for cls, w in waits.items()},
        "allocation": round(c.busy_acc_h / paid, 4) if paid else 0.0,
        "goodput": round(c.good_acc_h / paid, 4) if paid else 0.0,
        "lost_accelerator_hours": round(c.lost_acc_h, 2),
        "cost_usd": round(c.cost_usd, 2),
        "migrations": c.migrations, "preemptions": c.preemptions,
        "faults": dict(c.faults),
        "accelerator_hours_completed": round(c.completed_acc_h, 2),
        "usd_per_kept_accelerator_hour": round(c.cost_usd / c.good_acc_h, 2) if c.good_acc_h else 0.0,
        "violations": {"quota_accelerator_hours": round(c.over_quota_acc_h, 2),
                       "budget_hours": round(c.over_budget_h, 2),
                       "nominal_withheld_accelerator_hours": round(c.withheld_acc_h, 2),
                       "priority_inverted_accelerator_hours": round(c.inverted_acc_h, 2)},
    }
    return Result(policy, days, seed, doc, tuple(sim.samples),
                  tuple(sorted((k, round(v, 2)) for k, v in c.lost_by.items())))


def markdown(results: Sequence[Result], trace: str) -> str:
    """One policy: its figures; several: the side-by-side table."""
    first = results[0]
    classes = list(first.doc["queue_wait_minutes"])
    lines = [f"# fleet simulate: {trace}", "",
             f"{_days(first.days)} simulated days, seed {first.seed}, "
             f"{first.doc['jobs']['submitted']} jobs submitted.", ""]
    head = "| | " + " | ".join(f"`{r.policy}`" for r in results) + " |"
    lines += [head, "|---|" + "---:|" * len(results)]

    def row(label: str, get: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(get(r.doc) for r in results) + " |")

    row("jobs completed", lambda d: f"{d['jobs']['completed']:,}")
    row("accelerator-hours completed", lambda d: f"{d['accelerator_hours_completed']:,.0f}")
    row("jobs unfinished", lambda d: f"{d['jobs']['unfinished']:,}")
    for cls in classes:
        row(f"{cls} queue wait p50 / p99 (min), never started",
            lambda d, c=cls: f"{d['queue_wait_minutes'][c]['p50']:,.1f} / {d['queue_wait_minutes'][c]['p99']:,.1f}, "
                             f"{d['queue_wait_minutes'][c]['never_started']:,}")
    for cls in classes:
        row(f"{cls} queue wait mean / p99 by accelerator (min)",
            lambda d, c=cls: f"{d['queue_wait_minutes'][c]['mean']:,.1f} / "
                             f"{d['queue_wait_minutes'][c]['p99_by_accelerator']:,.1f}")
    row("job completion time p50 / p99 (h)", lambda d: f"{d['jct_hours']['p50']:,.2f} / {d['jct_hours']['p99']:,.2f}")
    row("allocation", lambda d: f"{d['allocation']:.1%}")
    row("goodput", lambda d: f"{d['goodput']:.1%}")
    row("lost accelerator-hours", lambda d: f"{d['lost_accelerator_hours']:,.0f}")
    causes = sorted({k for r in results for k, _ in r.lost_by})
    for cause in causes:
        lines.append(f"| lost to {cause} | " + " | ".join(f"{dict(r.lost_by).get(cause, 0.0):,.0f}" for r in results)
                     + " |")
    row("cost", lambda d: f"${d['cost_usd']:,.0f}")
    row("$ per kept accelerator-hour", lambda d: f"${d['usd_per_kept_accelerator_hour']:,.2f}")
    row("violations: quota accelerator-hours / budget team-hours",
        lambda d: f"{d['violations']['quota_accelerator_hours']:,.0f} / {d['violations']['budget_hours']:,.1f}")
    row("violations: nominal quota withheld from its team, accelerator-hours",
        lambda d: f"{d['violations']['nominal_withheld_accelerator_hours']:,.0f}")
    row("violations: priority inverted within a team, accelerator-hours",
        lambda d: f"{d['violations']['priority_inverted_accelerator_hours']:,.0f}")
    row("migrations / preemptions", lambda d: f"{d['migrations']} / {d['preemptions']}")
    row("faults: node / slice / spot / cluster",
        lambda d: " / ".join(str(d["faults"][k]) for k in ("node", "slice", "spot", "cluster")))
    return "\n".join(lines) + "\n"


def to_json(results: Sequence[Result]) -> str:
    """One policy: its DESIGN 4c document; several: a list of them, in the order asked."""
    if len(results) == 1:
        return results[0].to_json()
    return json.dumps([r.doc for r in results], indent=2) + "\n"
