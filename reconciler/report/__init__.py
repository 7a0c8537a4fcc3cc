"""Stage 8, report: the cost report as Markdown (the pull-request comment), self-contained HTML, and JSON.
Pure: values in, text out; the templates ship as package data (`templates/`).

The Markdown is a GitHub comment, which GitHub rejects above 65,536 characters. Every table shows at most
`limit` rows and says "... and N more"; if the whole still exceeds `MAX_MARKDOWN_CHARS`, it is rendered
again with a smaller limit (50, 20, 8, 3, 0 rows), and as a last resort cut at a line with a pointer to the
HTML and JSON reports. So the comment is always under the cap, however large the change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

import jinja2
from markupsafe import Markup

from ..cost.budget import BudgetViolation
from ..cost.history import HistoryPoint
from ..cost.model import HOURS_PER_MONTH, Priced, money
from ..diff import PlanDiff
from ..impact import Disrupted, Impact, impact, month_hours
from ..robots.plan import DeploymentChange, robots_markdown
from . import svg, tables
from .fmt import cell, pct, quota_cells, signed, signed2, sparkline, usd, usd2

MAX_MARKDOWN_CHARS = 65_000
ROW_LIMITS = (50, 20, 8, 3, 0)
HTML_ROW_LIMIT = 2000


@dataclass(frozen=True)
class CostReport:
    """What `fleet cost` reports; `as_of` dates the budget forecast (month-to-date and the rest of the month)."""

    head: Priced
    head_label: str                     # "work tree" or a revision
    base: Priced | None = None
    base_label: str = ""
    diff: PlanDiff | None = None
    violations: tuple[BudgetViolation, ...] = ()
    history: tuple[HistoryPoint, ...] = ()      # oldest first
    version: str = ""
    as_of: datetime | None = None
    robots: tuple[DeploymentChange, ...] = ()   # deployments the change touches: the comment leads with them

    @cached_property
    def impact(self) -> Impact:
        """The change read for review: disruption, commitment, budgets, prices, exposure (reconciler.impact)."""
        return impact(self.head, self.base, self.diff, self.as_of)

    def history_monthly_usd(self) -> list[float | None]:
        """Monthly cost per commit, oldest first; None for a commit that does not validate."""
        return [p.monthly_usd if p.ok else None for p in self.history]

    def headline(self) -> str:
        if self.diff is not None:
            return impact_headline(self.impact)
        c = self.head.cost
        return f"Monthly cost: ${c.monthly_usd:,.0f} (${c.hourly_usd:,.2f}/h)"


def impact_headline(i: Impact) -> str:
    """The disruption first (what stops and moves, by class, and the work lost), then what the change commits
    (run cost of the jobs it starts, not x 730) and the change in run-rate."""
    unsure = set(i.may_have_finished)    # planned from git alone: whether these still run is not known
    stops = [d for d in i.disrupted if d.change != "moves" and d.job not in unsure]
    moves = [d for d in i.disrupted if d.change == "moves"]
    gone = [d for d in i.disrupted if d.job in unsure]
    parts = [f"Stops {len(stops):,} running job{'s' if len(stops) != 1 else ''} ({_classes(stops)})"] if stops else []
    if moves:
        parts.append(f"moves {len(moves):,} ({_classes(moves)})" if stops else
                     f"Moves {len(moves):,} running job{'s' if len(moves) != 1 else ''} ({_classes(moves)})")
    if gone:
        n = len(gone)
        parts.append(f"{'r' if parts else 'R'}emoves the file{'s' if n != 1 else ''} of {n:,} placed "
                     f"job{'s' if n != 1 else ''} ({_classes(gone)}), stopped unless already finished")
    head = " and ".join(parts)
    if i.disrupted:
        head += f": up to {i.lost_accelerator_hours:,.0f} accelerator-hours of work lost"
        if i.unknown_loss:
            head += f" (+{i.unknown_loss} without checkpoint_minutes)"
    cost = []
    if i.started:
        open_ended = f" (+{usd2(sum(x.hourly_usd for x in i.open_ended))}/h open-ended)" if i.open_ended else ""
        cost.append(f"starts {_jobs(len(i.started))} committing {usd(i.committed_usd)}{open_ended}")
    if i.new_waiting:
        n = len(i.new_waiting)
        cost.append(f"{n:,} new job{'s wait' if n != 1 else ' waits'}")
    d = i.hourly_delta_usd
    cost.append("run-rate unchanged" if round(d, 2) == 0 else f"run-rate {signed2(d)}/h")
    tail = " · ".join(cost)
    return f"{head}; {tail}" if head else tail[0].upper() + tail[1:]


def _jobs(n: int) -> str:
    return f"{n:,} job" if n == 1 else f"{n:,} jobs"


def _classes(ds: list[Disrupted]) -> str:
    """"2 critical, 1 production": counts by class, in the order given (highest class first)."""
    counts: dict[str, int] = {}
    for d in ds:
        counts[d.priority] = counts.get(d.priority, 0) + 1
    return ", ".join(f"{n} {cls}" for cls, n in counts.items())


def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("reconciler.report", "templates"),
                             autoescape=autoescape, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(usd=usd, usd2=usd2, signed=signed, signed2=signed2, cell=cell, pct=pct)
    env.globals.update(quota_cells=quota_cells, HOURS=HOURS_PER_MONTH, sparkline=sparkline, pct=pct)
    return env


_MD = _env(autoescape=False)
_HTML = _env(autoescape=True)


# -- Markdown ---------------------------------------------------------------------------------------------

def report_tables(report: CostReport) -> dict[str, tables.Table]:
    """Every table of the report, by name (diff tables only with a base, history only with --history)."""
    c = report.head.cost
    out = {"violations": tables.violations(report.violations), "by_team": tables.cost_by(c.by_team, "team",
                                                                                         c.idle_hourly_usd),
           "by_cluster": tables.cost_by(c.by_cluster, "cluster"),
           "by_accelerator": tables.cost_by(c.by_accelerator, "accelerator"),
           "pools": tables.pools(c), "jobs": tables.jobs(c), "history": tables.history(report.history),
           "outside_data_region": tables.outside_data_region(c), **impact_tables(report.impact),
           "pending": tables.pending(report.head.plan, report.head.jobs_meta)}
    if report.diff is not None:
        out.update(diff_tables(report.diff))
    return out


def impact_tables(i: Impact) -> dict[str, tables.Table]:
    return {"disruption": tables.disruption(i), "by_class": tables.by_class(i), "started": tables.started(i),
            "budgets": tables.budgets(i), "price_changes": tables.price_changes(i), "exposures": tables.exposures(i)}


def diff_tables(d: PlanDiff) -> dict[str, tables.Table]:
    return {"job_changes": tables.job_changes(d), "pool_changes": tables.pool_changes(d),
            "team_quotas": tables.quota_changes(d, per_cluster=False),
            "cluster_quotas": tables.quota_changes(d, per_cluster=True),
            "delta_team": tables.deltas(d.by_team, "team"), "delta_cluster": tables.deltas(d.by_cluster, "cluster"),
            "delta_accelerator": tables.deltas(d.by_accelerator, "accelerator")}


def cost_markdown(report: CostReport, max_chars: int = MAX_MARKDOWN_CHARS) -> str:
    """The pull-request comment, always under `max_chars` characters."""
    t = report_tables(report)
    lead = robots_markdown(report.robots)[: max_chars // 2]
    return lead + _capped(lambda limit: _MD.get_template("cost.md.j2").render(
        r=report, d=report.diff, i=report.impact, t=t, limit=limit, **_month(report.as_of)),
        max_chars - len(lead), "the full report is in cost.html and cost.json")


def diff_markdown(diff: PlanDiff, violations: tuple[BudgetViolation, ...] = (), i: Impact | None = None,
                  max_chars: int = MAX_MARKDOWN_CHARS // 2) -> str:
    """The change section alone, for `fleet plan --base` (the same tables as the cost report), led by the
    disruption and the commitment when `i` (the change's impact) is given."""
    t = {**diff_tables(diff), "violations": tables.violations(violations), **(impact_tables(i) if i else {})}
    return _capped(lambda limit: _MD.get_template("diff.md.j2").render(d=diff, i=i, t=t, limit=limit),
                   max_chars, "`fleet cost --base` writes the full report")


def _month(as_of: datetime | None) -> dict[str, Any]:
    """The month the budget forecast runs to, and its hours past and left (templates' `month`, ...)."""
    past, left = month_hours(as_of) if as_of is not None else (0.0, HOURS_PER_MONTH)
    return {"month": as_of.strftime("%B %Y") if as_of is not None else "the month", "hours_past": past,
            "hours_left": left}


def _capped(render: Callable[[int], str], max_chars: int, where: str) -> str:
    text = ""
    for limit in ROW_LIMITS:
        text = re.sub(r"\n{3,}", "\n\n", render(limit))   # templates leave runs of blank lines
        if len(text) <= max_chars:
            return text
    note = f"\n\n... report cut at {max_chars:,} characters; {where}.\n"
    return text[: text.rfind("\n", 0, max_chars - len(note))] + note


# -- HTML and JSON ------------------------------------------------------------------------------------------

def cost_html(report: CostReport) -> str:
    """One self-contained page: inline CSS and SVG, no scripts, no external resources."""
    c = report.head.cost
    teams = sorted(((k, v * HOURS_PER_MONTH) for k, v in c.by_team.items()), key=lambda kv: (-kv[1], kv[0]))
    teams.append(("(idle capacity)", c.idle_hourly_usd * HOURS_PER_MONTH))
    clusters = sorted(((k, v * HOURS_PER_MONTH) for k, v in c.by_cluster.items()), key=lambda kv: (-kv[1], kv[0]))
    pools = [(p.key, p.used_accelerators, p.paid_accelerators) for p in c.pools if p.paid_units or p.used_accelerators]
    charts = {
        "team": Markup(svg.hbars(teams, usd, "Monthly cost by team")),
        "cluster": Markup(svg.hbars(clusters, usd, "Monthly cost by cluster")),
        "util": Markup(svg.utilization(pools, "Accelerators occupied / paid for, by pool")),
        "history": Markup(svg.line([(p.commit[:8] + " " + p.date[:10], p.monthly_usd if p.ok else None)
                                    for p in report.history], usd, "Monthly cost by commit"))
        if report.history else "",
        "budgets": Markup(svg.burndown([(b.team, b.spent_usd, b.forecast_usd, b.budget_monthly_usd)
                                        for b in report.impact.budgets[:HTML_ROW_LIMIT]], usd,
                                       "Spent so far and forecast to the month's end, against the budget"))
        if report.impact.budgets else "",
        "delta": Markup(svg.delta_bars([(d.name, d.monthly_usd) for d in report.diff.by_team],
                                       signed, "Monthly cost change by team")) if report.diff else "",
    }
    return _HTML.get_template("cost.html.j2").render(r=report, d=report.diff, i=report.impact,
                                                     t=report_tables(report), charts=charts, limit=HTML_ROW_LIMIT,
                                                     **_month(report.as_of))


def cost_dict(report: CostReport) -> dict[str, Any]:
    d = report.diff
    doc: dict[str, Any] = {
        "version": 1, "fleet_version": report.version, "headline": report.headline(),
        "head": {"label": report.head_label, "cost": report.head.cost.to_dict(),
                 "placed": report.head.plan.counts().placed, "pending": report.head.plan.counts().pending},
        "base": None, "diff": None,
        "budget_violations": [{"team": v.team, "budget_monthly_usd": money(v.budget_monthly_usd),
                               "planned_monthly_usd": money(v.planned_monthly_usd),
                               "over_monthly_usd": money(v.over_monthly_usd),
                               "jobs": [{"job": j.job, "monthly_usd": money(j.monthly_usd),
                                         "changed": j.job in v.changed} for j in v.jobs]}
                              for v in report.violations],
        "history": [p.report_dict() for p in report.history],
        "impact": impact_dict(report.impact, report.head),
        "robots": [c.as_dict() for c in report.robots],
    }
    if report.base is not None:
        doc["base"] = {"label": report.base_label, "cost": report.base.cost.to_dict(),
                       "placed": report.base.plan.counts().placed,
                       "pending": report.base.plan.counts().pending}
    if d is not None:
        def deltas(rows: tuple[Any, ...]) -> list[dict[str, Any]]:
            return [{"name": x.name, "before_monthly_usd": money(x.before_hourly_usd * HOURS_PER_MONTH),
                     "after_monthly_usd": money(x.after_hourly_usd * HOURS_PER_MONTH),
                     "delta_monthly_usd": money(x.monthly_usd)} for x in rows]

        doc["diff"] = {
            "monthly_delta_usd": money(d.total.monthly_usd),
            "jobs": [{"job": j.job, "change": j.change, "before": j.before, "after": j.after,
                      "monthly_delta_usd": money(j.hourly_delta_usd * HOURS_PER_MONTH), "detail": j.detail}
                     for j in d.jobs],
            "still_pending": d.still_pending,
            "pools": [{"cluster": p.cluster, "pool": p.pool, "accelerator": p.accelerator,
                       "target_before": p.target_before, "target_after": p.target_after,
                       "monthly_delta_usd": money(p.hourly_delta_usd * HOURS_PER_MONTH)} for p in d.pools],
            "quotas": [{"team": q.team, "accelerator": q.accelerator, "cluster": q.cluster or None,
                        "before": _limits(q.before), "after": _limits(q.after)}
                       for q in d.quotas],
            "by_team": deltas(d.by_team), "by_cluster": deltas(d.by_cluster),
            "by_accelerator": deltas(d.by_accelerator),
        }
    return doc


_LIMITS = ("nominal", "borrowing_limit", "lending_limit")


def _limits(lim: tuple[int, int | None, int | None, int] | None) -> dict[str, int | None] | None:
    """A quota's limits as JSON; `spot` (the `spot:` quota of spot-only work) only where there is one."""
    if lim is None:
        return None
    return {**dict(zip(_LIMITS, lim[:3], strict=True)), **({"spot": lim[3]} if lim[3] else {})}


def impact_dict(i: Impact, head: Priced) -> dict[str, Any]:
    """The change read for review (reconciler.impact), every row; money in dollars and cents."""
    meta = head.jobs_meta
    return {
        "disrupted": [{"job": d.job, "change": d.change, "priority": d.priority, "kind": d.kind, "before": d.before,
                       "after": d.after, "accelerators": d.accelerators, "checkpoint_minutes": d.checkpoint_minutes,
                       "lost_accelerator_hours_max": d.lost_accelerator_hours, "why": d.why} for d in i.disrupted],
        "lost_accelerator_hours_max": i.lost_accelerator_hours, "unknown_loss_jobs": i.unknown_loss,
        "started": [{"job": x.job, "priority": x.priority, "where": x.where, "hourly_usd": money(x.hourly_usd),
                     "duration_hours": x.duration_hours,
                     "run_hours": x.run_hours, "run_usd": None if x.run_usd is None else money(x.run_usd)}
                    for x in i.started],
        "committed_usd": money(i.committed_usd),
        "hourly_before_usd": money(i.hourly_before_usd), "hourly_after_usd": money(i.hourly_after_usd),
        "as_of": i.as_of.isoformat() if i.as_of else None,
        "budgets": [{"team": b.team, "budget_monthly_usd": money(b.budget_monthly_usd),
                     "hourly_before_usd": money(b.hourly_before_usd), "hourly_after_usd": money(b.hourly_after_usd),
                     "spent_usd": money(b.spent_usd), "forecast_usd": money(b.forecast_usd),
                     "left_usd": money(b.left_usd)} for b in i.budgets],
        "price_changes": [{"pool": p.pool, "accelerator": p.accelerator, "capacity": p.capacity,
                           "unit_hourly_usd_before": p.before_usd, "unit_hourly_usd_after": p.after_usd,
                           "source_before": p.source_before, "source_after": p.source_after,
                           "monthly_delta_usd": money(p.monthly_delta_usd)} for p in i.price_changes],
        "exposures": [{"pool": e.pool, "accelerator": e.accelerator, "capacity": e.capacity,
                       "max_before": e.max_before, "max_after": e.max_after, "unit_hourly_usd": e.unit_hourly_usd,
                       "max_monthly_usd": money(e.max_monthly_usd)} for e in i.exposures],
        "pending": [{"job": p.job, "priority": meta[p.job].priority if p.job in meta else None,
                     "reasons": list(p.reasons)} for p in head.plan.pending],
    }


def cost_json(report: CostReport) -> str:
    return json.dumps(cost_dict(report), indent=2, sort_keys=False) + "\n"
