"""`fleet status TEAM/JOB`: one job's story on one screen. Pure: from the plan, the snapshot and the status
rows `status()` already computes.

1. The decision: where the plan (from git and what runs) puts it and why, or why it waits; preemptions; a group
   member's group, as `fleet status` shows it (running together, or in part and why).
2. Its copies: each cluster's phase, pool, since when, restarts, evictions and cost so far.
3. Recent events: the conditions its Workloads and JobSets carry, newest first (what Kueue and JobSet said).
4. When it starts, while it waits (not once it runs or finished): `eta.expected_start`, an estimate, labelled as such.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..eta import Eta, expected_start
from ..observe.model import Snapshot
from ..plan.types import Plan
from ..reconcile.finished import may_run_on, unread_clusters
from ..reconcile.model import JobFacts, LoopMemory
from ..suggest import unit_list
from ..validate import Validated
from . import StatusReport

EVENTS = 8
"""Most conditions shown: the newest, which say what happened last."""


def story(v: Validated, snap: Snapshot, plan: Plan, report: StatusReport, job_id: str) -> dict[str, Any]:
    """The story of `job_id` as plain data (the JSON of `--format json`; the text renders it)."""
    now = snap.observed_at
    copies = [j for j in report.jobs if j.job == job_id and j.cluster is not None]
    placed = [{"cluster": p.cluster, "pool": p.pool, "option": p.option, "units": list(p.units), "status": p.status,
               "hourly_usd": p.hourly_usd, "reason": p.reason} for p in plan.placements_of(job_id)]
    pending = next((list(p.reasons) for p in plan.pending if p.job == job_id), [])
    preempted = [{"job": p.job, "by": p.by, "reason": p.reason, "after_minutes": p.after_minutes}
                 for p in plan.preemptions if job_id in (p.job, p.by)]
    running: dict[str, datetime] = {}       # every running job's start: the holders' ends count from it
    for j in report.jobs:
        if j.phase == "running" and j.since is not None:
            running[j.job] = min(running.get(j.job, j.since), j.since)
    done = plan.live.finished + plan.live.failed if plan.live is not None else ()
    waiting = job_id not in running and job_id not in done   # a finished job expects no start: it is not planned
    job = v.job_by_id.get(job_id)
    name = f"{job.team}/{job.group}" if job is not None and job.group is not None else None
    group = [{"group": {"name": g, "members": m, "state": st}} for g, m, st in report.groups if g == name]
    return {
        **(group[0] if group else {}),
        "job": job_id, "observed_at": now.isoformat(),
        "priority": report_priority(report, job_id), "duration_hours": job.duration_hours if job else None,
        "decision": {"placed": placed, "pending": pending, "preemptions": preempted},
        "copies": [{"cluster": c.cluster, "pool": c.pool, "phase": c.phase, "since": _iso(c.since),
                    "restarts": c.restarts, "evictions": c.evictions, "cost_usd": c.cost_usd,
                    "hourly_usd": c.hourly_usd, "reason": c.reason, "note": c.note} for c in copies],
        "events": _events(snap, job_id),
        "expected_start": _held(expected_start(v, plan, job_id, now, running), v, snap, job_id).as_dict()
        if waiting else None,
        "unreadable": [c.name for c in snap.clusters if c.status == "unreachable"],
    }


def _held(eta: Eta, v: Validated, snap: Snapshot, job_id: str) -> Eta:
    """A job the plan places now may already run on a cluster that was not read (a pool there has one of its
    options' accelerators): what runs there is unknown, and a reconcile loop that never read that cluster holds
    the start until it is read or counts as lost. Say so rather than "next cycle". The loop's own tests
    (reconcile/finished.py), as a loop that has read nothing yet sees them."""
    if not eta.placed:
        return eta
    unread, _ = unread_clusters(snap, LoopMemory(), ())
    facts = JobFacts(accelerators=frozenset(o.accelerator for o in v.options.get(job_id, ())))
    accelerators = {c.name: frozenset(p.accelerator for p in c.pools) for c in v.loaded.clusters}
    where = may_run_on(job_id, unread, facts, accelerators, snap)
    if not where:
        return eta
    return replace(eta, basis=f"{eta.basis}; but {', '.join(where)} could not be read and may run it already: a "
                   "reconcile loop that has not read it since it started holds the start until it is read or counts "
                   "as lost")


def report_priority(report: StatusReport, job_id: str) -> str:
    return next((j.priority for j in report.jobs if j.job == job_id), "")


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def _events(snap: Snapshot, job_id: str) -> list[dict[str, Any]]:
    """The conditions (and evictions) of the job's Workloads and JobSets on every cluster, newest first."""
    out: list[dict[str, Any]] = []
    for obs in snap.clusters:
        sets = [js for js in obs.jobsets if js.job_id == job_id]
        names = {(js.namespace, js.name) for js in sets}
        loads = [w for w in obs.workloads if (w.namespace, w.jobset) in names or f"{w.namespace}/{w.name}" == job_id]
        for kind, conditions in [*(("JobSet", js.conditions) for js in sets), *(("Workload", w.conditions)
                                                                                for w in loads)]:
            for c in conditions:
                out.append({"at": _iso(c.since), "cluster": obs.name, "object": kind, "type": c.type,
                            "status": c.status, "reason": c.reason, "message": c.message})
        for w in loads:         # a queued pool's capacity: the ProvisioningRequest check, Pending until granted
            for a in w.admission_checks:
                out.append({"at": _iso(a.since), "cluster": obs.name, "object": "Workload",
                            "type": f"AdmissionCheck {a.name}", "status": a.state, "reason": "",
                            "message": a.message})
            for e in w.evictions:
                out.append({"at": None, "cluster": obs.name, "object": "Workload", "type": "Evicted",
                            "status": "True", "reason": e.reason, "message": f"{e.count} time(s)"
                            + (f", {e.underlying_cause}" if e.underlying_cause else "")})
    out.sort(key=lambda e: (e["at"] or "", e["cluster"], e["object"], e["type"]), reverse=True)
    return out[:EVENTS]


def story_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def story_text(doc: dict[str, Any]) -> str:
    """The story for a terminal: short sections, the decision first."""
    lines = [f"{doc['job']}" + (f"  (priority {doc['priority']})" if doc["priority"] else "")
             + f"  observed {doc['observed_at'][:16].replace('T', ' ')} UTC", ""]
    d = doc["decision"]
    for p in d["placed"]:
        moved = f" ({p['reason']})" if p["reason"] else ""
        lines.append(f"plan: {p['status']} on {p['cluster']}/{p['pool']} units {unit_list(p['units'])}, option "
                     f"{p['option']}, ${p['hourly_usd']:,.2f}/h{moved}")
    if d["pending"]:
        lines += ["plan: waits; no place for it now:", *(f"  - {r}" for r in d["pending"])]
    if not d["placed"] and not d["pending"]:
        lines.append("plan: not placed (finished, or not in the plan)")
    lines += [f"preemption: {p['job']} by {p['by']}: {p['reason']}" for p in d["preemptions"]]
    if "group" in doc:          # a group member: its group's row (status._groups)
        g = doc["group"]
        lines.append(f"group {g['name']} ({g['members']}): {g['state']}")
    lines += ["", "copies:" if doc["copies"] else "copies: runs on no cluster"]
    for c in doc["copies"]:
        since = (c["since"] or "-")[:16].replace("T", " ")
        cost = f"${c['cost_usd']:,.2f} so far" if c["cost_usd"] is not None else "cost unknown"
        lines.append(f"  {c['cluster']}/{c['pool'] or '-'}: {c['phase']} since {since}, {c['restarts']} restart(s), "
                     f"{c['evictions']} eviction(s), {cost}" + (f"; {c['reason']}" if c["reason"] else "")
                     + (f"; {c['note']}" if c["note"] else ""))
    if doc["events"]:
        lines += ["", "recent events (conditions, newest first):"]
        for e in doc["events"]:
            at = (e["at"] or "-")[:16].replace("T", " ")
            detail = ": ".join(x for x in (e["reason"], e["message"]) if x)
            lines.append(f"  {at}  {e['cluster']} {e['object']} {e['type']}={e['status']}"
                         + (f"  {detail}" if detail else ""))
    if doc["expected_start"] is not None:
        eta = doc["expected_start"]
        when = eta["at"][:16].replace("T", " ") + " UTC" if eta["at"] else "unknown"
        lines += ["", f"expected start: {when} (estimate: {eta['basis']})"]
    if doc["unreadable"]:
        lines += ["", f"not read: {', '.join(doc['unreadable'])} (what runs there is unknown)"]
    return "\n".join(lines) + "\n"
