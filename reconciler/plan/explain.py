"""`fleet explain TEAM/JOB`: one job's story. Pure: returns a document (`explain_doc`, for `--format json`)
or its text (`explain`).

Where it runs (or why it waits), the rule that decided, what the run costs (hourly x `duration_hours`), then
the alternatives that really fit now (capacity, quota and the team's budget, with the job's own placement set
aside) and, apart, the candidate pools that do not and why. Everything is measured on a fork of the planner's
final state with the job taken out and the units only it kept open closed again, so "fits now" means "would
fit if this job were not already there", and the state that made the plan is not changed.

The rule is the first criterion of the placement key (`place.best`) that separates the chosen place from the
best alternative that fits: the data region, new spend per unit of work (owned or already-paid capacity costs
no new money), the capacity preference, the attributed cost per unit of work, the option order.
"""

from __future__ import annotations

from typing import Any

from ..resolve import ResolvedOption, run_hours
from ..suggest import unit_list
from .capacity import PoolState
from .reasons import describe, option_reasons, short_beside
from .reserve import reserved_units
from .state import JobInfo, PlanState, amount, qkey
from .types import HOURS_PER_MONTH, Plan, money
from .workloads import group_rows

UNKNOWN = ("no end the plan reckons with frees what it lacks: the work holding the capacity or quota it needs has "
           "no duration_hours or has run past it, its team's monthly budget is less than it costs, or the fleet has "
           "too little of it")
"""Why a pending job's start cannot be told (`fleet status`, `fleet explain`, eta.py). Before 2026-12-06 it
named the work's duration_hours alone, also for a job whose cost its team's whole budget could never pay (reserve.py
`_budget_free_at`: None)."""


def _run_cost(info: JobInfo, opt: ResolvedOption, hourly: float) -> float | None:
    """Hourly x how long it runs on `opt` (`resolve.run_hours`)."""
    hours = run_hours(info.job.duration_hours, opt.relative_speed)
    return None if hours is None else hourly * hours


def _place(st: PlanState, info: JobInfo, opt: ResolvedOption, ps: PoolState) -> dict[str, Any]:
    """One candidate (option, pool) now: its price, new spend, key and whether it fits (and why not)."""
    gang = st.gang(opt, ps)
    replicas = info.job.replicas
    held = reserved_units(st, info, ps, opt)
    units = ps.find(gang, replicas, exclude=held) if ps.may_fit(gang, replicas) else None
    hourly = ps.least_charge(gang, replicas)
    new_spend = 0.0 if units is None else ps.new_units(units) * ps.unit_hourly_usd
    short = st.quota.shortfall(info.team, qkey(info, opt), amount(info, opt))
    why = []
    if units is None:
        why.append("no free capacity" + short_beside(st, opt, [ps]).replace("; on", ": on", 1)
                   if not held or ps.find(gang, replicas) is None else
                   f"the free units are reserved for a blocked job (units {unit_list(sorted(held))})")
    if short:
        why.append(f"quota: {short} more needed")
    if hourly > st.budget_room(info.team):
        why.append(f"team budget: ${max(0.0, st.budget_left(info.team)) * HOURS_PER_MONTH:,.0f}/month left")
    region = info.job.data_region
    outside = region is not None and ps.pool.region != region
    key = (outside, new_spend / opt.relative_speed, st.fleet.pref.get(ps.pool.capacity, 99),
           hourly / opt.relative_speed, opt.index, ps.pool.key)
    return {"option": opt.index, "describe": describe(opt), "pool": ps.pool.key, "region": ps.pool.region,
            "capacity": ps.pool.capacity, "hourly_usd": hourly, "per_work_usd": hourly / opt.relative_speed,
            "new_spend_usd": new_spend, "run_cost_usd": _run_cost(info, opt, hourly), "outside_data_region": outside,
            "fits": not why, "why_not": why, "_key": key}


