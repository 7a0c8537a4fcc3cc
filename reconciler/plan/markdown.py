"""The plan as Markdown for people (and the pull-request comment). Pure: returns text.

A `kept` placement carries a `reason` only when it was asked to leave and could not (a draining cluster:
no room elsewhere, or the migration limit); those get their own section near the top, so a drain that did
not finish is never mistaken for one that did."""

from __future__ import annotations

from .types import HOURS_PER_MONTH, Plan


def _money(x: float) -> str:
    return f"${x:,.2f}"


def to_markdown(plan: Plan, change: str | None = None) -> str:
    """The plan; `change` is the diff against the base, rendered by `reconciler.report.diff_markdown`."""
    c = plan.cost
    staying = [p for p in plan.placements if p.status == "kept" and p.reason]
    lines = ["# Fleet plan", "",
             f"**{len(plan.placements)} jobs placed, {len(plan.pending)} pending, {len(plan.preemptions)} "
             f"preempted**" + (f" · **{len(staying)} still on draining clusters**" if staying else "")
             + f" · {_money(c.hourly_usd)}/h · {_money(c.monthly_usd)}/month "
             f"(idle capacity {_money(c.idle_hourly_usd)}/h)", ""]
    if change:
        lines += ["## Change against the base", "", change.rstrip("\n"), ""]
    if staying:
        lines += ["## Still on draining clusters", "",
                  f"{len(staying)} job(s) stay where the admin asked them to leave; each says why.", "",
                  "| job | cluster/pool | why it stays |", "|---|---|---|"]
        lines += [f"| {p.job} | {p.cluster}/{p.pool} | {p.reason} |" for p in staying]
        lines.append("")
    away = [p for p in plan.placements if p.outside_data_region]
    if away:
        lines += ["## Outside their data region", "",
                  f"{len(away)} job(s) run away from their data (`data_region`).", "",
                  "| job | cluster/pool | $/h |", "|---|---|---:|"]
        lines += [f"| {p.job} | {p.cluster}/{p.pool} | {p.hourly_usd:,.2f} |" for p in away]
        lines.append("")
    if plan.pending:
        lines += ["## Pending", "", "| job | why |", "|---|---|"]
        lines += [f"| {p.job} | {'<br>'.join(p.reasons)} |" for p in plan.pending]
        lines.append("")
    if plan.preemptions:
        lines += ["## Preemptions", "", "| job | by | reason |", "|---|---|---|"]
        lines += [f"| {p.job} | {p.by} | {p.reason} |" for p in plan.preemptions]
        lines.append("")
    lines += ["## Placements", "", "| job | cluster/pool | option | units | $/h | status |",
              "|---|---|---:|---|---:|---|"]
    for p in plan.placements:
        units = f"{p.units[0]}–{p.units[-1]}" if len(p.units) > 3 else ", ".join(map(str, p.units))
        lines.append(f"| {p.job} | {p.cluster}/{p.pool} | {p.option} | {units} ({len(p.units)}) | "
                     f"{p.hourly_usd:,.2f} | {p.status}{': ' + p.reason if p.reason else ''}"
                     f"{' · outside its data region' if p.outside_data_region else ''} |")
    lines += ["", "## Pools", "", "| cluster/pool | used | target | min–max | unit $/h | $/h |",
              "|---|---:|---:|---|---:|---:|"]
    for q in plan.pools:
        if q.target or q.min:
            lines.append(f"| {q.cluster}/{q.pool} | {q.used} | {q.target} | {q.min}–{q.max} | "
                         f"{q.unit_hourly_usd:,.2f} | {q.hourly_usd:,.2f} |")
    idle = [f"{q.cluster}/{q.pool}" for q in plan.pools if not q.target and not q.min]
    if idle:
        lines += ["", f"Scaled to zero: {', '.join(idle)}."]
    lines += ["", "## Cost by team", "", "| team | $/h | $/month |", "|---|---:|---:|"]
    lines += [f"| {t} | {v:,.2f} | {v * HOURS_PER_MONTH:,.0f} |" for t, v in sorted(c.by_team.items())]
    lines += [f"| (idle) | {c.idle_hourly_usd:,.2f} | {c.idle_hourly_usd * HOURS_PER_MONTH:,.0f} |"]
    return "\n".join(lines) + "\n"
