"""The planner's improvement phase: a few more greedy runs under other orders, and the best plan kept.

The plan is judged lexicographically, the way strict priority (Kueue's admission order) asks:
1. work placed per priority class, from the highest class down (work of a job = accelerators of its first
   option * replicas, whichever option runs); more work in a higher class beats any amount in lower ones;
2. then less work placed outside its job's `data_region` (the same measure of work);
2b. then fewer spread jobs with every placed replica in one failure domain (plan/spread.py: the default
   spread is best effort and yields to the data region; a stated `spread:` is a rule every run keeps);
3. then the hourly cost of the capacity opened (pool targets * unit prices, min units included), lower first;
4. then fewer preemptions; then the run's rank below (the default run wins every tie, so fair share and the
   documented tie-breaks decide whenever the alternatives are not strictly better).

Runs, each a whole `greedy.run` on a fresh `PlanState` (stickiness, quotas, budgets, preemption and the final pass are
the same in every run, so every candidate plan keeps every rule):
0. `fair`: the default greedy (planner.py's docstring).
1. `size`: within a class, all jobs largest first instead of teams in DRF turns (fair share can split a
   class's capacity so that a big job of the team that is behind no longer fits).
2. `ffd`: first-fit decreasing within each class: jobs largest first, first option with quota, first
   candidate pool (cheapest per accelerator, then capacity preference, then name), lowest-index units. This
   is the baseline of bench/bench_quality.py run with the planner's own rules, so the chosen plan is never
   worse than it by the order above: it is one of the candidates.
3. `repack`: the jobs the best plan so far places (not kept ones) go first, largest first whatever their
   class, then the rest class by class. The same set of jobs, re-packed so that big jobs take the paid-for
   capacity and small ones fill cheap nodes.
4. kicks (`kicks`): for up to MAX_KICKS pending jobs of the best plan (highest class, then largest, first),
   two runs each: the pending job first, then the queue as usual; and the pending job with every job the
   best plan places re-packed largest first. Either reaches what needs a chain of three or more moves (the
   pending job displaces one job, which displaces another...) or leaving a smaller job of the class pending.
   The plan before the kicks and the kicks' best are both polished by the moves below; the better one wins.
   Not when planning from what runs (`--observed`, the reconcile loop, the simulator): those re-plan every
   interval, and two whole greedy runs per kicked job would be paid every cycle.
After each run but `ffd` (which stays the plain baseline), eject-and-insert (`insert_pending`, through
`moves.eject_and_insert`) tries to make
room for each pending job by moving one placed job, or all placed jobs of one pool, elsewhere; then
`moves.eject_pairs` ejects one or two placed jobs (two: on the same pool) for a pending job, and keeps the
move when the work per class rises even if an ejected job now waits (a larger job of its class, or a job
of a higher class, takes its place). On the chosen plan (now placing at the best key even if `ffd` won),
eject-and-insert and `eject_pairs` once more if needed, then cost moves: `moves.relocate` (each placed job
on every candidate, kept at the lowest cost), `reduce_cost` (two placed jobs taken out and put back
largest first), `repack_pools` (a placed job and all the smaller jobs of one of its candidate pools, put back
largest first), then `moves.fill_pending` (a pending job that fits the room those moves freed takes it: a
relocation that closes a unit leaves room that a waiting gang fits), and `moves.compact` (jobs on a pool's
top unit move into an entirely free unit below, so the target falls). Every move is all-or-nothing and
restores the state exactly when it fails, never touches a job kept from the base, and only adds work (by the
order above) or lowers cost at equal work, so the plan only gets better by the order above.

Guarantees: the plan is never worse than the default run nor than first-fit decreasing by that order (both
are candidates and moves only improve), whenever the phase runs. Not a guarantee of optimality: chains of
three or more moves, or re-packing several pools at once, are out of reach except through the kicks
(bench/bench_quality.py measures the gap to the exact optimum).

Budget: the phase runs only while the queue has at most `MAX_PAIRS` (job option, candidate pool) pairs, a spread
replica's counted once per replica of its job (`pairs`) (the example fleet: about 1,100; the benchmark's 1,000-job
fleet: about 215,000), with at most `MAX_MOVES` moves per kind and run (fewer on fleets of many pools:
`MAX_WORK`), so it costs a few times the greedy's time on small and medium fleets (where the exact mode also runs)
and nothing on large ones, where the default run alone is the plan. Deterministic: a fixed list of runs and moves,
each deterministic, and a total order on plans. A run is judged by its key read from its state (`state_key`, equal
to `plan_key` of its frozen plan); only the plan kept is frozen (summary.freeze: pending reasons, per-cluster
quotas and pool plans are most of a small run's cost), once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..resolve import away_from_data
from .greedy import place_all
from .locality import bring_home
from .moves import (
    compact,
    compact_usd,
    eject_and_insert,
    eject_pairs,
    fill_pending,
    frees_room,
    frees_unit,
    pending_order,
    reach,
    relocate,
)
from .reserve import seed
from .spread import domain, group_replicas
from .state import Fleet, Live, PlanState, Strategy, work
from .summary import freeze, group_lives, withdrawn_victims
from .types import EPS_USD, Placement, Plan, Reservation, micro_usd

MAX_PAIRS = 20_000
MAX_MOVES = 2_000    # eject-and-insert attempts per run, and cost moves on the chosen plan, at most ...
MAX_WORK = 40_000    # ... this divided by the number of pools (a move's cost grows with the pools it reaches)

MAX_KICKS = 3       # pending jobs kicked in (two runs each) after the runs above (more: slower, no gain on the bench)
SIZE = Strategy(name="size", order="size")
FFD = Strategy(name="ffd", order="size", nominal_first=False, first_fit=True)


def plan_key(st: PlanState, plan: Plan, rank: int) -> tuple[object, ...]:
    """The order of the module docstring (smaller is better)."""
    done: dict[int, int] = {}
    for p in plan.placements:
        info = st.fleet.by_job[p.job]
        done[info.priority] = done.get(info.priority, 0) + placed_work(st, p)
    levels = sorted({i.priority for i in st.jobs.values()}, reverse=True)
    return (tuple(-done.get(level, 0) for level in levels), away_work(st, plan), unspread(st, plan),
            micro_usd(plan.cost.hourly_usd), len(plan.preemptions), rank)


def state_key(st: PlanState, rank: int) -> tuple[object, ...]:
    """`plan_key` of the state's plan, from the state (summary.freeze: the pending jobs' reasons, the quotas and
    the pools' plans are what a run that loses never needs)."""
    done: dict[int, int] = {}
    away = 0
    doms: dict[str, set[str]] = {}
    count: dict[str, int] = {}
    for (job, _), lives in group_lives(st).items():     # a placement of the plan each (summary.freeze)
        info, lv = st.fleet.by_job[job], lives[0]
        share = group_replicas(lv.gang.accelerators, sum(len(x.units) for x in lives),
                               info.options[lv.option.index].count) if info.siblings else 1
        done[info.priority] = done.get(info.priority, 0) + work(info) * share
        away += work(info) * share if away_from_data(info.job, lv.pool.pool) else 0
        if info.siblings:
            doms.setdefault(job, set()).add(domain(lv.pool.pool, info.spread))
            count[job] = count.get(job, 0) + share
    total = 0.0
    for ps in sorted(st.pools.values(), key=lambda ps: (ps.pool.cluster, ps.pool.name)):   # as summary.summarize
        total += ps.final_target() * ps.unit_hourly_usd
    gone = withdrawn_victims(st) if st.outcome.preemptions else frozenset()
    preemptions = {(st.jobs[p.job].parent, st.jobs[p.by].parent, p.reason, p.after_minutes)
                   for p in st.outcome.preemptions if p.job not in gone}
    levels = sorted({i.priority for i in st.jobs.values()}, reverse=True)
    return (tuple(-done.get(level, 0) for level in levels), away,
            sum(1 for job, d in doms.items() if len(d) == 1 and count[job] >= 2), micro_usd(total), len(preemptions),
            rank)