def _rule(chosen: dict[str, Any], rival: dict[str, Any] | None, region: str | None) -> str:
    """The first key criterion that puts `chosen` before `rival` (module docstring), in words."""
    if rival is None:
        return "the only place it fits now"
    a, b = chosen["_key"], rival["_key"]
    if a[0] != b[0]:
        return f"in the job's data region ({region}); the next alternative, {rival['pool']}, is outside it"
    if a[1] != b[1]:
        if chosen["new_spend_usd"] == 0:
            paid = "owned capacity" if chosen["capacity"] == "owned" else "already-paid capacity (open units)"
            return (f"{paid} costs no new money; the next alternative, {rival['pool']}, adds "
                    f"${rival['new_spend_usd']:,.2f}/h")
        return (f"least new spend per unit of work: ${a[1]:,.2f}/h against ${b[1]:,.2f}/h on {rival['pool']}")
    if a[2] != b[2]:
        return (f"capacity preference: {chosen['capacity']} before {rival['capacity']} "
                f"(policies/placement.yaml), at equal new spend")
    if a[3] != b[3]:
        return f"cheapest per unit of work: ${a[3]:,.2f}/h against ${b[3]:,.2f}/h on {rival['pool']}"
    if a[4] != b[4]:
        return f"its option {a[4]} comes before option {b[4]} at equal cost"
    return f"equal on every criterion: pools in name order ({chosen['pool']} before {rival['pool']})"


def explain_doc(plan: Plan, state: PlanState, job_id: str) -> dict[str, Any]:
    """The story of `job_id` in `plan`, made by `state` (not changed: the alternatives are measured on a fork)."""
    st = state.fork()
    info = st.fleet.by_job[job_id]        # a spread job: its first replica; alternatives are per replica
    for rid in info.siblings or (job_id,):
        if rid in st.live:
            st.evict(rid)
    for ps in st.pools.values():
        ps.trim(0)          # close what only this job kept open: opening it again is new spend
    doc: dict[str, Any] = {
        "job": job_id, "priority": info.job.priority or st.fleet.prio.default, "priority_value": info.priority,
        "team": info.team, "kind": info.job.kind, "spot": info.spot,
        "replicas": len(info.siblings) or info.job.replicas,
        "data_region": info.job.data_region, "duration_hours": info.job.duration_hours}
    if info.siblings:
        doc["spread"] = info.spread
    places = [_place(st, info, opt, ps) for opt in info.options for ps in st.candidates(info, opt)]
    placed = plan.placement_of(job_id)
    chosen = None
    if placed is not None:
        groups = plan.placements_of(job_id)
        hourly = sum(g.hourly_usd for g in groups)
        chosen = next((p for p in places if p["pool"] == placed.pool_key and p["option"] == placed.option), None)
        doc["placed"] = {"cluster": placed.cluster, "pool": placed.pool, "units": list(placed.units),
                         "option": placed.option, "describe": describe(info.options[placed.option]),
                         "status": placed.status, "hourly_usd": money(hourly),
                         "monthly_usd": money(hourly * HOURS_PER_MONTH),
                         "run_cost_usd": None if (c := _run_cost(info, info.options[placed.option], hourly)) is None
                         else money(c),
                         "run_hours": run_hours(info.job.duration_hours, info.options[placed.option].relative_speed),
                         "reason": placed.reason}
        if info.siblings:
            doc["placed"]["groups"] = [
                {"cluster": g.cluster, "pool": g.pool, "units": list(g.units), "status": g.status,
                 "hourly_usd": money(g.hourly_usd)} for g in groups]
            doc["placed"]["not_spread"] = placed.not_spread
        others = sorted((p for p in places if p["fits"] and p is not chosen), key=lambda p: p["_key"])
        if placed.status == "kept":
            doc["rule"] = "running work keeps its units (stickiness): a running job is never moved to save money"
        elif placed.reason and placed.reason == state.outcome.restarts.get(job_id):   # re-created (sticky.py)
            kept = (lv := state.live.get(job_id)) is not None and lv.kept
            doc["rule"] = (f"running work keeps its units (stickiness), and is re-created on them: {placed.reason}"
                           if kept else f"running work re-created where its new pods fit: {placed.reason}")
        elif chosen is not None:
            doc["rule"] = _rule(chosen, others[0] if others else None, info.job.data_region)
        else:   # pragma: no cover - a placed job's pool is one of its candidates
            doc["rule"] = "placed by the improvement phase"
        if len(groups) > 1:   # the key alone does not say why: a replica avoids its siblings' domains first
            home = (f"; without `spread:` in the job file, any pool in its data_region {info.job.data_region} "
                    f"comes before every pool outside it" if info.job.data_region and not info.hard else "")
            doc["rule"] = (f"replicas spread over {info.spread}s (spread: {info.spread}): each replica takes the "
                           f"best pool by the placement key (data region, new spend, capacity preference, cost) "
                           f"in a {info.spread} that holds none of its siblings, before any {info.spread} that "
                           f"does{home}")
    else:
        pending = next(p for p in plan.pending if p.job == job_id)
        doc["pending"] = list(pending.reasons)
        doc["expected_start"] = pending.expected_start      # hours from the plan's moment (plan/reserve.py)
        doc["reservation"] = None if pending.reservation is None else {
            "cluster": pending.reservation[0], "pool": pending.reservation[1], "units": list(pending.reservation[2])}
        doc["rule"] = "no option fits now: see why it waits"
    group = next((x.group for x in plan.placements if x.job == job_id and x.group), None) or \
        next((x.group for x in plan.pending if x.job == job_id and x.group), None)
    if group is not None:           # its group as one row (plan/workloads.py)
        doc["group"] = next({"name": g, "members": m.split("<br>"), "state": state}
                            for g, m, state in group_rows(plan) if g == group)
    if placed is not None and placed.resize:
        doc["elastic"] = placed.resize
    doc["preemptions"] = [{"job": p.job, "by": p.by, "reason": p.reason}
                          for p in plan.preemptions if job_id in (p.job, p.by)]
    fits = sorted((p for p in places if p["fits"] and p is not chosen), key=lambda p: p["_key"])
    doc["alternatives"] = [_public(p) for p in fits]
    doc["not_possible"] = [_public(p) for p in places if not p["fits"] and p is not chosen]
    doc["no_pool"] = [f"option {opt.index} ({describe(opt)}): {r}" for opt in info.options
                      if not st.candidates(info, opt) for r in option_reasons(st, info, opt)]
    doc["quota"] = {qkey(info, opt): st.quota.why_short(info.team, qkey(info, opt), amount(info, opt),
                                                          st.fleet.prio.preemption.reclaim_within_cohort != "never")
                    for opt in info.options if st.quota.shortfall(info.team, qkey(info, opt), amount(info, opt))}
    if info.job.data_region:
        outside = [p for p in fits if p["outside_data_region"]]
        doc["nearest_outside_data_region"] = _public(min(outside, key=lambda p: p["hourly_usd"])) if outside else None
    return doc


