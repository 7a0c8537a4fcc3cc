"""The plan as Markdown for people (and the pull-request comment). Pure: returns text.

A `kept` placement carries a `reason` only when it was asked to leave and could not (a draining cluster:
no room elsewhere, or the migration limit); those get their own section near the top, so a drain that did
not finish is never mistaken for one that did."""

from __future__ import annotations

from ..suggest import unit_list
from .types import HOURS_PER_MONTH, Plan
from .workloads import group_rows


def table_cell(text: str) -> str:
    """`text` safe inside a Markdown table cell: a `|` escaped (raw, it ends the cell and shifts every column
    after it), a line break as `<br>` (raw, it ends the row). Reasons quote what files wrote."""
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


def _money(x: float) -> str:
    return f"${x:,.2f}"


def _section(title: str, intro: str | None, header: tuple[str, ...], align: str,
             rows: list[tuple[str, ...]]) -> list[str]:
    """An optional section: its heading, an intro line, and a table of `rows`; nothing when there are none."""
    if not rows:
        return []
    out = [f"## {title}", ""] + ([intro, ""] if intro else [])
    out += ["| " + " | ".join(header) + " |", f"|{align}|"]
    return out + ["| " + " | ".join(map(table_cell, r)) + " |" for r in rows] + [""]


def to_markdown(plan: Plan, change: str | None = None) -> str:
    """The plan; `change` is the diff against the base, rendered by `reconciler.report.diff_markdown`."""
    c = plan.cost
    staying = [p for p in plan.placements if p.status == "kept" and p.reason]
    lines = ["# Fleet plan", "",
             f"**{plan.counts().line()}**" + (f" · **{len(staying)} still on draining clusters**" if staying else "")
             + f" · {_money(c.hourly_usd)}/h · {_money(c.monthly_usd)}/month "
             f"(idle capacity {_money(c.idle_hourly_usd)}/h)", ""]
    if plan.live is not None and (live := plan.live.lines()):   # `--observed`: what finished, failed, was lost
        lines += ["## From what runs", "", *(f"- {line}" for line in live), ""]
    if change:
        lines += ["## Change against the base", "", change.rstrip("\n"), ""]
    away = [p for p in plan.placements if p.outside_data_region]
    lines += _section("Still on draining clusters",
                      f"{len(staying)} job(s) stay where the admin asked them to leave; each says why.",
                      ("job", "cluster/pool", "why it stays"), "---|---|---",
                      [(p.job, f"{p.cluster}/{p.pool}", p.reason) for p in staying])
    lines += _section("Outside their data region", f"{len(away)} job(s) run away from their data (`data_region`).",
                      ("job", "cluster/pool", "$/h"), "---|---|---:",
                      [(p.job, f"{p.cluster}/{p.pool}", f"{p.hourly_usd:,.2f}") for p in away])
    unspread = [p for p in plan.placements if p.not_spread]
    lines += _section("Replicas not spread", f"{len(unspread)} placement(s) of spread services sit in one failure "
                      "domain (`spread:`).", ("job", "cluster/pool", "why"), "---|---|---",
                      [(p.job, f"{p.cluster}/{p.pool}", p.not_spread) for p in unspread])
    groups: list[tuple[str, ...]] = list(group_rows(plan))
    lines += _section("Job groups", f"{len(groups)} group(s): members run in one place and start all-or-nothing "
                      "(`group:`).", ("group", "members", "state"), "---|---|---", groups)
    elastic = [p for p in plan.placements if p.resize]
    lines += _section("Elastic gangs", f"{len(elastic)} elastic job(s) (`workers:`): size and why it changed.",
                      ("job", "cluster/pool", "size"), "---|---|---",
                      [(p.job, f"{p.cluster}/{p.pool}", p.resize) for p in elastic])
    lines += _section("Pending", None, ("job", "why"), "---|---",
                      [(p.job, "\n".join(p.reasons)) for p in plan.pending])    # one line each: table_cell
    lines += _section("Preemptions", None, ("job", "by", "reason"), "---|---|---",
                      [(p.job, p.by, p.reason) for p in plan.preemptions])
    lines += ["## Placements", "", "| job | cluster/pool | option | units | $/h | status |",
              "|---|---|---:|---|---:|---|"]
    for p in plan.placements:
        units = unit_list(p.units)
        lines.append(f"| {p.job} | {p.cluster}/{p.pool} | {p.option} | {units} ({len(p.units)}) | "
                     f"{p.hourly_usd:,.2f} | {p.status}{': ' + table_cell(p.reason) if p.reason else ''}"
                     f"{' · outside its data region' if p.outside_data_region else ''} |")
    lines += ["", "## Pools", "", "| cluster/pool | used | target | min–max | unit $/h | $/h |",
              "|---|---:|---:|---|---:|---:|"]
    for q in plan.pools:
        if q.target or q.min:
            target = f"{q.target} requested" if q.provisioning == "queued" else str(q.target)
            lines.append(f"| {q.cluster}/{q.pool} | {q.used} | {target} | {q.min}–{q.max} | "
                         f"{q.unit_hourly_usd:,.2f} | {q.hourly_usd:,.2f} |")
    idle = [f"{q.cluster}/{q.pool}" for q in plan.pools if not q.target and not q.min]
    if idle:
        lines += ["", f"Scaled to zero: {', '.join(idle)}."]
    lines += ["", "## Cost by team", "", "| team | $/h | $/month |", "|---|---:|---:|"]
    lines += [f"| {t} | {v:,.2f} | {v * HOURS_PER_MONTH:,.0f} |" for t, v in sorted(c.by_team.items())]
    lines += [f"| (idle) | {c.idle_hourly_usd:,.2f} | {c.idle_hourly_usd * HOURS_PER_MONTH:,.0f} |"]
    return "\n".join(lines) + "\n"
