"""Why a job waits: sorted, quantified reasons, one or more per option (Kueue's style:
`insufficient tpu-v5p quota for team vision: 64 chips more needed`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..resolve import ResolvedOption, gang_fit
from .capacity import gang_for
from .types import HOURS_PER_MONTH, Pending

if TYPE_CHECKING:
    from .planner import JobInfo, Planner


def describe(opt: ResolvedOption) -> str:
    if opt.shape is not None:
        return f"{opt.accelerator} {opt.shape}" + (f" x{opt.slices}" if opt.slices > 1 else "")
    return f"{opt.count}x {opt.accelerator}"


def _unit_word(opt: ResolvedOption, n: int) -> str:
    word = ("slice" if opt.shape is not None else "node") + ("s" if n != 1 else "")
    return f"{n} {word}"


def option_reasons(pl: Planner, info: JobInfo, opt: ResolvedOption) -> list[str]:
    replicas = info.job.replicas
    amount = opt.count * replicas
    out: list[str] = []
    thing = "chips" if opt.kind == "tpu" else "GPUs" if opt.kind == "gpu" else "devices"
    short = pl.quota.shortfall(info.team, opt.accelerator, amount)
    if short == 1:
        thing = thing[:-1]
    if short:
        out.append(f"insufficient {opt.accelerator} quota for team {info.team}: {short} {thing} more needed "
                   f"({pl.quota.why_short(info.team, opt.accelerator, amount)})")
    active = pl.candidates(info, opt)
    if not active:
        statically = [ps for ps in pl.pools.values() if gang_fit(opt, ps.pool, info.spot) is None]
        what = f"a {opt.shape} {opt.accelerator} slice" if opt.shape else f"room for {opt.count}x {opt.accelerator}"
        spot = {"required": " on spot capacity", "never": " on non-spot capacity"}.get(info.spot, "")
        where = f" ({', '.join(sorted({ps.pool.cluster + ' is ' + ps.pool.status for ps in statically}))})" \
            if statically else ""
        out.append(f"no pool in an active cluster has {what}{spot}{where}")
        return out
    first = None if pl.room_key(info, opt) in pl.no_room else next(
        ((ps, units) for ps, gang, _, _ in pl.live_candidates(info, opt)[0]
         if ps.may_fit(gang, replicas) and (units := ps.find(gang, replicas)) is not None), None)
    fits = [first] if first else []
    if not fits:
        gang = gang_for(opt, active[0].pool)
        need = max(1, gang.whole_units) * replicas
        room = max((ps.pool.max - ps.target + sum(1 for f in ps.free_acc if f == ps.pool.unit_accelerators)
                    for ps in active), default=0)
        out.append(f"not enough free {describe(opt)} capacity: needs {_unit_word(opt, need)}, the "
                   f"{len(active)} matching pool(s) have at most {_unit_word(opt, room)} free")
    elif not short:
        ps, units = min(fits, key=lambda f: pl.attributed(f[0], gang_for(opt, f[0].pool), f[1]))
        monthly = pl.attributed(ps, gang_for(opt, ps.pool), units) * HOURS_PER_MONTH
        budget = pl.teams[info.team].budget_monthly_usd or 0.0
        left = max(0.0, pl.budget_left(info.team) * HOURS_PER_MONTH)
        if monthly > left:
            out.append(f"monthly budget of team {info.team} (${budget:,.0f}) would be exceeded: the job costs "
                       f"${monthly:,.0f}/month and ${left:,.0f} is left")
    return out


def job_reasons(pl: Planner, info: JobInfo, cache: dict[tuple[object, ...], list[str]] | None = None) -> set[str]:
    """What stands in the way of every option of the job in the planner's current state, each reason
    prefixed with its option when the job has several."""
    reasons: set[str] = set()
    multi = len(info.options) > 1
    for opt in info.options:
        key = (info.team, pl.room_key(info, opt))   # same team, same gang: same reasons
        found = cache.get(key) if cache is not None else None
        if found is None:
            found = option_reasons(pl, info, opt)
            if cache is not None:
                cache[key] = found
        for r in found:
            reasons.add(f"option {opt.index} ({describe(opt)}): {r}" if multi else r)
    return reasons


def pending_reasons(pl: Planner, forced: dict[str, str]) -> list[Pending]:
    pending = []
    cache: dict[tuple[object, ...], list[str]] = {}
    for job_id in sorted(pl.jobs):
        if job_id in pl.live:
            continue
        info = pl.jobs[job_id]
        reasons = job_reasons(pl, info, cache)
        if job_id in forced:
            reasons.add(f"was running, but {forced[job_id]}")
        if any(p.job == job_id for p in pl.preemptions):
            reasons.add("preempted: " + next(p.reason for p in pl.preemptions if p.job == job_id))
        if not reasons:
            reasons.add("lower in the queue than jobs that took the remaining capacity")
        pending.append(Pending(job_id, tuple(sorted(reasons))))
    return pending