def placed_work(st: PlanState, p: Placement) -> int:
    """The work of one placement: the job's, or for a spread job its replicas' in that pool."""
    info = st.fleet.by_job[p.job]
    if not info.siblings:
        return work(info)
    opt = info.options[p.option]
    return work(info) * group_replicas(p.accelerators_per_unit, len(p.units), opt.count)


def unspread(st: PlanState, plan: Plan) -> int:
    """Spread jobs (spread.py) with two or more replicas placed, all in one failure domain (the exact
    mode's criterion between work away from its data and cost)."""
    doms: dict[str, set[str]] = {}
    count: dict[str, int] = {}
    for p in plan.placements:
        info = st.fleet.by_job[p.job]
        if info.siblings:
            doms.setdefault(p.job, set()).add(domain(st.pools[p.pool_key].pool, info.spread))
            count[p.job] = count.get(p.job, 0) + placed_work(st, p) // work(info)
    return sum(1 for job, d in doms.items() if len(d) == 1 and count[job] >= 2)


def away_work(st: PlanState, plan: Plan) -> int:
    """Work placed outside its job's `data_region` (the exact mode's criterion (2), between work and spread)."""
    return sum(placed_work(st, p) for p in plan.placements
               if away_from_data(st.fleet.by_job[p.job].job, st.pools[p.pool_key].pool))


