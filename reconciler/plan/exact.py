"""Exact mode of the planner (`fleet plan --solver exact`): the greedy planner's placement rules as one
OR-Tools CP-SAT model, solved to proven optimality on small and medium fleets. It is a yardstick for the
greedy planner (bench/bench_quality.py) and a way to check a plan by hand; `plan()` stays the default.

The model (names as in the code):
- `x[j,o,p]`: job j runs option o in pool p, at most one (o, p) per job, else it is pending. The candidate
  pools are the greedy's own (`PlanState.candidates`): active clusters, a known price, `gang_fit`
  (accelerator, TPU slice shape, whole nodes, node vCPU/memory, spot policy, max) and `residency_fit`
  (`data_residency: required`: never outside the job's `data_region`).
- Units 0..max-1 of every pool with candidates: `open[u]` (units 0..min-1 always open, and paid) and
  `whole[u]` (taken whole by a TPU slice or a node of a multi-node GPU gang). A whole-unit gang of w units
  per replica adds w * replicas to the pool's whole units; which ones is settled after the solve, since
  whole units are interchangeable. A node-sharing gang (fewer accelerators than a node) picks one unit per
  replica with booleans `z[j,o,p,u]`, so replicas land on distinct units. Per unit:
  sum(z * count) + unit * whole <= unit * open, and the same for vCPUs and memory when the node is known.
- Symmetry breaking (the units of a pool are identical): open units come first (units 0..target-1), whole
  units are the last open ones, and the node-sharing gangs, ordered largest first, follow the bin-packing
  rule "the k-th gang uses only the first R_k units", R_k = replicas of gangs 0..k (any packing can be
  renumbered by the first gang on each unit). This turns pure packing proofs from seconds into
  milliseconds. Used units are renumbered 0..k-1 afterwards; the target is max(min, k).
- Quotas, quota.py's model in its final-state form: per team and accelerator, usage U (count * replicas),
  borrowed = max(0, U - N), lendable = min(L, N - (U - borrowed)); borrowed <= B; per cohort root and
  accelerator, the members' borrowing <= their lendable quota; a team outside any cohort: U <= N.
- Budgets: the attributed $/h of the team's placements (unit price * accelerators taken / unit accelerators
  * units used, the greedy's `attributed`) <= budget / 730, to 1e-9 $/h per job like the greedy's check.

Objective, lexicographic. (1) Work placed, by default class by class (`objective="strict"`): one solve per
priority class from the highest value down, each maximizing the work of that class (count * replicas,
where count is the accelerators of the job's first option, the option `relative_speed` is relative to,
whichever option runs) with every higher class held at its optimum. This is strict priority, the rule the
greedy follows and Kueue admits by: no amount of lower-class work is worth leaving a job of a higher class
pending that could run instead. With `objective="weighted"`, (1) is a single solve of the priority-weighted
sum (class value * count * replicas), where a big low-priority job can outweigh a small high-priority one
(kept to measure how much strict priority costs in weighted terms). The option chosen changes neither the
work placed (not scaled by relative_speed: a slower option is not less work) nor its size (with the chosen
option's count, a job would count as 16x more work on 16 GPUs than on 1 faster GPU, and the solver would
prefer bigger options for no benefit). (2) With (1) held, minimize the work placed outside its job's
`data_region` (same measure; the greedy's first preference for each job, and the improvement phase's second
criterion, `improve.plan_key`). (2b) With (1) and (2) held, minimize the services whose default spread
(no `spread:` in the job file) left every placed replica in one domain: best effort, after the data region,
so a replica never leaves its data region to spread (a stated `spread:` is a constraint, `_spread`).
(3) With (1), (2) and (2b) held at the values found, minimize the hourly cost of the opened capacity, the
sum over pools of units * unit price. `ExactResult.work` is always the weighted sum.
So the exact mode and the greedy judge plans by the same order (work per class, work away from its data,
unspread services, cost) under the same rules (candidate pools, quotas, budgets, gangs, spot policy,
spread rules).

Differences from the greedy, on purpose: `base` is not sticky (everything is re-planned; a placement reports
`kept` or `moved` only by comparing it with the base, by `units.stays`: a GPU job on other, renumbered
nodes of its pool is kept, a TPU job on another slice moved), nothing is preempted, and capacity
preference, option order and fair share play no part (they only break the greedy's ties).

Deterministic: one worker, a fixed seed, and the time limit of each solve counted in CP-SAT's
deterministic time (one unit took 1-2 s of wall time on the machine this was written on), so a run that
stops at the limit stops at the same point every time; a wall-clock cap of 3x the limit is only a safety
net. The 90 benchmark instances are proven optimal in 0.7 s on average (at most a few seconds), the 50-job
example fleet in 6-30 s (machine load). Money is scaled to whole micro-dollars per hour in the
objective and to nano-dollars per hour in the budget constraints.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..extras import missing
from ..problems import UsageError
from ..resolve import ResolvedOption, away_from_data
from ..validate import Validated
from .capacity import Gang, PoolState, gang_for
from .spread import domain
from .starts import annotate
from .state import JobInfo, PlanState, outside, qkey
from .sticky import keep_base, restart_reason
from .summary import group_lives, not_spread, summarize
from .types import HOURS_PER_MONTH, Pending, Placement, Plan
from .units import interchangeable, stays

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

PENDING_REASON = ("not placed by the exact solver (objective: work per priority class, highest first; then "
                  "work outside data regions; then cost)")
PENDING_REASON_WEIGHTED = ("not placed by the exact solver (objective: priority-weighted work; then work outside "
                           "data regions; then cost)")
MOVED_REASON = "re-planned by the exact solver, which does not keep base placements"
COST_SCALE = 1_000_000          # objective (3): micro-dollars per hour
BUDGET_SCALE = 1_000_000_000    # budgets: nano-dollars per hour
MAX_UNIT_LITERALS = 300_000     # beyond this the model is too big for a useful exact answer


@dataclass(frozen=True, slots=True)
class ExactResult:
    """The exact plan and how good the proof is (for the benchmark)."""

    plan: Plan
    status: str                 # OPTIMAL (both solves proven) | FEASIBLE (a time limit stopped one) | UNKNOWN
    work_status: str            # status of solve (1) (OPTIMAL only if every class's solve was)
    cost_status: str            # status of solve (2)
    work: int                   # priority-weighted work placed
    work_bound: int             # upper bound on it (== work when solve (1) is OPTIMAL; weighted: the solver's)
    cost_bound_hourly_usd: float  # lower bound on the capacity cost at that work (== cost when OPTIMAL)
    seconds: float              # wall time of both solves


@dataclass(slots=True)
class _Candidate:
    info: JobInfo
    opt: ResolvedOption
    ps: PoolState
    gang: Gang
    x: cp_model.IntVar
    z: list[cp_model.IntVar]    # per unit, node-sharing gangs only


def job_size(info: JobInfo) -> int:
    """Accelerators of the job's first option * replicas: its work within its class."""
    return info.options[0].count * info.job.replicas


