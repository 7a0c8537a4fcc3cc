"""`fleet explain TEAM/JOB`: one job's story. Pure: returns text.

Where it runs (or why it waits), then every option against every pool that could ever hold it, priced, with
what stands in the way now. The job's own placement is set aside while its alternatives are evaluated, so
"fits now" means "would fit if this job were not already there".
"""

from __future__ import annotations

from .reasons import describe, option_reasons
from .state import PlanState
from .types import HOURS_PER_MONTH, Plan


def explain(plan: Plan, state: PlanState, job_id: str) -> str:
    """The story of `job_id` in `plan`, made by `state` (which is not changed: alternatives are evaluated on
    a fork)."""
    pl = state.fork()
    info = pl.jobs[job_id]
    lines = [f"# {job_id}", "",
             f"priority {info.job.priority or pl.fleet.prio.default} ({info.priority}), team {info.team}, "
             f"{info.job.kind}, spot {info.spot}, replicas {info.job.replicas}"
             + (f", data in {info.job.data_region}" if info.job.data_region else "")]
    placed = plan.placement_of(job_id)
    if placed:
        lines.append(f"**placed** on {placed.cluster}/{placed.pool} units {list(placed.units)} with option "
                     f"{placed.option} ({describe(info.options[placed.option])}), status {placed.status}, "
                     f"${placed.hourly_usd:,.2f}/h, ${placed.hourly_usd * HOURS_PER_MONTH:,.0f}/month"
                     + (f", moved because {placed.reason}" if placed.reason and placed.status == "moved" else ""))
        if placed.status == "kept" and placed.reason:
            lines.append(f"**still on a draining cluster**: {placed.reason}")
    else:
        pending = next(p for p in plan.pending if p.job == job_id)
        lines.append("**pending**:")
        lines += [f"- {r}" for r in pending.reasons]
    for p in plan.preemptions:
        if p.job == job_id or p.by == job_id:
            lines.append(f"- preemption: {p.job} by {p.by}: {p.reason}")
    if job_id in pl.live:
        pl.evict(job_id)
    lines += ["", "| option | pool | region | capacity | $/h | $/h per unit of work | fits now |",
              "|---|---|---|---|---:|---:|---|"]
    nearest: tuple[float, str] | None = None
    quota_notes: dict[str, str] = {}   # accelerator -> why its quota is short (the same for every pool)
    for opt in info.options:
        cands = pl.candidates(info, opt)
        if not cands:
            for r in option_reasons(pl, info, opt):
                lines.append(f"| {opt.index} {describe(opt)} | - | - | - | - | - | {r} |")
        for ps in cands:
            gang = pl.gang(opt, ps)
            units = ps.find(gang, info.job.replicas)
            per = max(1, gang.whole_units) * info.job.replicas
            hourly = ps.unit_hourly_usd * gang.accelerators / ps.pool.unit_accelerators * per
            short = pl.quota.shortfall(info.team, opt.accelerator, opt.count * info.job.replicas)
            status = "yes" if units is not None and not short else (
                f"quota: {short} more needed" if short else "no free capacity")
            if short:
                quota_notes[opt.accelerator] = pl.quota.why_short(info.team, opt.accelerator,
                                                                  opt.count * info.job.replicas)
            lines.append(f"| {opt.index} {describe(opt)} | {ps.pool.key} | {ps.pool.region} | {ps.pool.capacity} | "
                         f"{hourly:,.2f} | {hourly / opt.relative_speed:,.2f} | {status} |")
            region = info.job.data_region
            if region and ps.pool.region != region and (nearest is None or hourly < nearest[0]):
                nearest = (hourly, f"{ps.pool.key} in {ps.pool.region}")
    if quota_notes:
        lines += ["", "Quota:"] + [f"- {acc}: {note}" for acc, note in sorted(quota_notes.items())]
    if info.job.data_region:
        if nearest:
            lines += ["", f"Nearest alternative outside {info.job.data_region}: {nearest[1]} at "
                          f"${nearest[0]:,.2f}/h (${nearest[0] * HOURS_PER_MONTH:,.0f}/month)."]
        else:
            lines += ["", f"Every candidate pool is in {info.job.data_region}."]
    return "\n".join(lines) + "\n"