def _public(p: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in p.items() if not k.startswith("_")}
    for k in ("hourly_usd", "per_work_usd", "new_spend_usd"):
        out[k] = money(out[k])
    out["run_cost_usd"] = None if out["run_cost_usd"] is None else money(out["run_cost_usd"])
    return out


def _run(cost: float | None, there: float | None, hours: float | None) -> str:
    """The run cost and how long it runs on its option (`hours`: its duration_hours, on its first option)."""
    if cost is None or hours is None or there is None:
        return "run cost unknown (no duration_hours)"
    if there != hours:
        return f"${cost:,.0f} for its {there:.4g} h on this option ({hours:g} h on its first)"
    return f"${cost:,.0f} for its {hours:g} h"


def explain(plan: Plan, state: PlanState, job_id: str) -> str:
    """`explain_doc` as Markdown."""
    d = explain_doc(plan, state, job_id)
    hours = d["duration_hours"]
    lines = [f"# {job_id}", "",
             f"priority {d['priority']} ({d['priority_value']}), team {d['team']}, {d['kind']}, spot {d['spot']}, "
             f"replicas {d['replicas']}" + (f", data in {d['data_region']}" if d["data_region"] else "")]
    if "placed" in d:
        p = d["placed"]
        lines.append(f"**placed** on {p['cluster']}/{p['pool']} units {unit_list(p['units'])} "
                     f"with option {p['option']} ({p['describe']}), status {p['status']}, ${p['hourly_usd']:,.2f}/h, "
                     f"${p['monthly_usd']:,.0f}/month, {_run(p['run_cost_usd'], p['run_hours'], hours)}"
                     + (f", moved because {p['reason']}" if p["reason"] and p["status"] == "moved" else ""))
        if p["status"] == "kept" and p["reason"]:       # kept as it runs (sticky.py), on a draining cluster or not
            ps = state.pools.get(f"{p['cluster']}/{p['pool']}")
            draining = ps is not None and ps.pool.status == "draining"
            lines.append(f"**{'still on a draining cluster' if draining else 'kept as it runs'}**: {p['reason']}")
        for g in p.get("groups", [])[1:]:
            lines.append(f"**also placed** on {g['cluster']}/{g['pool']} units {unit_list(g['units'])}, "
                         f"status {g['status']}, ${g['hourly_usd']:,.2f}/h")
        if p.get("not_spread"):
            lines.append(f"**not spread**: {p['not_spread']}")
        lines.append(f"**decided by**: {d['rule']}")
    else:
        lines.append("**pending** (why, as it stood when its turn came; the sections below read the finished plan):")
        lines += [f"- {r}" for r in d["pending"]]
        lines.append(f"**expected start**: {start_text(d['expected_start'], d['reservation'])}")
    if "group" in d:
        g = d["group"]
        lines.append(f"**group** {g['name']} ({g['state']}): " + "; ".join(g["members"]))
    if "elastic" in d:
        lines.append(f"**elastic**: {d['elastic']}")
    lines += [f"- preemption: {p['job']} by {p['by']}: {p['reason']}" for p in d["preemptions"]]
    lines += ["", "Alternatives that fit now:" if d["alternatives"] else "No alternative fits now."]
    if d["alternatives"]:
        lines += ["", "| option | pool | region | capacity | $/h | $/h per unit of work | new $/h | run cost |",
                  "|---|---|---|---|---:|---:|---:|---:|"]
        for a in d["alternatives"]:
            run = "-" if a["run_cost_usd"] is None else f"{a['run_cost_usd']:,.0f}"
            lines.append(f"| {a['option']} {a['describe']} | {a['pool']} | {a['region']} | {a['capacity']} | "
                         f"{a['hourly_usd']:,.2f} | {a['per_work_usd']:,.2f} | {a['new_spend_usd']:,.2f} | {run} |")
    if d["not_possible"] or d["no_pool"]:
        lines += ["", "Not possible now:"]
        lines += [f"- option {a['option']} ({a['describe']}) on {a['pool']} (${a['hourly_usd']:,.2f}/h): "
                  + ", ".join(a["why_not"]) for a in d["not_possible"]]
        lines += [f"- {r}" for r in d["no_pool"]]
    if d["quota"]:
        lines += ["", "Quota:"] + [f"- {acc}: {note}" for acc, note in sorted(d["quota"].items())]
    if d["data_region"]:
        near = d["nearest_outside_data_region"]
        lines += ["", f"Nearest alternative outside {d['data_region']}: {near['pool']} in {near['region']} at "
                      f"${near['hourly_usd']:,.2f}/h (${near['hourly_usd'] * HOURS_PER_MONTH:,.0f}/month)."
                  if near else f"No alternative that fits now is outside {d['data_region']}."]
    return "\n".join(lines) + "\n"


def start_text(hours: float | None, reservation: dict[str, Any] | None) -> str:
    """A pending job's expected start in words (`fleet explain`, `fleet status`): hours from the plan's moment."""
    if hours is None:
        return f"unknown: {UNKNOWN}"
    held = (f"; units {unit_list(reservation['units'])} of {reservation['cluster']}/{reservation['pool']} are "
            f"reserved for it" if reservation else "; nothing is held for it: later work may find the room first")
    return f"in {hours:g} h (estimate, as the running work ends after its duration_hours at its option's speed){held}"
