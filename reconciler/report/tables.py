"""The report's tables as plain rows of strings, built once and laid out by both the Markdown and the HTML
templates (so the two formats can never disagree on a number). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cost.budget import BudgetViolation
from ..cost.history import HistoryPoint
from ..cost.model import HOURS_PER_MONTH, CostBreakdown, JobMeta
from ..diff import Delta, PlanDiff
from ..impact import BudgetBurn, Disrupted, Impact
from ..plan.types import Plan
from .fmt import pct, quota_cells, signed, usd

CHANGE_LABEL = {"start": "start", "move": "move", "preempt": "preempted", "stop": "stopped", "wait": "wait",
                "withdraw": "withdrawn"}


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    align: str                              # one of l/r per column
    rows: tuple[tuple[str, ...], ...]

    def __len__(self) -> int:
        return len(self.rows)


def job_changes(d: PlanDiff) -> Table:
    return Table(("change", "job", "before", "after", "Δ $/month", "why"), "llllrl", tuple(
        (CHANGE_LABEL[j.change], j.job, j.before or "–", j.after or "–", signed(j.hourly_delta_usd * HOURS_PER_MONTH),
         j.detail) for j in d.jobs))


def pool_changes(d: PlanDiff) -> Table:
    def target(t: int | None) -> str:
        return "–" if t is None else str(t)

    return Table(("pool", "accelerator", "target", "$/month before", "$/month after", "Δ $/month"), "llrrrr", tuple(
        (f"{p.cluster}/{p.pool}", p.accelerator, f"{target(p.target_before)} → {target(p.target_after)}",
         usd(p.hourly_before_usd * HOURS_PER_MONTH), usd(p.hourly_after_usd * HOURS_PER_MONTH),
         signed(p.hourly_delta_usd * HOURS_PER_MONTH)) for p in d.pools))


def quota_changes(d: PlanDiff, *, per_cluster: bool) -> Table:
    rows = tuple((q.team, q.accelerator, *((q.cluster,) if per_cluster else ()), *quota_cells(q))
                 for q in d.quotas if bool(q.cluster) == per_cluster)
    head = ("team", "accelerator", *(("cluster",) if per_cluster else ()), "nominal", "borrowing limit",
            "lending limit")
    return Table(head, "l" * (len(head) - 3) + "rrr", rows)


def deltas(rows: Sequence[Delta], what: str) -> Table:
    return Table((what, "$/month before", "$/month after", "Δ $/month", "Δ %"), "lrrrr", tuple(
        (x.name, usd(x.before_hourly_usd * HOURS_PER_MONTH), usd(x.after_hourly_usd * HOURS_PER_MONTH),
         signed(x.monthly_usd), pct(x.monthly_usd, x.before_hourly_usd * HOURS_PER_MONTH))
        for x in rows if round(x.monthly_usd) != 0))


def violations(vs: Sequence[BudgetViolation]) -> Table:
    def causes(v: BudgetViolation) -> str:
        """The jobs this change starts or moves first (what a reviewer can push back on), then the dearest."""
        ordered = sorted(v.jobs, key=lambda j: (j.job not in v.changed, -j.hourly_usd, j.job))
        top = [f"{j.job} ({usd(j.monthly_usd)}{', this change' if j.job in v.changed else ''})" for j in ordered[:5]]
        more = f", and {len(v.jobs) - 5} more" if len(v.jobs) > 5 else ""
        return ", ".join(top) + more

    return Table(("team", "budget $/month", "planned $/month", "over by", "jobs causing it"),
                 "lrrrl", tuple((v.team, usd(v.budget_monthly_usd), usd(v.planned_monthly_usd),
                                 usd(v.over_monthly_usd), causes(v)) for v in vs))


def cost_by(values: Mapping[str, float], what: str, idle_hourly_usd: float | None = None) -> Table:
    rows = sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))
    if idle_hourly_usd is not None:
        rows.append(("(idle capacity)", idle_hourly_usd))
    total = sum(v for _, v in rows) or 1.0
    return Table((what, "$/hour", "$/month", "share"), "lrrr", tuple(
        (k, f"{v:,.2f}", usd(v * HOURS_PER_MONTH), f"{v / total:.1%}") for k, v in rows))


def pools(c: CostBreakdown) -> Table:
    return Table(("pool", "accelerator", "capacity", "units paid (target)", "occupied", "unit $/h", "$/month",
                  "idle $/month", "price source"), "lllrrrrrl", tuple(
        (p.key, p.accelerator, p.capacity + (", queued" if p.queued else ""),
         f"{p.paid_units} requested" if p.queued else f"{p.paid_units} ({p.target})",
         f"{p.used_accelerators}/{p.paid_accelerators}", f"{p.unit_hourly_usd:,.2f}",
         usd(p.hourly_usd * HOURS_PER_MONTH),
         usd(p.idle_hourly_usd * HOURS_PER_MONTH), p.price_source + (" (UNCERTAIN)" if p.uncertain else ""))
        for p in c.pools if p.paid_units or p.used_accelerators))


def jobs(c: CostBreakdown) -> Table:
    ordered = sorted(c.jobs, key=lambda j: (-j.hourly_usd, j.job))
    return Table(("job", "pool", "accelerators", "$/hour", "$/month", "run h", "run cost"), "llrrrrr", tuple(
        (j.job, f"{j.cluster}/{j.pool}", f"{j.accelerators} {j.accelerator}", f"{j.hourly_usd:,.2f}",
         usd(j.monthly_usd), "–" if j.run_hours is None else f"{round(j.run_hours, 3):g}",
         "–" if j.run_usd is None else usd(j.run_usd)) for j in ordered))


def outside_data_region(c: CostBreakdown) -> Table:
    """Jobs the plan runs outside their data region (issue 11, defect 1), dearest first."""
    ordered = sorted((j for j in c.jobs if j.outside_data_region), key=lambda j: (-j.hourly_usd, j.job))
    return Table(("job", "data region", "runs on", "$/hour"), "lllr", tuple(
        (j.job, j.data_region or "–", f"{j.cluster}/{j.pool}", f"{j.hourly_usd:,.2f}") for j in ordered))


def history(points: Sequence[HistoryPoint]) -> Table:
    """Newest first, each with its change against the commit before it."""
    rows = []
    for i, p in enumerate(points):
        prev = next((q for q in reversed(points[:i]) if q.ok), None)
        if not p.ok:
            rows.append((p.commit[:8], p.date[:10], f"invalid ({p.errors} errors)", "–", "–", "–", p.subject))
            continue
        change = signed(p.monthly_usd - prev.monthly_usd) if prev else "–"
        rows.append((p.commit[:8], p.date[:10], usd(p.monthly_usd), change, str(p.placed), str(p.pending), p.subject))
    return Table(("commit", "date", "$/month", "Δ", "placed", "pending", "subject"), "llrrrrl", tuple(reversed(rows)))


# -- what the change does, read for review (reconciler.impact) ------------------------------------------------

def _hours(x: float | None) -> str:
    return "unknown" if x is None else f"{x:,.1f}"


def disruption(i: Impact) -> Table:
    """Running jobs the change stops, preempts or moves: highest priority class first, then the most work lost."""
    def ckpt(d: Disrupted) -> str:
        return "none given" if d.checkpoint_minutes is None else f"{d.checkpoint_minutes:g} min"

    def lost(d: Disrupted) -> str:
        if d.kind == "inference" and d.change != "moves":   # down, unless replicas stay placed (fewer serve)
            return f"{_hours(d.lost_accelerator_hours)} (" + (
                "service down" if d.after in ("", "pending") else "fewer replicas serve") + ")"
        return _hours(d.lost_accelerator_hours)

    return Table(("class", "job", "change", "ran on", "now", "accelerators", "checkpoint every", "work lost (acc-h)",
                  "why"), "lllllrrrl", tuple(
        (d.priority, d.job, d.change, d.before, d.after or "–", str(d.accelerators), ckpt(d), lost(d), d.why)
        for d in i.disrupted))


def by_class(i: Impact) -> Table:
    def names(jobs: tuple[str, ...]) -> str:
        return ", ".join(jobs[:8]) + (f" and {len(jobs) - 8} more" if len(jobs) > 8 else "") if jobs else "–"

    return Table(("class", "stops", "moves", "work lost (acc-h)"), "lllr", tuple(
        (c.priority, names(c.stopped), names(c.moved),
         f"{c.lost_accelerator_hours:,.1f}" + (f" + {c.unknown} unknown" if c.unknown else ""))
        for c in i.by_class))


def started(i: Impact) -> Table:
    return Table(("job", "class", "runs on", "$/hour", "run h", "run cost"), "lllrrr", tuple(
        (s.job, s.priority, s.where, f"{s.hourly_usd:,.2f}",
         "open-ended" if s.run_hours is None else f"{round(s.run_hours, 3):g}",
         "–" if s.run_usd is None else usd(s.run_usd)) for s in i.started))


def budgets(i: Impact) -> Table:
    def status(b: BudgetBurn) -> str:
        return "over" if b.left_usd < -0.005 else ("under 10% left" if b.left_usd < 0.1 * b.budget_monthly_usd
                                                   else "ok")

    return Table(("team", "budget $/month", "$/hour before → after", "spent so far (est.)", "forecast month end",
                  "left at month end", "status"), "lrrrrrl", tuple(
        (b.team, usd(b.budget_monthly_usd), f"{b.hourly_before_usd:,.2f} → {b.hourly_after_usd:,.2f}",
         f"{usd(b.spent_usd)} ({b.spent_share:.0%})", usd(b.forecast_usd), usd(b.left_usd), status(b))
        for b in i.budgets))


def price_changes(i: Impact) -> Table:
    return Table(("pool", "accelerator", "capacity", "unit $/h before", "unit $/h after", "source before",
                  "source after", "Δ $/month (paid units)"), "lllrrllr", tuple(
        (p.pool, p.accelerator, p.capacity, f"{p.before_usd:,.2f}", f"{p.after_usd:,.2f}", p.source_before,
         p.source_after, signed(p.monthly_delta_usd)) for p in i.price_changes))


def exposures(i: Impact) -> Table:
    return Table(("pool", "accelerator", "capacity", "max units", "unit $/h", "max $/month"), "lllrrr", tuple(
        (e.pool, e.accelerator, e.capacity, f"{e.max_after}" if e.max_before is None else f"{e.max_before} → "
         f"{e.max_after}", f"{e.unit_hourly_usd:,.2f}", usd(e.max_monthly_usd)) for e in i.exposures))


def pending(plan: Plan, meta: Mapping[str, JobMeta]) -> Table:
    """Every job the head plan leaves waiting, highest class first, with why."""
    def prio(job: str) -> tuple[str, int]:
        m = meta.get(job)
        return (m.priority, m.priority_value) if m else ("?", 0)

    rows = sorted(plan.pending, key=lambda p: (-prio(p.job)[1], p.job))
    return Table(("job", "class", "why"), "lll", tuple(
        (p.job, prio(p.job)[0], "; ".join(p.reasons)) for p in rows))
