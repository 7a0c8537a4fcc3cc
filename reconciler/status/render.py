"""`fleet status` as text, JSON and an offline HTML page (jinja2, inline CSS, no scripts or external assets). Pure."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any

import jinja2

from ..impact import month_hours
from ..report.fmt import with_spot
from ..robots.status import tables as robots_tables
from ..robots.status import text as robots_text
from . import JobStatus, StatusReport


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M") if t else "-"


def _num(x: float | int | None, fmt: str = "{:g}") -> str:
    return "-" if x is None else fmt.format(x)


def _spot(nominal: int | None, spot: int | None, spot_quota: int | None) -> str:
    """A team's use or quota; `N + S spot` where the team states a `spot:` quota (as `fleet diff` shows it)."""
    return with_spot(_num(nominal), None if spot_quota is None else _num(spot))


def rows(report: StatusReport) -> dict[str, list[list[str]]]:
    """The three tables (and the clusters) as cells, shared by text and HTML."""
    return {
        "jobs": [[j.job, j.phase, j.cluster or "-", j.pool or "-", _when(j.since), _num(j.queue_wait_minutes),
                  str(j.restarts), _num(j.cost_usd, "${:,.2f}"), j.note] for j in report.jobs],
        "pools": [[p.cluster, p.pool, str(p.units) if p.observed else "?", str(p.ready) if p.observed else "?",
                   str(p.unhealthy) if p.observed else "?", str(p.used), "; ".join(p.problems)]
                  for p in report.pools],
        "teams": [[t.team, t.accelerator or "-", _spot(t.used - t.spot_used, t.spot_used, t.spot_quota),
                   _spot(t.quota, t.spot_quota, t.spot_quota), f"${t.monthly_usd:,.2f}",
                   _num(t.budget_monthly_usd, "${:,.2f}")] for t in report.teams],
    }


def waiting(j: JobStatus) -> bool:
    """Queued or evicted on a cluster, or on no cluster with the plan's reason why it cannot be placed."""
    return j.phase in ("queued", "evicted") or (j.phase == "unknown" and bool(j.reason))


def review_rows(report: StatusReport) -> dict[str, list[list[str]]]:
    """What the page leads with: disrupted jobs (highest class first, then the most work lost), waiting jobs
    with Kueue's reason (or the plan's, for a job on no cluster), each team's spend against its budget to the
    month's end (unknown when no cluster could be read), jobs away from their data."""
    rank = {c: i for i, c in enumerate(report.classes)}

    def order(j: JobStatus) -> tuple[int, str]:
        return rank.get(j.priority, len(rank)), j.job

    hit = sorted((j for j in report.jobs if j.evictions or j.restarts or j.phase in ("failed", "evicted")),
                 key=lambda j: (order(j)[0], -(j.lost_accelerator_hours or 0.0), j.job))
    teams = list({t.team: t for t in reversed(report.teams) if t.budget_monthly_usd is not None}.values())[::-1]
    known = report.read_any          # nothing read: spend and budgets are unknown, not "ok" at $0

    def usd(x: float) -> str:
        return f"${x:,.0f}" if known else "unknown"

    return {
        "disruption": [[j.priority or "-", j.job, j.phase, str(j.evictions), str(j.restarts),
                        _num(j.accelerators), "unknown" if j.lost_accelerator_hours is None
                        else f"{j.lost_accelerator_hours:,.1f}", j.reason] for j in hit],
        "waiting": [[j.priority or "-", j.job, j.phase if j.phase != "unknown" else "on no cluster",
                     _num(j.queue_wait_minutes), _when(j.expected_start), j.reason or j.note or "-"]
                    for j in sorted((j for j in report.jobs if waiting(j)), key=order)],
        "budgets": [[t.team, _num(t.budget_monthly_usd, "${:,.0f}"), f"${t.hourly_usd:,.2f}" if known else "unknown",
                     usd(t.spent_month_usd), usd(t.forecast_month_usd),
                     usd((t.budget_monthly_usd or 0.0) - t.forecast_month_usd),
                     "unknown" if not known else "over" if t.forecast_month_usd > (t.budget_monthly_usd or 0.0)
                     else "ok"] for t in teams],
        "away": [[j.job, j.priority or "-", j.cluster or "-", j.pool or "-"] for j in report.jobs
                 if j.outside_data_region],
    }


