"""The planner's last step when it plans from what runs: re-pack running work onto idle prepaid capacity
(issue 22 item 4). Reserved and owned units are paid whether used or not; an on-demand (or spot) job running
while such units of an acceptable option sit idle pays twice. A function of one `PlanState`, after the
improvement phase (planner.py), so pending work has had every idle unit first.

A running job moves when all of these hold (each move's `reason` states the figures):
- it is kept where it runs (`--observed`, plan/live.py), on an `on-demand` or `spot` pool, and is a plain
  training or batch job: not a service (`kind: inference`), not a spread replica, not a member of a job group
  and not an elastic gang (those are placed as a whole by workloads.py), and of a preemptible class: a class
  with `preemptible: false` is never disrupted, not even to save money;
- its running minutes are known and its `duration_hours` is stated: remaining = its run on the option it
  runs (`resolve.run_hours`: duration / relative_speed) - running minutes (> 0). Without a duration the
  saving is unknown, and the job does not move (no duration is assumed);
- it is at its checkpoint: with `checkpoint_minutes: N > 0`, at most `repack.window_minutes` since its
  last one (`checkpoint.minutes_at_risk`); `0` checkpoints continuously; a job without `checkpoint_minutes`
  loses its whole run, so that run is its lost work (it moves only if the saving covers all of it);
- some option of the job fits on entirely idle units of a `reserved` or `owned` pool already paid for (the
  pool's paid units do not rise), within quota, budget and data residency (`place.place_at`), not out of its
  data region; an option of another accelerator only within the team's nominal quota of it (a re-pack never
  borrows: the cohort's quota is for waiting work);
- the saving is more than `MARGIN` (2) times the restart cost. Saving: the fall of the hourly cost of the two
  pools (the job's units on its pool close; 0 when it shares a node with other work, then it does not move) x
  the remaining hours.
  Restart cost: the minutes since its last checkpoint, plus `repack.restart_minutes` of restore and warm-up
  (the simulator's default restart cost, `--restart-minutes`), plus the longer run of a slower option
  (`relative_speed`), priced at the job's current $/h (what that accelerator time costs where it runs now);
- no job of its team waits with an option on the accelerator it runs on: the restart delays its finish, and
  with it the quota it holds (in the benchmark, moved jobs held their team's quota while a 128-GPU production
  job of the team waited for it);
- the plan moves fewer than `max_migrations_per_plan` running jobs (draining moves count too).
The best net saving moves first (ties by job id), re-measured after every move; deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checkpoint import minutes_at_risk
from ..resolve import run_hours
from .moves import compact_usd
from .place import place_at
from .state import Live, PlanState, amount, outside
from .types import EPS_USD, micro_usd

MARGIN = 2.0   # the saving must be this many times the restart cost: remaining time comes from `duration_hours`,
               # which users over-estimate (the simulator draws actual runs of 0.5-1.1x it), and a unit taken now
               # may be the one the next arrival would have used; at 1x the benchmark moved jobs for cents
PREPAID = ("reserved", "owned")
MOVABLE_FROM = ("on-demand", "spot")


@dataclass(frozen=True, slots=True)
class Move:
    job: str
    option: int
    pool: str
    saving_usd: float       # hourly fall x remaining hours
    cost_usd: float         # restart cost, in dollars
    reason: str


def migrations(st: PlanState) -> int:
    """Running jobs this plan already moves (a draining cluster's, sticky.py): placed, not kept, not forced."""
    live = st.fleet.live
    if live is None:
        return 0
    return sum(1 for lv in st.live.values()
               if lv.info.parent in live.running and not lv.kept and lv.info.id not in st.outcome.forced)


def repack(st: PlanState) -> int:
    """Move running jobs onto idle prepaid units (module docstring); returns how many moved."""
    live = st.fleet.live
    knobs = st.fleet.placement.repack
    if live is None or not knobs.enabled:
        return 0
    room = st.fleet.placement.max_migrations_per_plan - migrations(st)
    if room <= 0 or not any(ps.pool.capacity in PREPAID and ps.max_free for ps in st.pools.values()):
        return 0
    moved = 0
    done: set[str] = set()
    waiting = {(i.team, o.accelerator) for i in st.jobs.values() if i.id not in st.live for o in i.options}
    while moved < room:
        found = [m for lv in movable(st, done, waiting) if (m := best_move(st, lv)) is not None]
        if not found:
            break
        m = min(found, key=lambda m: (-micro_usd(m.saving_usd - m.cost_usd), m.job))
        lv = st.evict(m.job)
        if not place_at(st, lv.info, m.option, st.pools[m.pool], m.reason):   # pragma: no cover - measured just now
            st.put_back(lv)
            break
        done.add(m.job)
        moved += 1
    return moved


def movable(st: PlanState, done: set[str], waiting: set[tuple[str, str]]) -> list[Live]:
    live = st.fleet.live
    assert live is not None
    out = []
    for job_id, lv in sorted(st.live.items()):
        info, job = lv.info, lv.info.job
        if not lv.kept or job_id in done or info.parent not in live.running:
            continue
        if lv.pool.pool.capacity not in MOVABLE_FROM or (info.team, lv.option.accelerator) in waiting:
            continue    # a move delays its finish by the restart: its quota is held longer while its team waits
        if info.siblings or info.pin or job.kind == "inference" or job.group or job.workers or not info.preemptible:
            continue
        if job.duration_hours is not None and info.parent in live.run_minutes:
            out.append(lv)
    return out


def best_move(st: PlanState, lv: Live) -> Move | None:
    """The job's best move onto idle prepaid units, if it beats its restart cost; the state is unchanged."""
    live = st.fleet.live
    knobs = st.fleet.placement.repack
    info, job = lv.info, lv.info.job
    assert live is not None and job.duration_hours is not None
    ran = live.run_minutes[info.parent]
    remaining = run_hours(job.duration_hours, lv.option.relative_speed) * 60 - ran   # minutes, where it runs
    lost = minutes_at_risk(ran, job.checkpoint_minutes)
    if remaining <= 0 or (job.checkpoint_minutes is not None and lost > knobs.window_minutes):
        return None
    targets = [(opt, ps) for opt in info.options for ps in st.candidates(info, opt)
               if ps.pool.capacity in PREPAID and ps is not lv.pool
               and ps.fits_without_opening(st.gang(opt, ps), job.replicas)
               and not (outside(info, ps) and not outside(info, lv.pool))]
    if not targets:
        return None
    best: tuple[float, int, str, Move] | None = None
    old = lv.pool
    key = info.id
    before_all = {ps.pool.key: compact_usd(st, [old, ps]) for _, ps in targets}
    st.evict(key)
    try:
        for opt, ps in targets:
            if opt.accelerator != lv.option.accelerator and st.quota.needs_borrow(info.team, opt.accelerator,
                                                                                  amount(info, opt)):
                continue    # never borrow for money: the cohort's quota is for waiting work
            paid, target = ps.paid(), ps.target
            if not place_at(st, info, opt.index, ps, "", keep_reserved=True):
                continue
            fall = before_all[ps.pool.key] - compact_usd(st, [old, ps])
            rises = ps.paid() > paid
            st.evict(key)
            ps.trim(target)
            if rises or fall <= EPS_USD:
                continue
            slower = max(0.0, remaining * (lv.option.relative_speed / opt.relative_speed - 1))
            delay = lost + knobs.restart_minutes + slower
            saving, cost = fall * remaining / 60, lv.hourly_usd * delay / 60
            if saving <= MARGIN * cost + EPS_USD:
                continue
            move = Move(key, opt.index, ps.pool.key, saving, cost,
                        _reason(lv, ps.pool.capacity, ps.pool.key, fall, remaining, lost, knobs.restart_minutes,
                                slower, saving, cost))
            rank = (-micro_usd(saving - cost), opt.index, ps.pool.key, move)
            if best is None or rank[:3] < best[:3]:
                best = rank
    finally:
        st.put_back(lv)
    return None if best is None else best[3]


def _reason(lv: Live, capacity: str, to: str, fall: float, remaining: float, lost: float, restore: float,
            slower: float, saving: float, cost: float) -> str:
    ckpt = lv.info.job.checkpoint_minutes
    where = ("it never checkpoints: its whole run of" if ckpt is None
             else "at its checkpoint:" if ckpt else "it checkpoints continuously:")
    extra = f" + {slower:.0f} min slower option" if slower > 0 else ""
    return (f"re-packed from {lv.pool.pool.capacity} {lv.pool.pool.key} onto idle {capacity} {to}: saves "
            f"${saving:,.2f} (${fall:,.2f}/h for its remaining {remaining / 60:.1f} h) against a restart cost of "
            f"${cost:,.2f} ({where} {lost:.0f} min lost + {restore:g} min restore{extra}, at ${lv.hourly_usd:,.2f}/h)")