def job_work(info: JobInfo) -> int:
    """Priority-weighted work of placing the job, whichever option runs: class value * accelerators of its
    first option (the one `relative_speed` is relative to) * replicas."""
    return info.priority * info.options[0].count * info.job.replicas


def solve(v: Validated, base: Plan | None = None, *, time_limit_s: float = 20.0,
          objective: str = "strict") -> ExactResult:
    """Solve the validated repository exactly (see the module docstring). `time_limit_s` applies to each
    solve. `objective`: "strict" (work class by class, the default) or "weighted" (one weighted sum).
    Raises UsageError if OR-Tools is missing or the fleet is too big for the model."""
    if objective not in ("strict", "weighted"):
        raise ValueError(f"objective must be strict or weighted, not {objective!r}")
    try:
        from ortools.sat.python import cp_model
    except ImportError as e:   # the light install: the `exact` extra brings OR-Tools
        raise missing("exact", "`fleet plan --solver exact`", e) from None

    started = time.perf_counter()
    reason = PENDING_REASON if objective == "strict" else PENDING_REASON_WEIGHTED
    pl = PlanState(v, None)        # the greedy's own indexing of pools, jobs, options, quotas; not run
    m = cp_model.CpModel()

    # -- jobs: one (option, pool) or pending ----------------------------------------------------------------
    cands: list[_Candidate] = []
    literals = 0
    for job_id in sorted(pl.jobs):
        info = pl.jobs[job_id]
        mine: list[cp_model.IntVar] = []
        for opt in info.options:
            for ps in sorted(pl.candidates(info, opt), key=lambda ps: ps.pool.key):
                gang = gang_for(opt, ps.pool)
                x = m.new_bool_var(f"x[{job_id},{opt.index},{ps.pool.key}]")
                z: list[cp_model.IntVar] = []
                if not gang.whole_units:
                    z = [m.new_bool_var(f"z[{job_id},{opt.index},{ps.pool.key},{u}]") for u in range(ps.pool.max)]
                    m.add(sum(z) == info.job.replicas * x)
                    literals += len(z)
                cands.append(_Candidate(info, opt, ps, gang, x, z))
                mine.append(x)
        if len(mine) > 1:
            m.add_at_most_one(mine)
    if literals > MAX_UNIT_LITERALS:
        raise UsageError(f"the fleet is too big for `--solver exact` ({literals:,} job-unit choices)",
                         "use the default greedy planner; the exact mode is for small and medium fleets")

    # -- units of each pool ---------------------------------------------------------------------------------
    by_pool: dict[str, list[_Candidate]] = defaultdict(list)
    for c in cands:
        by_pool[c.ps.pool.key].append(c)
    opened: dict[str, list[cp_model.IntVar]] = {}
    wholes: dict[str, list[cp_model.IntVar]] = {}
    cost_terms: list[tuple[int, cp_model.IntVar]] = []
    cost_fixed = 0
    for key in sorted(pl.pools):
        ps = pl.pools[key]
        price = round(ps.unit_hourly_usd * COST_SCALE)
        pool_cands = by_pool.get(key, [])
        if not pool_cands:
            cost_fixed += price * ps.pool.min
            continue
        n, full = ps.pool.max, ps.pool.unit_accelerators
        op = [m.new_bool_var(f"open[{key},{u}]") for u in range(n)]
        wh = [m.new_bool_var(f"whole[{key},{u}]") for u in range(n)]
        opened[key], wholes[key] = op, wh
        for u in range(ps.pool.min):
            m.add(op[u] == 1)
        for u in range(n - 1):
            m.add(op[u] >= op[u + 1])
            m.add(wh[u] <= wh[u + 1] + 1 - op[u + 1])   # whole units: the last open ones
        whole_demand = [c.gang.whole_units * c.info.job.replicas * c.x for c in pool_cands if c.gang.whole_units]
        m.add(sum(wh) == sum(whole_demand))
        sharing = [c for c in pool_cands if not c.gang.whole_units]
        for u in range(n):
            m.add(sum(c.gang.accelerators * c.z[u] for c in sharing) + full * wh[u] <= full * op[u])
            if ps.pool.node_cpus is not None and any(c.gang.cpus for c in sharing):
                m.add(sum(c.gang.cpus * c.z[u] for c in sharing if c.gang.cpus) <= ps.pool.node_cpus * op[u])
            if ps.pool.node_memory_gib is not None and any(c.gang.memory_gib for c in sharing):
                m.add(sum(c.gang.memory_gib * c.z[u] for c in sharing if c.gang.memory_gib)
                      <= ps.pool.node_memory_gib * op[u])
        # Bin-packing symmetry breaking: order the sharing gangs (largest first); the k-th can only use
        # the first R_k units, R_k = replicas of gangs 0..k (number units by the first gang on them).
        sharing.sort(key=lambda c: (-c.gang.accelerators, -c.info.job.replicas, c.info.id, c.opt.index))
        reach = 0
        for c in sharing:
            reach += c.info.job.replicas
            for u in range(reach, n):
                m.add(c.z[u] == 0)
        # Redundant (the per-unit rows summed), but it gives the LP relaxation the pool's total capacity:
        # a much better bound for solve (2).
        m.add(sum(c.gang.accelerators * max(1, c.gang.whole_units) * c.info.job.replicas * c.x for c in pool_cands)
              <= full * sum(op))
        cost_terms.extend((price, o) for o in op)

    # -- quotas (quota.py, final state) -----------------------------------------------------------------------
    # quota.py's reading of teams.yaml (nominal, borrowing and lending limits; lending domains)
    limits, domain = pl.quota.limits, pl.quota.domain
    members: dict[str, list[str]] = defaultdict(list)
    for team in sorted(domain):
        if domain[team] is not None:
            members[str(domain[team])].append(team)
    usage: dict[tuple[str, str], list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
    for c in cands:   # spot-only work of a team with a `spot:` quota is charged to that (`<acc>@spot`: quota.py)
        usage[(c.info.team, qkey(c.info, c.opt))].append((c.opt.count * c.info.job.replicas, c.x))
    borrowed: dict[tuple[str, str], cp_model.IntVar] = {}
    lendable: dict[tuple[str, str], cp_model.IntVar] = {}
    for (team, acc), terms in sorted(usage.items()):
        nominal, borrow_limit, lend_limit = limits(team, acc)
        used = sum(a * x for a, x in terms)
        most = sum(a for a, _ in terms)
        if domain.get(team) is None:
            m.add(used <= nominal)
            continue
        if most <= nominal and lend_limit >= nominal:
            continue  # never borrows; lends min(L, N - U) = N - U (below)
        b = m.new_int_var(0, max(0, most - nominal), f"borrowed[{team},{acc}]")
        m.add_max_equality(b, [used - nominal, 0])
        if borrow_limit is not None:
            m.add(b <= borrow_limit)
        lend = m.new_int_var(0, lend_limit, f"lendable[{team},{acc}]")
        m.add_min_equality(lend, [lend_limit, nominal - used + b])
        borrowed[(team, acc)], lendable[(team, acc)] = b, lend
    for acc in sorted({acc for _, acc in borrowed}):
        for root in sorted(members):
            borrowers = [borrowed[(t, acc)] for t in members[root] if (t, acc) in borrowed]
            if not borrowers:
                continue
            lend_terms: list[cp_model.LinearExprT] = []
            for t in members[root]:
                nominal, _, lend_limit = limits(t, acc)
                if (t, acc) in lendable:
                    lend_terms.append(lendable[(t, acc)])
                elif (t, acc) in usage:  # never beyond nominal, and L = N: lends N - U
                    lend_terms.append(nominal - sum(a * x for a, x in usage[(t, acc)]))
                else:
                    lend_terms.append(min(lend_limit, nominal))
            m.add(sum(borrowers) <= sum(lend_terms))

    # -- spread replicas (spread.py): the greedy's rules as constraints, its preference as stage (2b) ---------
    unspread = _spread(m, pl, cands)

    # -- budgets ----------------------------------------------------------------------------------------------
    spend: dict[str, list[_Candidate]] = defaultdict(list)
    for c in cands:
        spend[c.info.team].append(c)
    for team, team_cands in sorted(spend.items()):
        budget = pl.teams[team].budget_monthly_usd
        if budget is None:
            continue
        jobs = len({c.info.id for c in team_cands})
        m.add(sum(round(_attributed(c) * BUDGET_SCALE) * c.x for c in team_cands)
              <= round(budget / HOURS_PER_MONTH * BUDGET_SCALE) + jobs)

    # -- solve (1): work (one solve per class, high to low, if strict), (2): work away from its data, then (3):
    # cost, each with the earlier ones held at the values found ----------------------------------------------
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.linearization_level = 2   # the full LP: proves the example fleet optimal 2x sooner
    solver.parameters.max_deterministic_time = time_limit_s
    solver.parameters.max_time_in_seconds = 3 * time_limit_s
    all_vars = _all_vars(cands, opened, wholes, borrowed, lendable)
    if objective == "strict":
        stages = [sum(job_size(c.info) * c.x for c in cands if c.info.priority == level)
                  for level in sorted({c.info.priority for c in cands}, reverse=True)]
    else:
        stages = [sum(job_work(c.info) * c.x for c in cands)]
    n_work = len(stages)
    away = [job_size(c.info) * c.x for c in cands if away_from_data(c.info.job, c.ps.pool)]
    if away:
        stages.append(-sum(away))   # maximized: the least work outside its data region
    if unspread:   # after it: the default spread is best effort and yields to the data region (spread.py)
        stages.append(-sum(unspread))   # maximized: the fewest spread jobs with every replica in one domain
    proven = True
    work_bound = 0
    for i, expr in enumerate(stages):
        m.maximize(expr)
        st = solver.solve(m)
        proven = proven and st == cp_model.OPTIMAL
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if st in (cp_model.MODEL_INVALID, cp_model.INFEASIBLE):  # the empty plan is always feasible
                raise RuntimeError(f"exact planner model is {solver.status_name(st)}: {m.validate()}")
            return _unknown(pl, base, solver.status_name(st), time.perf_counter() - started, reason)
        found = round(solver.objective_value)
        if i < n_work:
            work_bound = math.floor(solver.best_objective_bound + 1e-6)
        hint = [(var, solver.value(var)) for var in all_vars]
        m.add(expr >= found)
        m.clear_hints()  # type: ignore[no-untyped-call]
        for var, val in hint:
            m.add_hint(var, val)
    m.minimize(sum(p * o for p, o in cost_terms) + cost_fixed)
    st2 = solver.solve(m)
    if st2 not in (cp_model.OPTIMAL, cp_model.FEASIBLE):  # pragma: no cover - the hint is a solution
        return _unknown(pl, base, solver.status_name(st2), time.perf_counter() - started, reason)
    cost_bound = solver.best_objective_bound / COST_SCALE
    work = sum(job_work(c.info) for c in cands if solver.boolean_value(c.x))
    if objective == "strict":   # no weighted bound from class-by-class solves: proven, or every job placed
        work_bound = work if proven else sum(job_work(info) for info in pl.jobs.values())

    plan = _extract(pl, base, solver, cands, wholes, reason)
    status = "OPTIMAL" if proven and st2 == cp_model.OPTIMAL else "FEASIBLE"
    return ExactResult(plan, status, "OPTIMAL" if proven else "FEASIBLE", solver.status_name(st2), work, work_bound,
                       cost_bound, time.perf_counter() - started)


def _spread(m: cp_model.CpModel, pl: PlanState, cands: list[_Candidate]) -> list[cp_model.IntVar]:
    """The spread rules over the replicas of each spread job (spread.py), as the greedy keeps them in its
    final plan: replicas in one pool run one option and sit on distinct units; with an explicit `spread:`
    two or more placed replicas never all share one domain; without one, `unspread[job]` is 1 where they
    do (minimized in its own stage). Returns the `unspread` variables."""
    mine: dict[str, list[_Candidate]] = defaultdict(list)
    for c in cands:
        if c.info.siblings:
            mine[c.info.parent].append(c)
    out: list[cp_model.IntVar] = []
    for job_id in sorted(mine):
        group = mine[job_id]
        first = group[0].info
        r = len(first.siblings)
        placed = sum(c.x for c in group)
        per_pool: dict[str, list[_Candidate]] = defaultdict(list)
        per_domain: dict[str, list[_Candidate]] = defaultdict(list)
        for c in group:
            per_pool[c.ps.pool.key].append(c)
            per_domain[domain(c.ps.pool, first.spread)].append(c)
        for key, here in sorted(per_pool.items()):
            options = sorted({c.opt.index for c in here})
            if len(options) > 1:
                uses = [m.new_bool_var(f"opt[{job_id},{key},{o}]") for o in options]
                for c in here:
                    m.add(c.x <= uses[options.index(c.opt.index)])
                m.add(sum(uses) <= 1)
            sharing = [c for c in here if not c.gang.whole_units]
            if len(sharing) > 1:
                for u in range(len(sharing[0].z)):
                    m.add(sum(c.z[u] for c in sharing) <= 1)
        u_var = None if first.hard else m.new_bool_var(f"unspread[{job_id}]")
        for _, here in sorted(per_domain.items()):
            inside = sum(c.x for c in here)
            m.add(inside - 1 <= r * (placed - inside) + (r * u_var if u_var is not None else 0))
        if u_var is not None:
            out.append(u_var)
    return out


def _attributed(c: _Candidate) -> float:
    """The greedy's attributed $/h of one placement (unit price * share of the unit * units)."""
    return c.ps.least_charge(c.gang, c.info.job.replicas)


def _all_vars(cands: list[_Candidate], *groups: dict[str, list[cp_model.IntVar]]
              | dict[tuple[str, str], cp_model.IntVar]) -> list[cp_model.IntVar]:
    out: list[cp_model.IntVar] = []
    for c in cands:
        out.append(c.x)
        out.extend(c.z)
    for g in groups:
        for val in g.values():
            out.extend(val if isinstance(val, list) else [val])
    return out


def _extract(pl: PlanState, base: Plan | None, solver: cp_model.CpSolver, cands: list[_Candidate],
             wholes: dict[str, list[cp_model.IntVar]], reason: str) -> Plan:
    """The solution as a Plan: whole units handed out in job order, units renumbered 0..k-1 per pool, then
    committed through the greedy's own pool state (which re-checks capacity) and summarized like it."""
    chosen = [c for c in cands if solver.boolean_value(c.x)]
    free_whole = {key: [u for u, w in enumerate(wh) if solver.boolean_value(w)] for key, wh in wholes.items()}
    units_of: dict[str, list[int]] = {}
    for c in chosen:  # cands are in job-id order
        key = c.ps.pool.key
        if c.gang.whole_units:
            k = c.gang.whole_units * c.info.job.replicas
            units_of[c.info.id], free_whole[key] = free_whole[key][:k], free_whole[key][k:]
        else:
            units_of[c.info.id] = [u for u, z in enumerate(c.z) if solver.boolean_value(z)]
    used: dict[str, set[int]] = defaultdict(set)
    for c in chosen:
        used[c.ps.pool.key].update(units_of[c.info.id])
    renumber = {key: {u: i for i, u in enumerate(sorted(us))} for key, us in used.items()}
    for c in chosen:
        units = tuple(sorted(renumber[c.ps.pool.key][u] for u in units_of[c.info.id]))
        if not c.ps.take(units, c.gang):
            raise RuntimeError(f"exact planner: {c.info.id} does not fit {c.ps.pool.key} units {units}")
        pl.commit(c.info, c.ps, c.opt, units, kept=False)
    return _freeze(pl, base, reason)


def _freeze(pl: PlanState, base: Plan | None, pending_reason: str) -> Plan:
    before = {(p.job, p.pool_key): p for p in base.placements} if base else {}
    placements = []
    for (job_id, key), lives in sorted(group_lives(pl).items()):
        lv = lives[0]
        units = tuple(sorted(u for x in lives for u in x.units))
        here = Placement(job_id, lv.pool.pool.cluster, lv.pool.pool.name, lv.option.index, units,
                         lv.gang.accelerators, "", sum(x.hourly_usd for x in lives), "",
                         any(outside(x.info, x.pool) for x in lives))
        b = before.get((job_id, key))
        if b is None and not any(j == job_id for j, _ in before):
            status, reason = "new", ""
        elif b is not None and stays(b, here, interchangeable(lv.pool.pool)):
            # a GPU pool's nodes renumbered 0..k-1 are the same place; one whose file changed what its pods run is
            # re-created there, as the greedy plan says (sticky.restart_reason; before 2026-12-07: kept)
            why = restart_reason(pl, lv.info, lv.pool)
            status, reason = ("kept", "") if why is None else ("moved", why)
        else:
            status, reason = "moved", MOVED_REASON
        placements.append(replace(here, status=status, reason=reason))
    pending = [Pending(job, (pending_reason,)) for job in sorted({i.parent for i in pl.jobs.values()
                                                                   if i.id not in pl.live})]
    return summarize(pl, not_spread(pl, placements), pending)


def _unknown(pl: PlanState, base: Plan | None, status: str, seconds: float, reason: str) -> ExactResult:
    """No solution within the limits (cannot happen for the first solve in practice: nothing placed is a
    solution): every job pending, pools at min."""
    plan = _freeze(pl, base, reason)
    return ExactResult(plan, "UNKNOWN", status, status, 0, 0, 0.0, seconds)


def solve_exact(v: Validated, base: Plan | None = None, *, time_limit_s: float = 20.0) -> tuple[Plan, str]:
    """The exact plan and the solver status: OPTIMAL (proven), FEASIBLE (a time limit hit) or UNKNOWN."""
    r = solve(v, base, time_limit_s=time_limit_s)
    return r.plan, r.status


def plan_exact(v: Validated, base: Plan | None = None, *, time_limit_s: float = 20.0) -> Plan:
    """`fleet plan --solver exact`: the plan that places the most work class by class (highest class
    first), then costs least."""
    return with_starts(v, solve(v, base, time_limit_s=time_limit_s).plan)


def with_starts(v: Validated, plan: Plan) -> Plan:
    """The exact plan with its pending jobs' expected starts (plan/starts.py): its placements taken as they stand
    (the exact mode makes no reservations)."""
    st = PlanState(v, plan)
    keep_base(st)
    return annotate(st, plan)