REVIEW_HEADERS = {
    "disruption": ["class", "job", "phase", "evictions", "restarts", "accelerators", "work lost (acc-h, at most)",
                   "reason"],
    "waiting": ["class", "job", "phase", "waiting (min)", "expected start (UTC, est.)", "why"],
    "budgets": ["team", "budget $/month", "$/hour now", "spent this month (est.)", "forecast month end",
                "left at month end", "status"],
    "away": ["job", "class", "cluster", "pool"],
}

HEADERS = {
    "jobs": ["job", "phase", "cluster", "pool", "since", "queue wait (min)", "restarts", "cost so far", "note"],
    "pools": ["cluster", "pool", "units", "ready", "unhealthy", "used", "problems"],
    "teams": ["team", "accelerator", "in use", "quota", "monthly at this rate", "budget"],
}


def _table(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *body]]
    return "\n".join(lines) + "\n"


MAX_IMPOSTOR_LINES = 20      # per cluster, in the text; the JSON lists every one


def to_text(report: StatusReport) -> str:
    out = [f"observed at {report.observed_at.isoformat()}\n"]
    for c in report.clusters:
        out.append(f"cluster {c.cluster}: {c.status}\n")
        out += [f"  error: {m}\n  hint: {h}\n" for m, h in c.problems]
        out += [f"  {line}\n" for line in c.impostors[:MAX_IMPOSTOR_LINES]]
        if len(c.impostors) > MAX_IMPOSTOR_LINES:
            out.append(f"  {len(c.impostors) - MAX_IMPOSTOR_LINES} more impostor object(s) ignored (--format json "
                       "lists them)\n")
    review = review_rows(report)          # what the HTML page leads with, when there is any
    for name, title in (("disruption", "disrupted (evicted, restarted, failed)"), ("waiting", "waiting"),
                        ("budgets", f"budgets to the end of {report.observed_at.strftime('%B %Y')}"),
                        ("away", "outside their data region")):
        if review[name]:
            out.append(f"\n{title}\n" + _table(REVIEW_HEADERS[name], review[name]))
    if report.groups:                     # job groups (issue 26): one row each, with its members
        out.append("\ngroups\n" + _table(["group", "members", "state"], [list(g) for g in report.groups]))
    cells = rows(report)
    for name in ("jobs", "pools", "teams"):
        out.append(f"\n{name}\n" + _table(HEADERS[name], cells[name]))
    return "".join(out) + robots_text(report.robots, _table)


def _plain(x: Any) -> Any:
    if isinstance(x, datetime):
        return x.isoformat()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return x


def to_json(report: StatusReport) -> str:
    doc = _plain(dataclasses.asdict(report))
    if not doc["groups"]:
        del doc["groups"]
    else:
        doc["groups"] = [{"group": g, "members": m, "state": st} for g, m, st in doc["groups"]]
    doc["clusters"] = [{"cluster": c["cluster"], "status": c["status"],
                        "problems": [{"message": m, "hint": h} for m, h in c["problems"]],
                        "impostors": c["impostors"]} for c in doc["clusters"]]
    doc["robots"] = report.robots.model_dump(mode="json")
    return json.dumps({"version": 1, **doc}, indent=2) + "\n"


def to_html(report: StatusReport) -> str:
    env = jinja2.Environment(loader=jinja2.PackageLoader("reconciler.status", "templates"), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    past, left = month_hours(report.observed_at)
    hit = [j for j in report.jobs if j.evictions or j.restarts or j.phase in ("failed", "evicted")]
    return env.get_template("status.html.j2").render(
        report=report, cells=rows(report), headers=HEADERS, review=review_rows(report), review_headers=REVIEW_HEADERS,
        observed_at=report.observed_at.isoformat(), month=report.observed_at.strftime("%B %Y"), hours_left=left,
        hours_past=past, lost=sum(j.lost_accelerator_hours or 0.0 for j in hit),
        unknown=sum(j.lost_accelerator_hours is None for j in hit), robot_tables=robots_tables(report.robots))