def pairs(st: PlanState) -> int:
    """(job option, candidate pool) pairs of the jobs the run had to place (not kept from the base); a spread
    replica's once per replica of its job, since each move of one reads where its siblings run (a service of
    1,000 replicas made the phase take minutes on the example fleet: its pairs alone were 5,000)."""
    total = 0
    for info in st.jobs.values():
        lv = st.live.get(info.id)
        if lv is not None and lv.kept:
            continue
        total += sum(len(st.candidates(info, opt)) for opt in info.options) * max(1, len(info.siblings))
        if total > MAX_PAIRS:
            break
    return total


def improve(first: PlanState) -> tuple[Plan, PlanState]:
    """The best of the default run (`first`, already run: greedy.place_all) and the alternative runs. Only the
    kept plan is frozen (summary.freeze); the others are judged by `state_key`."""
    if pairs(first) > MAX_PAIRS:
        return freeze(first), first
    fleet, base = first.fleet, first.base
    held = tuple(first.reservation_of.values())   # the default run's reservations bind every run (reserve.py)
    best = finish(first, 0)
    for rank, strategy in enumerate((SIZE, FFD), start=1):
        best = min(best, fresh_run(fleet, base, strategy, rank, held), key=by_key)
    _, _, winner = best
    lead = tuple(sorted(j for j, lv in winner.live.items() if not lv.kept))
    best = min(best, fresh_run(fleet, base, Strategy(name="repack", order="fair", lead=lead), 3, held), key=by_key)
    # The kicks (two whole greedy runs per kicked job) only for plans from git: a plan from what runs
    # (`--observed`, the reconcile loop and the simulator, which re-plan every interval) keeps its cycle time.
    kicked = kicks(fleet, base, best, 4, held) if fleet.live is None else best
    done = polish(best)
    if kicked is not best:   # the kicks' best, polished too; the better polished plan wins (ties: the earlier)
        done = min(done, polish(kicked), key=by_key)
    assert isinstance(done[1], Plan)   # polish freezes
    return done[1], done[2]


