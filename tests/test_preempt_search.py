"""The preemption search's pruning (plan/preempt.py: victim groups, budget bisection, units searched last)
gives the same plans as the straightforward search: every kept job asked `allowed`, every candidate pool
simulated. Generated fleets (bench/generate.py), a fifth of the jobs raised one priority class and new
production jobs merged, planned from a base plan and from what runs."""

from __future__ import annotations

import random
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler import pipeline
from reconciler.catalog import load_catalog
from reconciler.plan import greedy, preempt, victims
from reconciler.plan import plan as plan_greedy
from reconciler.plan.capacity import PoolState
from reconciler.plan.live import LiveInputs, Running
from reconciler.plan.state import JobInfo, Live, PlanState, amount, qkey
from reconciler.plan.types import Plan
from reconciler.resolve import ResolvedOption
from reconciler.validate import Validated

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from generate import generate

BUMP = {"opportunistic": "research", "research": "production", "production": "critical"}


def reference_try_preempt(st: PlanState, job: JobInfo) -> bool:
    """The search as its docstring states it (and plan/victims.py's scope, size and age rules), without
    indexes or pruning."""
    best: tuple[tuple[object, ...], list[tuple[str, str, float]], ResolvedOption, PoolState] | None = None

    def borrows(lv: Live) -> bool:
        return preempt.borrows_past_new(st, lv.info.team, qkey(lv.info, lv.option), lv.info.priority)

    for opt in job.options:
        need = amount(job, opt)
        nominal = st.quota.shortfall(job.team, qkey(job, opt), need, allow_borrow=False) == 0
        allowed_here = sorted((victims.restart_cost(st, lv) if victims.after_minutes(st, lv) is not None
                                else preempt.at_risk(st, lv),
                               lv.info.priority, j, why)
                              for j, lv in list(st.live.items()) if lv.kept and victims.protected(st, lv) is None
                              if (why := preempt.allowed(st, lv, job, qkey(job, opt), need, nominal)) is not None)
        if not allowed_here:
            continue
        cands = st.candidates(job, opt)
        for ps in cands:
            here = [a for a in allowed_here if st.live[a[2]].pool is ps or st.live[a[2]].pool not in cands]
            first = sorted(here, key=lambda a: (not borrows(st.live[a[2]]), a))
            snug = sorted(here, key=lambda a: (victims.snug(need, amount(st.live[a[2]].info, st.live[a[2]].option)), a))
            for order in (first, snug):
                chosen = preempt._victims_for(st, job, opt, ps, order)
                if chosen:
                    key = preempt.rank(st, job, chosen, opt, ps)
                    if best is None or key < best[0]:
                        best = (key, chosen, opt, ps)
    return best is not None and preempt.take(st, job, best[1], best[2], best[3])


def scenarios(seed: int) -> tuple[Validated, Plan, LiveInputs]:
    """The changed fleet, the plan of the fleet before the change (its base), and what runs (that plan's batch
    jobs). The first plan is from git with nothing running: no preemption search is reached, so it is made
    once for both searches."""
    files = generate(4, 40, 6, 200, seed)
    catalog = load_catalog()
    v0 = pipeline.check({k: t.encode() for k, t in files.items()}, catalog)
    first = plan_greedy(v0)
    rng = random.Random(seed)
    jobs = sorted(k for k in files if k.startswith("jobs/"))
    for path in rng.sample(jobs, len(jobs) // 5):
        m = re.search(r"priority: (\w+)", files[path])
        if m and m.group(1) in BUMP:
            files[path] = files[path].replace(f"priority: {m.group(1)}", f"priority: {BUMP[m.group(1)]}")
    for i, path in enumerate(rng.sample(jobs, len(jobs) // 20)):
        files[f"jobs/{path.split('/')[1]}/new-{i:05d}.yaml"] = re.sub(
            r"name: job-\d+", f"name: new-{i:05d}", files[path]).replace("priority: research", "priority: production")
    v1 = pipeline.check({k: t.encode() for k, t in files.items()}, catalog)
    assert v1.ok
    kinds = {j.id: j.kind for j in v1.loaded.jobs}
    live = LiveInputs(datetime(2026, 11, 23, tzinfo=UTC), {
        p.job: Running(p.job, p.cluster, p.pool, p.units) for p in first.placements
        if kinds.get(p.job) not in (None, "inference")})
    return v1, first, live


def plans(v1: Validated, first: Plan, live: LiveInputs) -> list[tuple[str, Plan]]:
    return [("base", plan_greedy(v1, first)), ("live", plan_greedy(v1, None, live))]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pruned_preemption_search_plans_as_the_straightforward_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    v1, first, live = scenarios(seed)
    assert not first.preemptions
    fast = plans(v1, first, live)
    assert sum(len(p.preemptions) for _, p in fast) > 0   # the search is exercised
    monkeypatch.setattr(greedy, "try_preempt", reference_try_preempt)
    slow = plans(v1, first, live)
    for (name, a), (_, b) in zip(fast, slow, strict=True):
        assert a.to_json() == b.to_json(), name