def polish(ranked: Ranked) -> Ranked:
    """The moves on the chosen plan (module docstring), then its key again (same rank), and its plan."""
    key, p, winner = ranked
    winner.strategy = replace(winner.strategy, first_fit=False)   # moves below place at the best key
    changed = insert_pending(winner, moves(winner)) if winner.strategy.name == "ffd" else False
    changed = eject_pairs(winner, moves(winner)) or changed
    changed = bring_home(winner, moves(winner)) or changed
    changed = relocate(winner, moves(winner)) or changed
    changed = reduce_cost(winner, moves(winner)) or changed
    changed = repack_pools(winner, moves(winner)) or changed
    changed = fill_pending(winner) or changed   # what the cost moves freed, for the jobs still waiting
    if compact(winner, sorted(winner.pools.values(), key=lambda ps: ps.pool.key)) or changed:
        p = freeze(winner)
    elif isinstance(p, AsOf):
        p = p.freeze(winner)
    rank = key[-1]
    assert isinstance(rank, int)
    return state_key(winner, rank), p, winner


@dataclass(frozen=True)
class AsOf:
    """A run's plan not frozen yet: the state's once every move since is undone, frozen as the state stood when
    this was taken. An undone move leaves every job where it was, but not everything freeze reads: a pending job
    it placed and took out again lost the reasons recorded when it was decided (`outcome.waits`), and a job it
    took out and put back comes later in `st.live` (the first replica's reason names a spread job's placement)."""

    waits: dict[str, tuple[str, ...]]
    order: tuple[str, ...]

    @staticmethod
    def of(st: PlanState) -> AsOf:
        return AsOf(dict(st.outcome.waits), tuple(st.live))

    def freeze(self, st: PlanState) -> Plan:
        """The plan then; the state itself is left as it is (later steps read it as the moves left it)."""
        waits, live = st.outcome.waits, st.live
        then = {j: live[j] for j in self.order if j in live}   # the same jobs, since every move was undone
        then.update(live)
        st.outcome.waits, st.live = dict(self.waits), then
        try:
            return freeze(st)
        finally:
            st.outcome.waits, st.live = waits, live


Ranked = tuple[tuple[object, ...], Plan | AsOf, PlanState]
"""A run's key (`state_key`), its plan (frozen, or `AsOf` the moment it would have been), its state."""


def fresh_run(fleet: Fleet, base: Plan | None, strategy: Strategy, rank: int,
              held: tuple[Reservation, ...] = ()) -> Ranked:
    """A whole greedy run under `strategy` on a fresh state holding the reservations `held`, then its
    eject-and-insert (`finish`)."""
    st = PlanState(fleet, base, strategy)
    seed(st, held)
    place_all(st)
    return finish(st, rank)


def finish(st: PlanState, rank: int) -> Ranked:
    """The run after eject-and-insert, with its key; not frozen (`Ranked`): its plan is the run's as it stood
    before the moves, unless one was kept."""
    before = AsOf.of(st)
    if st.strategy.first_fit:   # first-fit decreasing stays as it is: the baseline, unimproved
        return state_key(st, rank), before, st
    if insert_pending(st, moves(st)) | eject_pairs(st, moves(st)):
        before = AsOf.of(st)
    return state_key(st, rank), before, st


def kicks(fleet: Fleet, base: Plan | None, best: Ranked, rank: int, held: tuple[Reservation, ...] = ()) -> Ranked:
    """Kicks: for the best plan's pending job X of the highest class (then largest, then id), two fresh runs:
    X placed first, then the queue as usual; and X with every job the best plan places (not kept) as the
    lead, re-packed largest first, the rest class by class. Each run is a whole greedy run (every rule kept)
    and its plan competes by `plan_key`, so a kick that makes X fit by moving a chain of other jobs, or by
    leaving a smaller job of X's class pending for more work, wins; the next kick starts from the new best.
    A kicked run that places X is finished like the other runs (`finish`: eject-and-insert); one that does
    not is judged as it is (it rarely wins, and finishing it costs as much as the run). At most MAX_KICKS
    jobs, each kicked once."""
    done: set[str] = set()
    for k in range(MAX_KICKS):
        _, _, winner = best
        placed = tuple(sorted(j for j, lv in winner.live.items() if not lv.kept))
        pending = sorted((i for i in winner.jobs.values() if i.id not in winner.live and i.id not in done),
                         key=lambda i: (-i.priority, -work(i), i.id))
        if not pending:
            return best
        x = pending[0].id
        done.add(x)
        for v, lead in enumerate(((x,), (*placed, x))):
            kst = PlanState(fleet, base, Strategy(name=f"kick:{x}", order="fair", lead=lead))
            seed(kst, held)
            place_all(kst)
            r = rank + 2 * k + v
            run_ = finish(kst, r) if x in kst.live else (state_key(kst, r), AsOf.of(kst), kst)
            best = min(best, run_, key=by_key)
    return best


def by_key(ranked: Ranked) -> tuple[object, ...]:
    """The plan's key alone (ties keep the first: the plans and states are not ordered)."""
    return ranked[0]


def moves(st: PlanState) -> int:
    return min(MAX_MOVES, MAX_WORK // max(1, len(st.pools)))


def insert_pending(st: PlanState, budget: int) -> bool:
    """Eject and re-insert. For each pending job (highest class, then largest, first), try in turn: take one
    placed job out of a pool the pending job could use (lowest class, then smallest, first), or every placed
    job of one such pool (in candidate order); place the pending job; then put the ones taken out back
    anywhere they fit (largest first, each at its best candidate). Keep the result if all of them fit, else
    restore the state exactly. Kept jobs of the base are never taken out. Each success adds a job and
    removes none, so work only grows. At most `budget` attempts. Returns whether anything changed."""
    changed = False
    attempts = 0
    pending = pending_order(st)
    for info in pending:
        pools = [ps for opt in info.options for ps in st.candidates(info, opt)]
        keys = {ps.pool.key for ps in pools}
        movable = sorted((lv for lv in st.live.values() if not lv.kept and lv.pool.pool.key in keys),
                         key=lambda lv: (lv.info.priority, work(lv.info), lv.info.id))
        moves = [[lv] for lv in movable]
        seen: set[str] = set()
        for ps in pools:
            group = [lv for lv in movable if lv.pool is ps]
            if len(group) > 1 and ps.pool.key not in seen:
                seen.add(ps.pool.key)
                moves.append(group)
        for move in moves:
            if attempts >= budget:
                return changed
            attempts += 1   # counted even when skipped below: the attempts made are the same with or without the test
            if not frees_room(st, info, move):
                continue    # a necessary test, cheaper than the move: the move would fail and be undone
            if eject_and_insert(st, info, move, keep=every(move), fill=False, accept=lambda _: True):
                changed = True
                break
    return changed


def every(out: list[Live]) -> set[str]:
    return {lv.info.id for lv in out}


def reduce_cost(st: PlanState, budget: int) -> bool:
    """Re-pack for cost. Moves: two placed jobs (not kept) on pools of the same accelerator (single jobs
    go to `moves.relocate`, which tries every candidate), taken out and put back largest first, each at its
    best candidate (which prefers already-paid room). A move is tried only if taking the two out frees a
    unit (`moves.frees_unit`: else it cannot lower the cost) and one of them alone frees none (a heuristic
    prune: when each frees a unit alone, relocation already tried each on every candidate). It is kept if
    every job fits again and the compacted capacity cost (`moves.compact_usd`) falls by more than a
    micro-dollar per hour (the pools are then compacted); else the state is restored exactly. The set of
    placed jobs never changes, so neither does the work. Jobs in order of attributed cost, dearest first,
    ties by id; at most `budget` moves tried."""
    changed = False
    attempts = 0
    jobs = sorted((lv for lv in st.live.values() if not lv.kept), key=lambda lv: (-lv.hourly_usd, lv.info.id))
    ids = [lv.info.id for lv in jobs]
    moves = [[a, b] for i, a in enumerate(ids) for b in ids[i + 1:]
             if st.live[a].option.accelerator == st.live[b].option.accelerator]
    alone: dict[str, bool] = {}   # frees_unit of each job alone, until a move is kept (a refused one restores all)
    for move in moves:
        if attempts >= budget:
            break
        if any(j not in st.live or st.live[j].kept for j in move):   # pragma: no cover - placed jobs stay placed
            continue
        attempts += 1
        out = [st.live[j] for j in move]
        if not worth_repacking(st, out, alone):
            continue
        if repack(st, out):
            changed = True
            alone.clear()
    return changed


def worth_repacking(st: PlanState, pair: list[Live], alone: dict[str, bool]) -> bool:
    """`reduce_cost`'s test of a pair: taking both out frees a unit (`frees_unit`) and one of them alone frees
    none. `alone` holds `frees_unit` of single jobs (filled here; valid while the state is): a unit one job
    frees alone, the pair frees too (the other job has nothing on it), so the pair's own test is needed only
    when neither frees one alone."""
    first, second = (alone[lv.info.id] if lv.info.id in alone else alone.setdefault(lv.info.id, frees_unit(st, [lv]))
                     for lv in pair)
    return not (first and second) and (first or second or frees_unit(st, pair))


def repack(st: PlanState, out: list[Live]) -> bool:
    """Take `out` out and put every job back, largest first, each at its best candidate; kept (and the pools
    compacted) if all fit again and the compacted capacity cost falls by more than EPS_USD, else restored.
    Stopped (restored) as soon as the jobs put back so far cost at least that: each job still to put back only
    adds used units (`compact_usd` is a sum of max(min, used units) * price over fixed pools, in a fixed order,
    so neither the sum nor its rounding can fall), so the move would be refused anyway. Most cost moves end
    there: the largest job goes back where it was."""
    pools = reach(st, [lv.info for lv in out])
    before = compact_usd(st, pools)
    if eject_and_insert(st, None, out, keep=every(out), fill=False,
                        accept=lambda _: compact_usd(st, pools) < before - EPS_USD,
                        hopeless=lambda: compact_usd(st, pools) >= before - EPS_USD):
        compact(st, pools)
        return True
    return False


def repack_pools(st: PlanState, budget: int) -> bool:
    """Re-pack one pool around a larger job. For each placed job X (not kept; dearest attributed cost first,
    ties by id) and each other pool P among its candidates that holds placed jobs (not kept) smaller than X:
    take out X and every job on P, put them back largest first, each at its best candidate (so X, the
    largest, takes P's capacity first, and the small jobs fill what is left anywhere). Kept if every job
    fits again and the compacted capacity cost falls by more than a micro-dollar per hour; else the state
    is restored exactly. Reaches what pairs cannot: a big job moving onto paid-for capacity that several
    small jobs held. The set of placed jobs never changes, so neither does the work. At most `budget`
    moves tried."""
    changed = False
    attempts = 0
    jobs = sorted((lv for lv in st.live.values() if not lv.kept), key=lambda lv: (-lv.hourly_usd, lv.info.id))
    for x in [lv.info.id for lv in jobs]:
        lv = st.live.get(x)
        if lv is None or lv.kept:   # pragma: no cover - placed jobs stay placed
            continue
        for _, ps in sorted(st.reach(lv.info).items()):
            here = [o for o in st.live.values() if o.pool is ps and o.info.id != x]
            if ps is st.live[x].pool or not here or any(o.kept or work(o.info) >= work(lv.info) for o in here):
                continue
            if attempts >= budget:
                return changed
            attempts += 1
            if repack(st, [st.live[x], *sorted(here, key=lambda o: o.info.id)]):
                changed = True
                break
    return changed
